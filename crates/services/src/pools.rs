//! Pools (SPEC §5, operators): listed, saved and deleted as the principal, so Kubernetes
//! RBAC decides; a pool's bounds are the CRD's ([`VirtualMachinePoolSpec::validate`]).

use banlieue_domain::object_names::{is_dns_label, is_dns_subdomain};
use banlieue_domain::views::{PoolForm, PoolStall, PoolsView};
use cluster::crd::{
    VirtualMachinePool, VirtualMachinePoolSpec, VirtualMachineProvider, VirtualMachineTemplate,
};
use cluster::impersonation::may;
use kube::api::{DeleteParams, ListParams, ObjectMeta, Patch, PatchParams};
use kube::{Api, ResourceExt};

use crate::claims::check_object_path;

/// How long a page's header waits to learn whether to show the Pools link: it is
/// navigation, so a slow or unreachable cluster hides the link rather than holding every
/// page (the Users or My account page needs no cluster at all).
pub const NAVIGATION_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(500);
use crate::{Console, Principal, Result, ServiceError};

/// The field manager of the console's server-side applies.
pub(crate) const FIELD_MANAGER: &str = "banlieue-console";

/// A pool as typed in its form: every field as sent, so a refusal can show it again.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SavePool {
    pub namespace: String,
    pub name: String,
    pub warm_replicas: String,
    pub max_replicas: String,
    pub image_revision: String,
    pub cpu: String,
    /// A Kubernetes quantity, e.g. `4Gi`.
    pub memory: String,
    pub image: String,
    pub provider: String,
}

impl SavePool {
    /// The pool this form describes.
    ///
    /// Errors: [`ServiceError::Invalid`] naming the first field that is missing,
    /// malformed or out of the CRD's bounds.
    pub fn to_pool(&self) -> Result<VirtualMachinePool> {
        let number = |field: &str, value: &str| {
            value
                .trim()
                .parse::<u32>()
                .map_err(|_| ServiceError::invalid(field, "not a whole number"))
        };
        let (namespace, name) = (self.namespace.trim(), self.name.trim());
        if !is_dns_label(namespace) {
            return Err(ServiceError::invalid("namespace", "an RFC 1123 label"));
        }
        if !is_dns_subdomain(name) {
            return Err(ServiceError::invalid("name", "an RFC 1123 subdomain"));
        }
        let spec = VirtualMachinePoolSpec {
            warm_replicas: number("warm_replicas", &self.warm_replicas)?,
            max_replicas: number("max_replicas", &self.max_replicas)?,
            image_revision: self.image_revision.trim().to_owned(),
            template: VirtualMachineTemplate {
                cpu: number("cpu", &self.cpu)?,
                memory: self.memory.trim().to_owned(),
                image: self.image.trim().to_owned(),
            },
            provider_ref: self.provider.trim().to_owned(),
            progress_deadline_seconds: None,
        };
        spec.validate()
            .map_err(|(field, reason)| ServiceError::invalid(field, reason))?;
        Ok(VirtualMachinePool {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(namespace.to_owned()),
                ..ObjectMeta::default()
            },
            spec,
            status: None,
        })
    }
}

impl Console {
    /// The Pools page: every pool the principal may list, the form (the pool `editing`
    /// names as `(namespace, name)`, else defaults), and whether Kubernetes lets them
    /// create pools (only then the form and the Edit / Delete buttons show).
    ///
    /// Errors: Kubernetes refusals; [`ServiceError::NoCluster`],
    /// [`ServiceError::Unavailable`].
    pub async fn pools(&self, who: &Principal, editing: Option<(&str, &str)>) -> Result<PoolsView> {
        let client = self.client(who).await?;
        let pool_api = Api::<VirtualMachinePool>::all(client.clone());
        let provider_api = Api::<VirtualMachineProvider>::all(client.clone());
        // The three questions are independent: asked at once.
        let everything = ListParams::default();
        let (pools, providers, can_manage) = tokio::join!(
            pool_api.list(&everything),
            provider_api.list(&everything),
            may(&client, "virtualmachinepools", "create", None),
        );
        let pools: Vec<PoolForm> = pools?.items.iter().map(pool_form).collect();
        // In doubt (not allowed to list them), a name to type.
        let providers = providers
            .inspect_err(|error| {
                tracing::debug!(%error, "cannot list the VirtualMachineProviders as the person");
            })
            .ok()
            .map(|list| {
                let mut names: Vec<String> = list.items.iter().map(ResourceExt::name_any).collect();
                names.sort();
                names
            });
        // In doubt, no form (Kubernetes decides a save anyway).
        let can_manage = can_manage.unwrap_or_else(|error| {
            tracing::warn!(%error, "cannot ask Kubernetes whether the person may create pools");
            false
        });
        let form = editing
            .and_then(|(ns, name)| pools.iter().find(|p| p.namespace == ns && p.name == name))
            .cloned()
            .unwrap_or_else(|| new_pool_defaults(providers.as_deref().unwrap_or_default()));
        Ok(PoolsView {
            pools,
            form,
            can_manage,
            providers,
        })
    }

    /// Whether the Pools page has something for the principal: Kubernetes lets them list
    /// pools in every namespace, as the page does (a SelfSubjectAccessReview; SPEC §5,
    /// the UI hides what the person cannot do). `false` without a cluster, and in doubt,
    /// including when Kubernetes has not answered within [`NAVIGATION_TIMEOUT`].
    pub async fn may_see_pools(&self, who: &Principal) -> bool {
        // The client too: a person the cluster does not know yet is made impersonable first.
        let review = async {
            let client = self.client(who).await.ok()?;
            may(&client, "virtualmachinepools", "list", None)
                .await
                .inspect_err(|error| {
                    tracing::warn!(%error, "cannot ask Kubernetes whether the person may list pools");
                })
                .ok()
        };
        match tokio::time::timeout(NAVIGATION_TIMEOUT, review).await {
            Ok(answer) => answer.unwrap_or(false),
            Err(_) => {
                tracing::warn!(
                    timeout_ms = NAVIGATION_TIMEOUT.as_millis(),
                    "Kubernetes did not say in time whether the person may list pools: no Pools link"
                );
                false
            }
        }
    }

    /// Creates or changes a pool by server-side apply as the principal; returns its name.
    /// Audited `pool.save`.
    ///
    /// Errors: [`ServiceError::Invalid`] from [`SavePool::to_pool`]; Kubernetes refusals;
    /// [`ServiceError::NoCluster`], [`ServiceError::Unavailable`].
    pub async fn save_pool(&self, who: &Principal, command: &SavePool) -> Result<String> {
        let saved = async {
            let pool = command.to_pool()?;
            let (namespace, name) = (pool.namespace().unwrap_or_default(), pool.name_any());
            Api::<VirtualMachinePool>::namespaced(self.client(who).await?, &namespace)
                .patch(
                    &name,
                    &PatchParams::apply(FIELD_MANAGER).force(),
                    &Patch::Apply(&pool),
                )
                .await?;
            Ok(name)
        };
        let saved = saved.await;
        let target = format!("{}/{}", command.namespace.trim(), command.name.trim());
        self.audited(who, "pool.save", &target, saved).await
    }

    /// Deletes a pool as the principal. Claimed members survive: the pool controller
    /// re-parents them to their claims (SPEC §6). Audited `pool.delete`.
    ///
    /// Errors: [`ServiceError::NotFound`] for a malformed path; Kubernetes refusals;
    /// [`ServiceError::NoCluster`], [`ServiceError::Unavailable`].
    pub async fn delete_pool(&self, who: &Principal, namespace: &str, name: &str) -> Result<()> {
        let deleted = async {
            check_object_path(namespace, name)?;
            Api::<VirtualMachinePool>::namespaced(self.client(who).await?, namespace)
                .delete(name, &DeleteParams::default())
                .await?;
            Ok(())
        };
        let deleted = deleted.await;
        self.audited(who, "pool.delete", &format!("{namespace}/{name}"), deleted)
            .await
    }
}

/// A new pool's form: the first of the `providers` that exist (none: the field is empty).
fn new_pool_defaults(providers: &[String]) -> PoolForm {
    PoolForm {
        warm_replicas: 3,
        max_replicas: 10,
        cpu: 2,
        memory: "4Gi".into(),
        provider: providers.first().cloned().unwrap_or_default(),
        ..PoolForm::default()
    }
}

fn pool_form(pool: &VirtualMachinePool) -> PoolForm {
    let status = pool.status.clone().unwrap_or_default();
    PoolForm {
        namespace: pool.namespace().unwrap_or_default(),
        name: pool.name_any(),
        warm_replicas: pool.spec.warm_replicas,
        max_replicas: pool.spec.max_replicas,
        image_revision: pool.spec.image_revision.clone(),
        cpu: pool.spec.template.cpu,
        memory: pool.spec.template.memory.clone(),
        image: pool.spec.template.image.clone(),
        provider: pool.spec.provider_ref.clone(),
        ready: status.ready_replicas,
        claimed: status.claimed_replicas,
        total: status.replicas,
        stalled: status
            .conditions
            .iter()
            .find(|c| c.type_ == "Progressing" && c.status == "False")
            .map(|c| PoolStall {
                reason: c.reason.clone(),
                message: c.message.clone(),
            }),
    }
}
