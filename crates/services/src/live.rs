//! Live views: a typed stream of snapshots of the dashboard or of one claim, sent again
//! whenever what the principal sees changes (watches as the principal) and re-checking
//! the viewer before each, so a stream ends with its session and follows role changes.
//! Framing (server-sent events) is the caller's.

use std::sync::Arc;
use std::time::Duration;

use banlieue_domain::views::{ClaimView, DashboardView};
use cluster::crd::{VirtualMachineClaim, VirtualMachinePool};
use futures::{Stream, StreamExt};
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};

use crate::claims::check_object_path;
use crate::{Console, Principal, Result};

/// How often an idle live stream re-checks its viewer.
pub const RECHECK: Duration = Duration::from_secs(15);

/// Who a live stream serves, asked again before every snapshot.
pub trait Viewer: Send + Sync + 'static {
    /// The principal as they are now; `None` once they may no longer see anything (their
    /// session ended, the account was disabled): the stream then ends.
    fn current(&self) -> impl Future<Output = Option<Principal>> + Send;
}

impl Console {
    /// The dashboard of `viewer`, after each batch of changes to the pools or claims
    /// they may watch (and at least every [`RECHECK`]), skipping a snapshot equal to the
    /// last one sent and any that could not be loaded.
    ///
    /// Errors: [`crate::ServiceError::NoCluster`], [`crate::ServiceError::Unavailable`]
    /// (no client for the principal).
    pub async fn dashboard_snapshots<V: Viewer>(
        self: &Arc<Self>,
        who: &Principal,
        viewer: V,
    ) -> Result<impl Stream<Item = DashboardView> + Send + use<V>> {
        let client = self.client(who).await?;
        let claims = changes(Api::<VirtualMachineClaim>::all(client.clone()), None);
        let pools = changes(Api::<VirtualMachinePool>::all(client), None);
        let console = self.clone();
        Ok(snapshots(
            viewer,
            futures::stream::select(claims, pools),
            move |who| {
                let console = console.clone();
                async move { console.dashboard(&who).await.ok() }
            },
        ))
    }

    /// One claim's page for `viewer`, after each change to it (a watch on that one name);
    /// once the claim is deleted the view says it is gone ([`ClaimView::gone`]).
    ///
    /// Errors, before any stream opens: [`crate::ServiceError::NotFound`] when the claim
    /// does not exist or the path could name none; Kubernetes' refusal to read it;
    /// [`crate::ServiceError::NoCluster`], [`crate::ServiceError::Unavailable`].
    pub async fn claim_snapshots<V: Viewer>(
        self: &Arc<Self>,
        who: &Principal,
        viewer: V,
        namespace: &str,
        name: &str,
    ) -> Result<impl Stream<Item = ClaimView> + Send + use<V>> {
        self.one_claim_snapshots(
            who,
            viewer,
            namespace,
            name,
            |console, who, namespace, name| async move {
                match console.claim(&who, &namespace, &name).await {
                    Ok(Some(view)) => Some(view),
                    Ok(None) => Some(ClaimView::gone(&namespace, &name)),
                    Err(_) => None,
                }
            },
        )
        .await
    }

    /// One claim as Kubernetes has it, for `viewer`, after each change to it; its
    /// [`ClaimRevision`] holds `None` once it is deleted (what the JSON API's watch
    /// sends).
    ///
    /// Errors: as [`Console::claim_snapshots`].
    pub async fn claim_object_snapshots<V: Viewer>(
        self: &Arc<Self>,
        who: &Principal,
        viewer: V,
        namespace: &str,
        name: &str,
    ) -> Result<impl Stream<Item = ClaimRevision> + Send + use<V>> {
        self.one_claim_snapshots(
            who,
            viewer,
            namespace,
            name,
            |console, who, namespace, name| async move {
                console
                    .claim_object(&who, &namespace, &name)
                    .await
                    .ok()
                    .map(ClaimRevision)
            },
        )
        .await
    }

    /// `load(console, principal, namespace, name)` for `viewer` after each change to the
    /// claim `namespace/name` (a watch on that one name), which must exist when asked.
    async fn one_claim_snapshots<V, T, Fut, Load>(
        self: &Arc<Self>,
        who: &Principal,
        viewer: V,
        namespace: &str,
        name: &str,
        load: Load,
    ) -> Result<impl Stream<Item = T> + Send + use<V, T, Fut, Load>>
    where
        V: Viewer,
        T: PartialEq + Clone + Send,
        Fut: Future<Output = Option<T>> + Send,
        Load: Fn(Arc<Self>, Principal, String, String) -> Fut + Send + Sync + 'static,
    {
        check_object_path(namespace, name)?;
        let api = Api::<VirtualMachineClaim>::namespaced(self.client(who).await?, namespace);
        if api.get_opt(name).await?.is_none() {
            return Err(crate::ServiceError::not_found("no such claim"));
        }
        let selector = format!("metadata.name={name}");
        let console = self.clone();
        let (namespace, name) = (namespace.to_owned(), name.to_owned());
        Ok(snapshots(
            viewer,
            changes(api, Some(&selector)),
            move |who| load(console.clone(), who, namespace.clone(), name.clone()),
        ))
    }
}

/// A claim as Kubernetes has it (`None`: deleted), equal to another at the same
/// `resourceVersion`, so a live stream sends each revision once.
#[derive(Debug, Clone)]
pub struct ClaimRevision(pub Option<VirtualMachineClaim>);

impl PartialEq for ClaimRevision {
    fn eq(&self, other: &Self) -> bool {
        let version = |revision: &Self| {
            revision
                .0
                .as_ref()
                .map(|claim| claim.metadata.resource_version.clone())
        };
        version(self) == version(other)
    }
}

/// A tick for each batch of watch events on `api` (with an optional field selector),
/// restarting the watch with back-off after errors — except a refusal: a principal
/// Kubernetes does not let list or watch `K` gets no ticks from it (rather than a retry a
/// second, forever).
fn changes<K>(api: Api<K>, fields: Option<&str>) -> impl Stream<Item = ()> + Send + use<K>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
{
    let mut config = watcher::Config::default();
    if let Some(fields) = fields {
        config = config.fields(fields);
    }
    watcher(api, config)
        .default_backoff()
        .take_while(|event| {
            let refused = matches!(
                event,
                Err(watcher::Error::InitialListFailed(kube::Error::Api(status))
                    | watcher::Error::WatchStartFailed(kube::Error::Api(status)))
                    if status.code == 403
            );
            std::future::ready(!refused)
        })
        .map(|_| ())
}

/// `load(principal)` after each batch of `changes` (and at least every [`RECHECK`]),
/// with the viewer re-checked first: the stream ends when they are gone. Equal
/// consecutive snapshots and failed loads are skipped.
fn snapshots<T, Fut>(
    viewer: impl Viewer,
    changes: impl Stream<Item = ()> + Send,
    load: impl Fn(Principal) -> Fut + Send + Sync + 'static,
) -> impl Stream<Item = T> + Send
where
    T: PartialEq + Clone + Send,
    Fut: Future<Output = Option<T>> + Send,
{
    let ticks = futures::stream::unfold((), |()| async {
        tokio::time::sleep(RECHECK).await;
        Some(((), ()))
    });
    let (viewer, load) = (Arc::new(viewer), Arc::new(load));
    futures::stream::select(changes, ticks)
        .ready_chunks(256)
        .then(move |_| {
            let (viewer, load) = (viewer.clone(), load.clone());
            async move {
                let who = viewer.current().await?;
                Some(load(who).await)
            }
        })
        .take_while(|checked| std::future::ready(checked.is_some()))
        .filter_map(|checked| std::future::ready(checked.flatten()))
        .scan(None::<T>, |last, snapshot: T| {
            let fresh = (last.as_ref() != Some(&snapshot)).then_some(snapshot);
            if let Some(snapshot) = &fresh {
                *last = Some(snapshot.clone());
            }
            std::future::ready(Some(fresh))
        })
        .filter_map(std::future::ready)
}
