//! Claims (SPEC §6): the dashboard, one claim, claiming and releasing, and who oversees
//! whom. Read and written as the principal; the claim admission policy checks that a
//! claim's subject is its creator.

use std::collections::{BTreeSet, HashMap};

use futures::{StreamExt, TryStreamExt};

use banlieue_domain::BuiltinRole;
use banlieue_domain::claim::{ClaimPhase, ClaimReason};
use banlieue_domain::object_names::{is_dns_label, is_dns_subdomain};
use banlieue_domain::views::{
    ClaimRow, ClaimView, DashboardView, EndorsementCertificateView, EndorsementTrust,
    EndorsementVerdict, PoolRow, format_instant,
};
use cluster::attestation::{EndorsementCertificate, TrustBundle};
use cluster::crd::{
    ClaimSubject, ENDORSEMENT_VERIFIED_CONDITION, VirtualMachine, VirtualMachineClaim,
    VirtualMachineClaimSpec, VirtualMachinePool, VirtualMachineProvider,
};
use cluster::impersonation::may;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{DeleteParams, ListParams, ObjectMeta, PostParams};
use kube::{Api, ResourceExt};
use time::OffsetDateTime;

use crate::{Console, Principal, Result, ServiceError};

const CLAIMS: &str = "virtualmachineclaims";

/// A request for a sandbox: a pool by namespace and name, and a lifetime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateClaim {
    /// The pool's namespace (an RFC 1123 label).
    pub namespace: String,
    /// The pool's name.
    pub pool: String,
    /// The lifetime in seconds: one of [`crate::Settings::claim_ttl_choices`]; `None`
    /// when what was sent is not a number.
    pub ttl_seconds: Option<u32>,
    /// Whom the sandbox is for, when a broker claims for someone else; `None`: the
    /// principal. The claim admission policy lets only brokers name another subject.
    pub subject: Option<ClaimSubject>,
}

/// Whose claims [`Console::claims`] lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimScope {
    /// The principal's own.
    Own,
    /// Everyone's: for those who oversee claims ([`oversees_claims`]).
    Everyone,
}

impl Console {
    /// The dashboard: the pools the principal may list (with whether they may claim in
    /// each namespace), their own claims, and everyone's for those who oversee claims.
    /// Without a cluster, an empty view saying so.
    ///
    /// Errors: Kubernetes refusals other than a refused list (which shows as empty);
    /// [`ServiceError::Unavailable`].
    pub async fn dashboard(&self, who: &Principal) -> Result<DashboardView> {
        let client = match self.client(who).await {
            Err(ServiceError::NoCluster) => return Ok(DashboardView::default()),
            other => other?,
        };
        // The two lists, then every review the rows need, each round asked at once.
        let (claims, pools) = futures::future::join(
            Api::<VirtualMachineClaim>::all(client.clone()).list(&ListParams::default()),
            Api::<VirtualMachinePool>::all(client.clone()).list(&ListParams::default()),
        )
        .await;
        let (claims, pools) = (visible(claims)?, visible(pools)?);
        let overseer = oversees_claims(who);
        let shown: Vec<(&VirtualMachineClaim, bool)> = claims
            .iter()
            .map(|claim| (claim, self.is_own(who, claim)))
            .filter(|(_, mine)| *mine || overseer)
            .collect();
        let rights = Rights::ask(
            &client,
            pool_questions(&pools).chain(
                shown
                    .iter()
                    .map(|(claim, _)| ("delete", claim.namespace().unwrap_or_default())),
            ),
        )
        .await?;
        let pool_rows = pool_rows(pools, &rights, who);
        let now = OffsetDateTime::now_utc();
        let (mut own, mut everyone) = (Vec::new(), Vec::new());
        for (claim, mine) in shown {
            let namespace = claim.namespace().unwrap_or_default();
            let row = claim_row(claim, now, rights.may("delete", &namespace));
            if mine {
                own.push(row.clone());
            }
            if overseer {
                everyone.push(row);
            }
        }
        let by_place =
            |a: &ClaimRow, b: &ClaimRow| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name));
        own.sort_by(by_place);
        everyone.sort_by(by_place);
        Ok(DashboardView {
            cluster: true,
            pools: pool_rows,
            claims: own,
            all_claims: everyone,
            ttl_choices: self.settings.claim_ttl_choices.clone(),
            ttl_chosen: None,
        })
    }

    /// The pools the principal may list, with whether they may claim in each one's
    /// namespace, as the dashboard shows them.
    ///
    /// Errors: as [`Console::dashboard`].
    pub async fn claimable_pools(&self, who: &Principal) -> Result<Vec<PoolRow>> {
        let client = self.client(who).await?;
        let pools = visible(
            Api::<VirtualMachinePool>::all(client.clone())
                .list(&ListParams::default())
                .await,
        )?;
        let rights = Rights::ask(&client, pool_questions(&pools)).await?;
        Ok(pool_rows(pools, &rights, who))
    }

    /// The claims of `scope` the principal may list, as Kubernetes has them, by
    /// namespace and name (what the JSON API answers).
    ///
    /// Errors: [`ServiceError::Forbidden`] for [`ClaimScope::Everyone`] without the
    /// operator role; Kubernetes refusals other than a refused list (which is empty);
    /// [`ServiceError::NoCluster`], [`ServiceError::Unavailable`].
    pub async fn claims(
        &self,
        who: &Principal,
        scope: ClaimScope,
    ) -> Result<Vec<VirtualMachineClaim>> {
        if scope == ClaimScope::Everyone && !oversees_claims(who) {
            return Err(ServiceError::forbidden(
                "only operators and admins list everyone's claims",
            ));
        }
        let client = self.client(who).await?;
        let mut claims = visible(
            Api::<VirtualMachineClaim>::all(client)
                .list(&ListParams::default())
                .await,
        )?;
        claims.retain(|claim| scope == ClaimScope::Everyone || self.is_own(who, claim));
        claims.sort_by_key(|claim| (claim.namespace(), claim.name_any()));
        Ok(claims)
    }

    /// One claim as Kubernetes has it, read as the principal; `None` when it does not
    /// exist.
    ///
    /// Errors: as [`Console::claim`].
    pub async fn claim_object(
        &self,
        who: &Principal,
        namespace: &str,
        name: &str,
    ) -> Result<Option<VirtualMachineClaim>> {
        check_object_path(namespace, name)?;
        Ok(
            Api::<VirtualMachineClaim>::namespaced(self.client(who).await?, namespace)
                .get_opt(name)
                .await?,
        )
    }

    /// One claim as its page shows it, read as the principal; `None` when it does not
    /// exist (released, expired, or never made).
    ///
    /// Errors: [`ServiceError::NotFound`] for a namespace or name no claim could have;
    /// Kubernetes refusals; [`ServiceError::NoCluster`], [`ServiceError::Unavailable`].
    pub async fn claim(
        &self,
        who: &Principal,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ClaimView>> {
        check_object_path(namespace, name)?;
        let client = self.client(who).await?;
        let found = Api::<VirtualMachineClaim>::namespaced(client.clone(), namespace)
            .get_opt(name)
            .await?;
        let Some(claim) = found else {
            return Ok(None);
        };
        let may_delete = (self.is_own(who, &claim) || oversees_claims(who))
            && may(&client, CLAIMS, "delete", Some(namespace)).await?;
        let status = claim.status.clone().unwrap_or_default();
        let when = |at: Option<&Time>| at.and_then(instant).map(format_instant);
        let endorsement_certificates =
            endorsement_certificates(&client, namespace, &status).await?;
        let endorsement_verified = status
            .conditions
            .iter()
            .find(|c| c.type_ == ENDORSEMENT_VERIFIED_CONDITION)
            .map(|c| EndorsementVerdict {
                verified: c.status == "True",
                reason: c.reason.clone(),
                message: c.message.clone(),
            });
        Ok(Some(ClaimView {
            claim: claim_row(&claim, OffsetDateTime::now_utc(), may_delete),
            issuer: claim.spec.subject.issuer.clone(),
            issued_here: claim.spec.subject.issuer == self.settings.issuer,
            ttl_seconds: claim.spec.ttl_seconds,
            created_at: when(claim.metadata.creation_timestamp.as_ref()),
            bound_at: when(status.bound_at.as_ref()),
            virtual_machine: status.virtual_machine_ref,
            endorsement_certificates,
            endorsement_verified,
            gone: false,
        }))
    }

    /// Claims a sandbox for the principal (`spec.subject` = them, [`Principal::subject`])
    /// from a pool they can see; returns the new claim's name. Audited `claim.create`.
    ///
    /// Errors: [`ServiceError::Invalid`] (`ttl_seconds` not offered, a malformed
    /// namespace or pool, a pool the principal cannot see); [`ServiceError::Forbidden`]
    /// for a tenant's person outside their tenant's namespaces; Kubernetes refusals (RBAC, the
    /// admission policy); [`ServiceError::NoCluster`], [`ServiceError::Unavailable`].
    pub async fn create_claim(&self, who: &Principal, command: CreateClaim) -> Result<String> {
        let target = format!("{}/{}", command.namespace, command.pool);
        let created = self.try_create_claim(who, &command).await;
        let target = match &created {
            Ok(name) => format!("{}/{name}", command.namespace),
            Err(_) => target,
        };
        self.audited(who, "claim.create", &target, created).await
    }

    async fn try_create_claim(&self, who: &Principal, command: &CreateClaim) -> Result<String> {
        let Some(ttl_seconds) = command
            .ttl_seconds
            .filter(|ttl| self.settings.claim_ttl_choices.contains(ttl))
        else {
            return Err(ServiceError::invalid(
                "ttl_seconds",
                "not one of the lifetimes offered",
            ));
        };
        if !is_dns_label(&command.namespace) || !is_dns_subdomain(&command.pool) {
            return Err(ServiceError::invalid(
                "pool",
                "not a pool's namespace and name",
            ));
        }
        if let Some(allowed) = who.claim_namespaces()
            && !allowed.contains(&command.namespace)
        {
            return Err(ServiceError::forbidden(format!(
                "your tenant's people claim only in the namespaces {}",
                allowed.join(", ")
            )));
        }
        let client = self.client(who).await?;
        // Only a pool the person can see: a claim for a pool that does not exist would
        // wait forever.
        let pool = Api::<VirtualMachinePool>::namespaced(client.clone(), &command.namespace)
            .get_opt(&command.pool)
            .await?;
        if pool.is_none() {
            return Err(ServiceError::invalid("pool", "no such pool"));
        }
        let claim = VirtualMachineClaim {
            metadata: ObjectMeta {
                generate_name: Some(who.claim_name_prefix()),
                namespace: Some(command.namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: VirtualMachineClaimSpec {
                pool_ref: command.pool.clone(),
                ttl_seconds,
                subject: command
                    .subject
                    .clone()
                    .unwrap_or_else(|| who.subject(&self.settings.issuer)),
            },
            status: None,
        };
        let created = Api::<VirtualMachineClaim>::namespaced(client, &command.namespace)
            .create(&PostParams::default(), &claim)
            .await?;
        Ok(created.name_any())
    }

    /// Releases a claim as the principal: deletes it, and the claim controller deletes
    /// its VM first (SPEC §6 release ordering). Audited `claim.release`.
    ///
    /// Errors: [`ServiceError::NotFound`] for a malformed path; Kubernetes refusals (RBAC,
    /// the release policy, a claim already gone); [`ServiceError::NoCluster`],
    /// [`ServiceError::Unavailable`].
    pub async fn release_claim(&self, who: &Principal, namespace: &str, name: &str) -> Result<()> {
        let released = async {
            check_object_path(namespace, name)?;
            Api::<VirtualMachineClaim>::namespaced(self.client(who).await?, namespace)
                .delete(name, &DeleteParams::default())
                .await?;
            Ok(())
        };
        let released = released.await;
        self.audited(
            who,
            "claim.release",
            &format!("{namespace}/{name}"),
            released,
        )
        .await
    }

    /// Whether `claim` is the principal's own: its subject is them at this console's
    /// issuer.
    pub fn is_own(&self, who: &Principal, claim: &VirtualMachineClaim) -> bool {
        claim.spec.subject == who.subject(&self.settings.issuer)
    }
}

/// The reviews [`pool_rows`] needs: creating claims in each pool's namespace.
fn pool_questions(pools: &[VirtualMachinePool]) -> impl Iterator<Item = (&'static str, String)> {
    pools
        .iter()
        .map(|pool| ("create", pool.namespace().unwrap_or_default()))
}

/// The pools as rows, each with whether `rights` let the principal create claims there
/// and it is one of the namespaces `who` may claim in.
fn pool_rows(pools: Vec<VirtualMachinePool>, rights: &Rights, who: &Principal) -> Vec<PoolRow> {
    let allowed = who.claim_namespaces();
    pools
        .into_iter()
        .map(|pool| {
            let namespace = pool.namespace().unwrap_or_default();
            let status = pool.status.clone().unwrap_or_default();
            PoolRow {
                name: pool.name_any(),
                can_claim: rights.may("create", &namespace)
                    && allowed.is_none_or(|allowed| allowed.contains(&namespace)),
                namespace,
                ready: status.ready_replicas,
                claimed: status.claimed_replicas,
                max: pool.spec.max_replicas,
            }
        })
        .collect()
}

/// Operators and admins see and release everyone's claims (SPEC §6).
pub fn oversees_claims(who: &Principal) -> bool {
    who.holds(BuiltinRole::Operator)
}

/// Whether `namespace/name` may name a claim or pool ([`is_dns_label`],
/// [`is_dns_subdomain`]); anything else is [`ServiceError::NotFound`] before Kubernetes
/// is asked.
pub(crate) fn check_object_path(namespace: &str, name: &str) -> Result<()> {
    if is_dns_label(namespace) && is_dns_subdomain(name) {
        Ok(())
    } else {
        Err(ServiceError::not_found(
            "not an object's namespace and name",
        ))
    }
}

/// How many SelfSubjectAccessReviews [`Rights::ask`] has in flight at once.
const CONCURRENT_REVIEWS: usize = 8;

/// The principal's RBAC answers on claims per verb and namespace: one
/// SelfSubjectAccessReview for each distinct question, asked concurrently.
struct Rights(HashMap<(&'static str, String), bool>);

impl Rights {
    /// Asks each distinct question once.
    ///
    /// Errors: a review Kubernetes did not answer ([`ServiceError`] from `kube::Error`).
    async fn ask(
        client: &kube::Client,
        questions: impl IntoIterator<Item = (&'static str, String)>,
    ) -> Result<Self> {
        let questions: BTreeSet<(&'static str, String)> = questions.into_iter().collect();
        let reviews: Vec<_> = questions
            .iter()
            .map(|(verb, namespace)| may(client, CLAIMS, verb, Some(namespace.as_str())))
            .collect();
        let answers: Vec<bool> = futures::stream::iter(reviews)
            .buffered(CONCURRENT_REVIEWS)
            .try_collect()
            .await?;
        Ok(Self(questions.into_iter().zip(answers).collect()))
    }

    /// The answer to a question [`Rights::ask`] was given; `false` for any other.
    fn may(&self, verb: &'static str, namespace: &str) -> bool {
        self.0
            .get(&(verb, namespace.to_owned()))
            .copied()
            .unwrap_or(false)
    }
}

/// The EK certificates a claim mirrors, each checked as the claim controller does (its
/// VM's own, chaining to the trust bundle of the VM's provider), both read as the principal (a VM or provider they may not read, or that is
/// gone, leaves the certificates unchecked, saying why).
///
/// Errors: Kubernetes failures other than 403 and 404.
async fn endorsement_certificates(
    client: &kube::Client,
    namespace: &str,
    status: &cluster::crd::VirtualMachineClaimStatus,
) -> Result<Vec<EndorsementCertificateView>> {
    if status.tpm_endorsement_certificates.is_empty() {
        return Ok(Vec::new());
    }
    let vm = match &status.virtual_machine_ref {
        Some(name) => readable(
            Api::<VirtualMachine>::namespaced(client.clone(), namespace)
                .get_opt(name)
                .await,
        )?,
        None => None,
    };
    let bundle = match &vm {
        None => Err("its VirtualMachine cannot be read".to_owned()),
        Some(vm) => {
            let provider = &vm.spec.provider_ref;
            match readable(
                Api::<VirtualMachineProvider>::all(client.clone())
                    .get_opt(provider)
                    .await,
            )? {
                None => Err(format!(
                    "VirtualMachineProvider {provider} does not exist or cannot be read"
                )),
                Some(found) => match found.spec.attestation {
                    None => Err(format!(
                        "VirtualMachineProvider {provider} has no ekTrustBundle"
                    )),
                    Some(attestation) => TrustBundle::from_pem(&attestation.ek_trust_bundle)
                        .map_err(|e| format!("VirtualMachineProvider {provider}: {e}")),
                },
            }
        }
    };
    let identity = vm
        .as_ref()
        .map(|vm| {
            cluster::attestation::vm_identity(
                namespace,
                &vm.name_any(),
                vm.uid().as_deref().unwrap_or_default(),
            )
        })
        .unwrap_or_default();
    let now = OffsetDateTime::now_utc();
    Ok(status
        .tpm_endorsement_certificates
        .iter()
        .map(|pem| match EndorsementCertificate::from_pem(pem) {
            Err(error) => EndorsementCertificateView {
                fingerprint_sha256: String::new(),
                issuer: String::new(),
                identities: Vec::new(),
                trust: EndorsementTrust::Untrusted {
                    detail: error.to_string(),
                },
            },
            Ok(certificate) => {
                let trust = match &bundle {
                    Err(why) => EndorsementTrust::Unchecked {
                        detail: why.clone(),
                    },
                    Ok(bundle) => match certificate.refusal(&identity, bundle, now) {
                        None => EndorsementTrust::Trusted,
                        Some(detail) => EndorsementTrust::Untrusted { detail },
                    },
                };
                EndorsementCertificateView {
                    fingerprint_sha256: certificate.fingerprint_sha256,
                    issuer: certificate.issuer,
                    identities: certificate.identities,
                    trust,
                }
            }
        })
        .collect())
}

/// `claim` as a row; `may_delete` is the principal's RBAC answer for deleting claims in
/// its namespace.
fn claim_row(claim: &VirtualMachineClaim, now: OffsetDateTime, may_delete: bool) -> ClaimRow {
    let status = claim.status.clone().unwrap_or_default();
    let expires = status.expires_at.as_ref().and_then(instant);
    ClaimRow {
        namespace: claim.namespace().unwrap_or_default(),
        name: claim.name_any(),
        subject: claim.spec.subject.id.clone(),
        pool: claim.spec.pool_ref.clone(),
        // Kubernetes marks a released claim at once; its controller writes the phase after.
        phase: match claim.metadata.deletion_timestamp {
            Some(_) => Some(ClaimPhase::Releasing),
            None => status.phase.as_deref().and_then(ClaimPhase::parse),
        },
        reason: status.reason.as_deref().map(ClaimReason::parse),
        message: status.message.unwrap_or_default(),
        expires_at: expires.map(format_instant),
        remaining_secs: expires.map(|at| (at - now).whole_seconds().max(0)),
        addresses: status.addresses.iter().map(|a| a.address.clone()).collect(),
        can_release: may_delete && claim.metadata.deletion_timestamp.is_none(),
    }
}

/// An object the principal may not read is one they cannot see.
fn readable<K>(read: kube::Result<Option<K>>) -> kube::Result<Option<K>> {
    match read {
        Err(kube::Error::Api(status)) if status.code == 403 => Ok(None),
        other => other,
    }
}

/// A Kubernetes timestamp (second precision) as an instant.
fn instant(at: &Time) -> Option<OffsetDateTime> {
    OffsetDateTime::from_unix_timestamp(at.0.as_second()).ok()
}

/// A list the principal may not read at all is an empty list, not an error.
pub(crate) fn visible<K: Clone>(listed: kube::Result<kube::core::ObjectList<K>>) -> Result<Vec<K>> {
    match listed {
        Ok(list) => Ok(list.items),
        Err(kube::Error::Api(status)) if status.code == 403 => Ok(Vec::new()),
        Err(error) => Err(error.into()),
    }
}
