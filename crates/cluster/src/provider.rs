//! The `simulated` provider (SPEC §6): stands in for a hypervisor during development and
//! tests. It takes `VirtualMachine`s whose `spec.providerRef` is `simulated`, holds its own
//! finalizer on them, moves them Provisioning → Ready after a configurable delay with fake
//! addresses and an EK certificate of its simulated hypervisor CA ([`EkAuthority`]), and
//! on deletion removes its finalizer after another configurable delay (the "VM destroyed"
//! moment). Like a real provider it publishes itself as the `VirtualMachineProvider`
//! [`SIMULATED_PROVIDER`], whose `ekTrustBundle` holds its CA ([`publish_provider`]).

use std::sync::Arc;
use std::time::Duration;

use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::{Api, Client, ResourceExt};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use serde_json::json;

use crate::attestation::vm_identity;
use crate::convert::{self, from_time, to_time};
use crate::crd::{
    CLAIM_LABEL, ProviderAttestation, VirtualMachine, VirtualMachineProvider,
    VirtualMachineProviderSpec,
};
use crate::ek_authority::EkAuthority;
use crate::error::{Error, is_status};
use crate::metrics::Metrics;

/// `spec.providerRef` served by this provider.
pub const SIMULATED_PROVIDER: &str = "simulated";
/// Finalizer the simulated provider holds until the (fake) VM is destroyed.
pub const PROVIDER_FINALIZER: &str = "banlieue.io/simulated-provider";

/// Timings of the simulated provider.
#[derive(Debug, Clone)]
pub struct SimulatedProviderConfig {
    /// From creation to Ready; `None` keeps VMs Provisioning forever (a broken backend).
    pub ready_after: Option<Duration>,
    /// From the deletion request to the finalizer's removal.
    pub destroy_after: Duration,
}

impl Default for SimulatedProviderConfig {
    /// Ready after 2 s, destroyed after 1 s.
    fn default() -> Self {
        Self {
            ready_after: Some(Duration::from_secs(2)),
            destroy_after: Duration::from_secs(1),
        }
    }
}

/// What a provider reconcile may touch.
#[derive(Clone)]
pub struct ProviderContext {
    /// API client.
    pub client: Client,
    /// Timings.
    pub config: SimulatedProviderConfig,
    /// The simulated hypervisor's EK CA: signs each VM's EK certificate.
    pub authority: Arc<EkAuthority>,
    /// Counters.
    pub metrics: Arc<Metrics>,
}

/// Makes sure the `VirtualMachineProvider` [`SIMULATED_PROVIDER`] exists and its
/// `spec.attestation.ekTrustBundle` holds `authority`'s CA certificate, keeping any other
/// CA already there (another replica's or test's CA, or one being rotated out).
/// Optimistic concurrency: an update carries the read `resourceVersion`; a conflict reads
/// again.
///
/// Errors: API failures; [`Error::Attestation`] when five attempts in a row conflicted.
pub async fn publish_provider(client: &Client, authority: &EkAuthority) -> Result<(), Error> {
    let providers: Api<VirtualMachineProvider> = Api::all(client.clone());
    let ca = authority.certificate_pem().trim();
    for _ in 0..5 {
        let Some(provider) = providers.get_opt(SIMULATED_PROVIDER).await? else {
            let provider = VirtualMachineProvider {
                metadata: ObjectMeta {
                    name: Some(SIMULATED_PROVIDER.to_owned()),
                    ..ObjectMeta::default()
                },
                spec: VirtualMachineProviderSpec {
                    attestation: Some(ProviderAttestation {
                        ek_trust_bundle: format!("{ca}\n"),
                    }),
                },
            };
            match providers.create(&PostParams::default(), &provider).await {
                Ok(_) => return Ok(()),
                Err(e) if is_status(&e, 409) => continue,
                Err(e) => return Err(e.into()),
            }
        };
        let bundle = provider
            .spec
            .attestation
            .as_ref()
            .map(|a| a.ek_trust_bundle.trim())
            .unwrap_or_default();
        if holds_certificate(bundle, ca) {
            return Ok(());
        }
        let bundle = if bundle.is_empty() {
            format!("{ca}\n")
        } else {
            format!("{bundle}\n{ca}\n")
        };
        let patch = json!({
            "metadata": {"resourceVersion": provider.resource_version()},
            "spec": {"attestation": {"ekTrustBundle": bundle}},
        });
        match providers
            .patch(
                SIMULATED_PROVIDER,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => return Ok(()),
            Err(e) if is_status(&e, 409) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(Error::Attestation(format!(
        "VirtualMachineProvider {SIMULATED_PROVIDER} kept changing while its trust bundle was \
         updated"
    )))
}

/// Whether the PEM `bundle` holds the certificate `certificate` (compared as DER).
pub(crate) fn holds_certificate(bundle: &str, certificate: &str) -> bool {
    let Ok(wanted) = CertificateDer::from_pem_slice(certificate.as_bytes()) else {
        return false;
    };
    CertificateDer::pem_slice_iter(bundle.as_bytes())
        .filter_map(Result::ok)
        .any(|held| held == wanted)
}

/// One reconcile pass of the simulated provider for one VM.
///
/// Errors: API failures other than the expected 404/409.
pub async fn reconcile_vm(
    vm: Arc<VirtualMachine>,
    ctx: Arc<ProviderContext>,
) -> Result<Action, Error> {
    if vm.spec.provider_ref != SIMULATED_PROVIDER {
        return Ok(Action::await_change());
    }
    ctx.metrics.reconciles.provider.inc();
    let namespace = vm.namespace().ok_or(Error::MissingField {
        kind: "VirtualMachine",
        field: "namespace",
    })?;
    let name = vm.name_any();
    let api: Api<VirtualMachine> = Api::namespaced(ctx.client.clone(), &namespace);
    let has_finalizer = vm.finalizers().iter().any(|f| f == PROVIDER_FINALIZER);
    let now = convert::now();
    let write = |patch: serde_json::Value, status: bool| {
        let api = api.clone();
        let name = name.clone();
        let metrics = ctx.metrics.clone();
        async move {
            metrics.writes.provider.inc();
            let params = PatchParams::default();
            let result = if status {
                api.patch_status(&name, &params, &Patch::Merge(&patch))
                    .await
            } else {
                api.patch(&name, &params, &Patch::Merge(&patch)).await
            };
            match result {
                Ok(_) => Ok(true),
                Err(e) if is_status(&e, 404) || is_status(&e, 409) => Ok(false),
                Err(e) => Err(Error::from(e)),
            }
        }
    };

    if let Some(deleted_at) = &vm.metadata.deletion_timestamp {
        if !has_finalizer {
            return Ok(Action::await_change());
        }
        let elapsed = (now - from_time(deleted_at)).unsigned_abs();
        if elapsed < ctx.config.destroy_after {
            return Ok(Action::requeue(ctx.config.destroy_after - elapsed));
        }
        let finalizers: Vec<&String> = vm
            .finalizers()
            .iter()
            .filter(|f| f.as_str() != PROVIDER_FINALIZER)
            .collect();
        let patch = json!({"metadata": {"finalizers": finalizers, "resourceVersion": vm.resource_version()}});
        return Ok(if write(patch, false).await? {
            Action::await_change()
        } else {
            Action::requeue(Duration::from_millis(200))
        });
    }
    if !has_finalizer {
        let mut finalizers = vm.finalizers().to_vec();
        finalizers.push(PROVIDER_FINALIZER.to_owned());
        let patch = json!({"metadata": {"finalizers": finalizers, "resourceVersion": vm.resource_version()}});
        if !write(patch, false).await? {
            return Ok(Action::requeue(Duration::from_millis(200)));
        }
    }
    let phase = vm.status.as_ref().and_then(|s| s.phase.as_deref());
    let published = vm
        .status
        .as_ref()
        .is_some_and(|s| !s.tpm_endorsement_certificates.is_empty());
    match phase {
        None => {
            write(json!({"status": {"phase": "Provisioning"}}), true).await?;
        }
        Some("Provisioning") => {}
        // A VM made Ready before this provider issued EK certificates gets one now, unless
        // it is held by a claim: a vTPM's identity never changes under its holder. The
        // resourceVersion keeps a stale copy from replacing one published meanwhile.
        Some("Ready") if !published && !vm.labels().contains_key(CLAIM_LABEL) => {
            let certificate = ctx.authority.issue(&identity(&vm, &namespace), now)?;
            let written = write(
                json!({
                    "metadata": {"resourceVersion": vm.resource_version()},
                    "status": {"tpmEndorsementCertificates": [certificate]},
                }),
                true,
            )
            .await?;
            return Ok(settled(written));
        }
        Some(_) => return Ok(Action::await_change()),
    }
    let Some(ready_after) = ctx.config.ready_after else {
        return Ok(Action::await_change());
    };
    let age = vm
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| (now - from_time(t)).unsigned_abs())
        .unwrap_or_default();
    if age < ready_after {
        return Ok(Action::requeue(ready_after - age));
    }
    let mut patch = json!({
        "metadata": {"resourceVersion": vm.resource_version()},
        "status": {
            "phase": "Ready",
            "readySince": to_time(now),
            "imageRevision": vm.spec.image_revision,
            "addresses": [{"type": "InternalIP", "address": fake_address(&vm)}],
            "message": "simulated VM",
        },
    });
    // A VM held by a claim keeps the EK it was bound with, whatever its phase went
    // through: a vTPM's identity never changes under its holder.
    if !vm.labels().contains_key(CLAIM_LABEL) {
        let certificate = ctx.authority.issue(&identity(&vm, &namespace), now)?;
        patch["status"]["tpmEndorsementCertificates"] = json!([certificate]);
    }
    Ok(settled(write(patch, true).await?))
}

/// After a write with a resourceVersion precondition: done, or (the VM changed meanwhile,
/// or is gone) look again soon.
fn settled(written: bool) -> Action {
    if written {
        Action::await_change()
    } else {
        Action::requeue(Duration::from_millis(200))
    }
}

/// Error policy of the provider: count and retry soon.
pub(crate) fn provider_error_policy(
    _vm: Arc<VirtualMachine>,
    error: &Error,
    ctx: Arc<ProviderContext>,
) -> Action {
    ctx.metrics.reconcile_errors.provider.inc();
    tracing::warn!(%error, "simulated provider reconcile failed");
    Action::requeue(Duration::from_secs(2))
}

fn identity(vm: &VirtualMachine, namespace: &str) -> String {
    vm_identity(
        namespace,
        &vm.name_any(),
        vm.uid().as_deref().unwrap_or_default(),
    )
}

/// A stable fake address in 10.0.0.0/8 derived from the VM's uid (FNV-1a).
fn fake_address(vm: &VirtualMachine) -> String {
    let hash = vm
        .uid()
        .unwrap_or_default()
        .bytes()
        .fold(0x811c_9dc5_u32, |h, b| {
            (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
        });
    let [_, a, b, c] = hash.to_be_bytes();
    format!("10.{a}.{b}.{}", c.max(1))
}
