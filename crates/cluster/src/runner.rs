//! Running the controllers: CRD check, leader election with a `coordination.k8s.io/v1`
//! Lease (so two replicas never both reconcile), and graceful shutdown.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use kube::api::ListParams;
use kube::runtime::reflector::{self, ObjectRef};

use crate::member_index::MemberIndex;
use kube::runtime::{Controller, WatchStreamExt, watcher};
use kube::{Api, Client, CustomResourceExt, Resource, ResourceExt};
use kube_lease_manager::LeaseManagerBuilder;
use tokio::sync::watch;

use crate::claim::{ClaimContext, claim_error_policy, reconcile_claim};
use crate::crd::{
    POOL_LABEL, VirtualMachine, VirtualMachineClaim, VirtualMachinePool, VirtualMachineProvider,
};
use crate::ek_authority::EkAuthority;
use crate::error::{Error, is_status};
use crate::metrics::Metrics;
use crate::pool::{PoolContext, pool_error_policy, reconcile_pool};
use crate::provider::{
    ProviderContext, SimulatedProviderConfig, provider_error_policy, publish_provider, reconcile_vm,
};

/// How to run the controllers.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// Namespace to watch; `None` watches all namespaces.
    pub namespace: Option<String>,
    /// The console's own namespace: where the leader-election Lease and the simulated
    /// provider's EK CA Secret live.
    pub lease_namespace: String,
    /// Name of the Lease. Default `banlieue-console-controllers`.
    pub lease_name: String,
    /// This replica's identity in the Lease (`spec.holderIdentity`), unique per process,
    /// e.g. the pod name.
    pub identity: String,
    /// Seconds a Lease stays valid after its last renewal. Default 15.
    pub lease_duration_seconds: u64,
    /// Seconds before expiry at which the holder renews (also the tolerated clock skew).
    /// Default 5; must be smaller than `lease_duration_seconds`.
    pub lease_grace_seconds: u64,
    /// Longest interval between two passes of one pool. Default 10 s.
    pub pool_resync: Duration,
    /// Run the simulated provider too (development and tests).
    pub simulated_provider: Option<SimulatedProviderConfig>,
}

impl ControllerConfig {
    /// Defaults for everything but where the Lease lives and who this replica is.
    pub fn new(lease_namespace: impl Into<String>, identity: impl Into<String>) -> Self {
        Self {
            namespace: None,
            lease_namespace: lease_namespace.into(),
            lease_name: "banlieue-console-controllers".into(),
            identity: identity.into(),
            lease_duration_seconds: 15,
            lease_grace_seconds: 5,
            pool_resync: Duration::from_secs(10),
            simulated_provider: None,
        }
    }
}

fn api<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// Fails with an actionable [`Error::CrdMissing`] when a banlieue CRD is not installed.
///
/// Errors: [`Error::CrdMissing`], or the API error of the probe.
pub async fn check_crds(client: &Client, namespace: Option<&str>) -> Result<(), Error> {
    let probes = [
        (
            api::<VirtualMachinePool>(client, namespace)
                .list_metadata(&ListParams::default().limit(1))
                .await
                .err(),
            VirtualMachinePool::crd_name(),
        ),
        (
            api::<VirtualMachine>(client, namespace)
                .list_metadata(&ListParams::default().limit(1))
                .await
                .err(),
            VirtualMachine::crd_name(),
        ),
        (
            api::<VirtualMachineClaim>(client, namespace)
                .list_metadata(&ListParams::default().limit(1))
                .await
                .err(),
            VirtualMachineClaim::crd_name(),
        ),
        (
            Api::<VirtualMachineProvider>::all(client.clone())
                .list_metadata(&ListParams::default().limit(1))
                .await
                .err(),
            VirtualMachineProvider::crd_name(),
        ),
    ];
    for (error, crd) in probes {
        match error {
            None => {}
            Some(e) if is_status(&e, 404) => {
                return Err(Error::CrdMissing { crd: crd.into() });
            }
            Some(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Runs the claim, pool and (when configured) simulated-provider controllers, and keeps
/// the groups the console may impersonate ([`crate::impersonable`]), while this
/// replica holds the leader Lease, until `shutdown` completes; then stops them, waits for
/// reconciles in flight, and releases the Lease so another replica takes over at once.
/// Losing the Lease stops the controllers and puts this replica back in the queue.
///
/// `metrics` is shared with the caller (e.g. the server's `/metrics`).
///
/// Errors: a missing CRD ([`Error::CrdMissing`], checked first), or the Lease could not be
/// created or read ([`Error::Lease`]).
pub async fn run_controllers(
    client: Client,
    config: ControllerConfig,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), Error> {
    check_crds(&client, config.namespace.as_deref()).await?;
    let manager = LeaseManagerBuilder::new(client.clone(), &config.lease_name)
        .with_namespace(&config.lease_namespace)
        .with_identity(&config.identity)
        .with_duration(config.lease_duration_seconds)
        .with_grace(config.lease_grace_seconds)
        .build()
        .await?;
    let (mut leader, lease_task) = manager.watch().await;
    tokio::pin!(shutdown);
    let outcome = loop {
        tokio::select! {
            () = &mut shutdown => break Ok(()),
            became = async { leader.wait_for(|leading| *leading).await.is_ok() } => {
                if !became {
                    break Err(Error::LeaseLost);
                }
            }
        }
        tracing::info!(identity = %config.identity, "holding the controllers' Lease: reconciling");
        let (stop, stopped) = watch::channel(false);
        let controllers = run_leading(client.clone(), &config, metrics.clone(), stopped);
        tokio::pin!(controllers);
        let lost = tokio::select! {
            () = &mut controllers => false,
            () = &mut shutdown => {
                let _ = stop.send(true);
                within_stop_grace("the controllers", controllers).await;
                break Ok(());
            }
            _ = async { leader.wait_for(|leading| !*leading).await.is_ok() } => true,
        };
        let _ = stop.send(true);
        if lost {
            tracing::warn!(identity = %config.identity, "lost the controllers' Lease: stopping");
            within_stop_grace("the controllers", controllers).await;
        }
    };
    // Closing the channel makes the lease task release the Lease and end.
    drop(leader);
    match within_stop_grace("releasing the Lease", lease_task).await {
        None | Some(Ok(Ok(_))) => {}
        Some(Ok(Err(error))) => tracing::warn!(%error, "releasing the controllers' Lease failed"),
        Some(Err(error)) => tracing::warn!(%error, "the leader-election task failed"),
    }
    tracing::info!("controllers stopped");
    outcome
}

/// The first wait before [`run_controllers_retrying`] starts the controllers again; it
/// doubles after each failure up to [`RETRY_LONGEST`], and starts over after a run that
/// lasted longer than [`RETRY_LONGEST`].
pub const RETRY_FIRST: Duration = Duration::from_secs(1);
/// The longest wait between two starts of [`run_controllers_retrying`].
pub const RETRY_LONGEST: Duration = Duration::from_secs(30);

/// [`run_controllers`] until `shutdown` completes, started again (after [`RETRY_FIRST`],
/// doubling to [`RETRY_LONGEST`]) whenever it stops with an error — an API server that
/// did not answer at start, a missing CRD, a Lease that could not be read: a console
/// whose cluster was briefly away at start must not stay without controllers while it
/// serves pages. Each failure is logged with the wait before the next start.
pub async fn run_controllers_retrying(
    client: Client,
    config: ControllerConfig,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()> + Send,
) {
    tokio::pin!(shutdown);
    let mut wait = RETRY_FIRST;
    loop {
        let started = tokio::time::Instant::now();
        let ran = run_controllers(
            client.clone(),
            config.clone(),
            metrics.clone(),
            shutdown.as_mut(),
        )
        .await;
        // Only the shutdown ends a run without an error.
        let Err(error) = ran else { return };
        if started.elapsed() > RETRY_LONGEST {
            wait = RETRY_FIRST;
        }
        tracing::error!(%error, retry_in = ?wait, "the controllers stopped; starting them again");
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = shutdown.as_mut() => return,
        }
        wait = (wait * 2).min(RETRY_LONGEST);
    }
}

/// How long a stopping step may take before the shutdown goes on without it: a stop must
/// end within the pod's termination grace period even if a request to the API server
/// hangs.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// `step` if it completes within [`STOP_GRACE`]; otherwise `None`, with a warning naming
/// `what`.
async fn within_stop_grace<F: Future>(what: &str, step: F) -> Option<F::Output> {
    let outcome = tokio::time::timeout(STOP_GRACE, step).await.ok();
    if outcome.is_none() {
        tracing::warn!("{what} did not stop within {STOP_GRACE:?}; stopping without them");
    }
    outcome
}

/// The controllers themselves, until `stopped` turns true.
async fn run_leading(
    client: Client,
    config: &ControllerConfig,
    metrics: Arc<Metrics>,
    stopped: watch::Receiver<bool>,
) {
    let namespace = config.namespace.as_deref();
    let stop_signal = move || {
        let mut stopped = stopped.clone();
        async move {
            let _ = stopped.wait_for(|s| *s).await.is_ok();
        }
    };
    let watch_config = watcher::Config::default();

    // Caches the claim controller picks from.
    let (members, members_writer) = reflector::store();
    let members_index = Arc::new(MemberIndex::default());
    let index_feed = members_index.clone();
    let members_stream = reflector::reflector(
        members_writer,
        watcher(
            api::<VirtualMachine>(&client, namespace),
            watch_config.clone(),
        ),
    )
    .default_backoff()
    .inspect_ok(move |event| index_feed.apply_event(event))
    .applied_objects()
    .take_until(stop_signal())
    .for_each(|_| futures::future::ready(()));
    let (pools, pools_writer) = reflector::store();
    let pools_stream = reflector::reflector(
        pools_writer,
        watcher(
            api::<VirtualMachinePool>(&client, namespace),
            watch_config.clone(),
        ),
    )
    .default_backoff()
    .applied_objects()
    .take_until(stop_signal())
    .for_each(|_| futures::future::ready(()));
    // Providers are cluster-scoped: their trust bundles serve every namespace.
    let (providers, providers_writer) = reflector::store();
    let (provider_changed, provider_changes) = futures::channel::mpsc::unbounded::<()>();
    let providers_stream = reflector::reflector(
        providers_writer,
        watcher(
            Api::<VirtualMachineProvider>::all(client.clone()),
            watch_config.clone(),
        ),
    )
    .default_backoff()
    .touched_objects()
    .take_until(stop_signal())
    .for_each(move |_| {
        let _ = provider_changed.unbounded_send(());
        futures::future::ready(())
    });

    let claim_ctx = Arc::new(ClaimContext {
        client: client.clone(),
        members: members.clone(),
        pools: pools.clone(),
        providers: providers.clone(),
        members_index: members_index.clone(),
        metrics: metrics.clone(),
    });
    let claim_providers = providers.clone();
    let pool_members = members.clone();
    let claims_client = client.clone();
    let claims_stop = stop_signal();
    let claims_metrics = metrics.clone();
    let claims = async move {
        let client = claims_client;
        // Do not decide from empty caches.
        let _ = tokio::join!(
            members.wait_until_ready(),
            pools.wait_until_ready(),
            claim_providers.wait_until_ready()
        );
        let controller = Controller::new(
            api::<VirtualMachineClaim>(&client, namespace),
            watch_config.clone(),
        );
        let claims_cache = controller.store();
        let members_cache = members_index.clone();
        let wake_cache = claims_cache.clone();
        let run = controller
            .watches(
                api::<VirtualMachine>(&client, namespace),
                watch_config.clone(),
                move |vm: VirtualMachine| claims_to_wake(&wake_cache, &members_cache, &vm),
            )
            // A provider changed: every verdict may have (they are rare). Woken by the
            // provider cache itself, once it holds the change the passes will read.
            .reconcile_all_on(provider_changes)
            .graceful_shutdown_on(claims_stop)
            .run(reconcile_claim, claim_error_policy, claim_ctx)
            .for_each(|_| futures::future::ready(()));
        // `banlieue_claims` counts this cache once it has listed every claim (an empty
        // cache would read as "no claims"), and only while this replica leads.
        let follow = async {
            if claims_cache.wait_until_ready().await.is_ok() {
                claims_metrics.follow_claims(claims_cache.clone());
            }
            std::future::pending::<()>().await;
        };
        tokio::select! {
            () = run => {}
            () = follow => {}
        }
        claims_metrics.forget_claims();
    };

    let pool_ctx = Arc::new(PoolContext {
        client: client.clone(),
        resync: config.pool_resync,
        members: Some(pool_members.clone()),
        providers: providers.clone(),
        metrics: metrics.clone(),
    });
    let pools_controller = Controller::new(
        api::<VirtualMachinePool>(&client, namespace),
        watcher::Config::default(),
    );
    let pools_naming = pools_controller.store();
    let pools_controller = pools_controller
        .watches(
            Api::<VirtualMachineProvider>::all(client.clone()),
            watcher::Config::default(),
            move |provider: VirtualMachineProvider| {
                let name = provider.name_any();
                pools_naming
                    .state()
                    .into_iter()
                    .filter(|pool| pool.spec.provider_ref == name)
                    .map(|pool| ObjectRef::from_obj(pool.as_ref()))
                    .collect::<Vec<_>>()
            },
        )
        .watches(
            api::<VirtualMachine>(&client, namespace),
            watcher::Config::default(),
            |vm: VirtualMachine| {
                let namespace = vm.namespace()?;
                let pool = vm.labels().get(POOL_LABEL)?;
                Some(ObjectRef::<VirtualMachinePool>::new(pool).within(&namespace))
            },
        )
        .graceful_shutdown_on(stop_signal())
        .run(reconcile_pool, pool_error_policy, pool_ctx)
        .for_each(|_| futures::future::ready(()));
    // Passes decide from the member and provider caches: not before they have listed
    // everything.
    let pool_providers = providers.clone();
    let pools_controller = async move {
        let _ = tokio::join!(
            pool_members.wait_until_ready(),
            pool_providers.wait_until_ready()
        );
        pools_controller.await;
    };

    let provider = async {
        if let Some(provider_config) = config.simulated_provider.clone() {
            let prepared = tokio::select! {
                authority = prepare_simulated_provider(&client, &config.lease_namespace) => Some(authority),
                () = stop_signal() => None,
            };
            let Some(authority) = prepared else {
                return;
            };
            let ctx = Arc::new(ProviderContext {
                client: client.clone(),
                config: provider_config,
                authority: authority.clone(),
                metrics: metrics.clone(),
            });
            let vms = Controller::new(
                api::<VirtualMachine>(&client, namespace),
                watcher::Config::default(),
            )
            .graceful_shutdown_on(stop_signal())
            .run(reconcile_vm, provider_error_policy, ctx)
            .for_each(|_| futures::future::ready(()));
            let republish = keep_published(&client, &authority, &providers);
            tokio::select! {
                () = vms => {}
                () = republish => {}
            }
        }
    };
    // The groups the console may impersonate follow the custom roles.
    let impersonable = crate::impersonable::keep_reconciled(client.clone(), stop_signal());
    tokio::join!(
        members_stream,
        pools_stream,
        providers_stream,
        claims,
        pools_controller,
        provider,
        impersonable
    );
}

/// How long the simulated provider waits before trying its EK CA and provider object again,
/// and how often it checks that its provider object still holds its CA.
const PREPARE_RETRY: Duration = Duration::from_secs(5);

/// Publishes the simulated provider again whenever the provider cache shows it gone or
/// without `authority`'s CA (someone deleted or edited it); never returns.
async fn keep_published(
    client: &Client,
    authority: &EkAuthority,
    providers: &reflector::Store<VirtualMachineProvider>,
) {
    let mut tick = tokio::time::interval(PREPARE_RETRY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let published = providers
            .get(&ObjectRef::new(crate::provider::SIMULATED_PROVIDER))
            .is_some_and(|p| {
                p.spec.attestation.as_ref().is_some_and(|a| {
                    crate::provider::holds_certificate(
                        &a.ek_trust_bundle,
                        authority.certificate_pem(),
                    )
                })
            });
        if !published && let Err(error) = publish_provider(client, authority).await {
            tracing::warn!(%error, "the simulated provider cannot publish its EK CA; retrying");
        }
    }
}

/// The simulated provider's EK CA (from, or made into, its Secret in `namespace`), once it
/// is published in the `VirtualMachineProvider`; retried until both succeed, since no VM
/// may become Ready without an EK certificate a broker can check.
async fn prepare_simulated_provider(client: &Client, namespace: &str) -> Arc<EkAuthority> {
    loop {
        let prepared = async {
            let authority = EkAuthority::load_or_create(client, namespace).await?;
            publish_provider(client, &authority).await?;
            Ok::<_, Error>(authority)
        };
        match prepared.await {
            Ok(authority) => return Arc::new(authority),
            Err(error) => {
                tracing::warn!(%error, "the simulated provider cannot publish its EK CA yet; retrying");
                tokio::time::sleep(PREPARE_RETRY).await;
            }
        }
    }
}

/// The claims a change of `vm` concerns: the claim that owns it (a vanished or terminating
/// member moves its claim on), and, when `vm` is free to take, the oldest unbound claims of
/// its pool, as many as the pool has free members, so Pending claims bind as soon as a
/// member is Ready (first come, first served) rather than at their next 3-second retry.
fn claims_to_wake(
    claims: &reflector::Store<VirtualMachineClaim>,
    members: &MemberIndex,
    vm: &VirtualMachine,
) -> Vec<ObjectRef<VirtualMachineClaim>> {
    let Some(namespace) = vm.namespace() else {
        return Vec::new();
    };
    let mut wake: Vec<ObjectRef<VirtualMachineClaim>> = vm
        .owner_references()
        .iter()
        .filter(|o| o.kind == "VirtualMachineClaim")
        .map(|o| ObjectRef::new(&o.name).within(&namespace))
        .collect();
    if crate::convert::member(vm).is_available()
        && let Some(pool) = vm.labels().get(POOL_LABEL)
    {
        let free = members.available(&namespace, pool).max(1);
        let mut waiting: Vec<_> = claims
            .state()
            .into_iter()
            .filter(|c| {
                c.namespace().as_deref() == Some(namespace.as_str())
                    && &c.spec.pool_ref == pool
                    && c.metadata.deletion_timestamp.is_none()
                    && c.status.as_ref().is_none_or(|s| {
                        s.virtual_machine_ref.is_none() && s.phase.as_deref() != Some("Failed")
                    })
            })
            .collect();
        waiting.sort_by(|a, b| {
            (&a.metadata.creation_timestamp, a.name_any())
                .cmp(&(&b.metadata.creation_timestamp, b.name_any()))
        });
        wake.extend(
            waiting
                .iter()
                .take(free)
                .map(|c| ObjectRef::from_obj(c.as_ref())),
        );
    }
    wake
}
