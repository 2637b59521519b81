//! What the platform publishes for attestation (claim design seed, section 6): the
//! simulated provider's EK certificates and trust bundle, their mirror on a Bound claim,
//! the claim's `EndorsementVerified` condition, and a pool's missing provider.

mod common;

use std::time::Duration;

use cluster::attestation::{EndorsementCertificate, TrustBundle, reason};
use cluster::crd::{
    ENDORSEMENT_VERIFIED_CONDITION, ProviderAttestation, VirtualMachineClaim,
    VirtualMachineProvider, VirtualMachineProviderSpec,
};
use cluster::ek_authority::{EK_CA_SECRET, EkAuthority};
use cluster::provider::{SIMULATED_PROVIDER, vm_identity};
use common::*;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use time::OffsetDateTime;

const T: Duration = Duration::from_secs(20);

fn endorsement(claim: &VirtualMachineClaim) -> Option<Condition> {
    claim
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == ENDORSEMENT_VERIFIED_CONDITION)
        .cloned()
}

/// Every text the cluster holds about VMs, claims and providers: none may carry a key.
async fn assert_no_private_key(client: &kube::Client) {
    let texts = [
        serde_json::to_string(&list_vms(client).await).unwrap(),
        serde_json::to_string(
            &claims(client)
                .list(&Default::default())
                .await
                .unwrap()
                .items,
        )
        .unwrap(),
        serde_json::to_string(
            &providers(client)
                .list(&Default::default())
                .await
                .unwrap()
                .items,
        )
        .unwrap(),
    ];
    for text in texts {
        assert!(!text.contains("PRIVATE KEY"), "a key is published: {text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_simulated_vm_carries_an_ek_certificate_that_chains_to_its_provider() {
    let (server, client) = start().await;
    let running = spawn_controllers(&client, test_config(&client, "a"));
    create_pool(&client, &pool("p", 2, 2, "r1")).await;
    let ready = wait_for("two Ready members with EK certificates", T, || async {
        let vms = list_vms(&client).await;
        let done = vms.len() == 2
            && vms.iter().all(|vm| {
                vm.status.as_ref().is_some_and(|s| {
                    s.phase.as_deref() == Some("Ready")
                        && !s.tpm_endorsement_certificates.is_empty()
                })
            });
        done.then_some(vms)
    })
    .await;
    let provider = providers(&client).get(SIMULATED_PROVIDER).await.unwrap();
    let bundle = TrustBundle::from_pem(
        &provider
            .spec
            .attestation
            .expect("the provider publishes its trust anchors")
            .ek_trust_bundle,
    )
    .unwrap();
    let now = OffsetDateTime::now_utc();
    let mut fingerprints = Vec::new();
    for vm in &ready {
        let pems = &vm.status.as_ref().unwrap().tpm_endorsement_certificates;
        assert_eq!(pems.len(), 1);
        let certificate = EndorsementCertificate::from_pem(&pems[0]).unwrap();
        bundle
            .verify(&certificate, now)
            .unwrap_or_else(|e| panic!("{}: {e}", vm.name_any()));
        let identity = vm_identity(server.namespace(), &vm.name_any(), &vm.uid().unwrap());
        assert_eq!(certificate.identities, [identity]);
        fingerprints.push(certificate.fingerprint_sha256);
    }
    assert_ne!(fingerprints[0], fingerprints[1], "one EK per VM");
    // The CA lives in a TLS Secret of the console's namespace, made once.
    let secret = Api::<Secret>::default_namespaced(client.clone())
        .get(EK_CA_SECRET)
        .await
        .unwrap();
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
    let data = secret.data.unwrap();
    let ca = EkAuthority::from_pem(
        std::str::from_utf8(&data["tls.crt"].0).unwrap(),
        std::str::from_utf8(&data["tls.key"].0).unwrap(),
    )
    .unwrap();
    assert!(
        TrustBundle::from_pem(ca.certificate_pem())
            .unwrap()
            .verify(
                &EndorsementCertificate::from_pem(
                    &ready[0]
                        .status
                        .as_ref()
                        .unwrap()
                        .tpm_endorsement_certificates[0]
                )
                .unwrap(),
                now
            )
            .is_ok()
    );
    assert_no_private_key(&client).await;
    running.stop().await;
    // A restart keeps the CA: the new leader signs with the same one.
    let running = spawn_controllers(&client, test_config(&client, "b"));
    pools(&client)
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"warmReplicas": 3, "maxReplicas": 3}})),
        )
        .await
        .unwrap();
    let third = wait_for("a third member with an EK certificate", T, || async {
        list_vms(&client).await.into_iter().find(|vm| {
            !ready.iter().any(|r| r.name_any() == vm.name_any())
                && vm
                    .status
                    .as_ref()
                    .is_some_and(|s| !s.tpm_endorsement_certificates.is_empty())
        })
    })
    .await;
    let third =
        EndorsementCertificate::from_pem(&third.status.unwrap().tpm_endorsement_certificates[0])
            .unwrap();
    TrustBundle::from_pem(ca.certificate_pem())
        .unwrap()
        .verify(&third, now)
        .unwrap();
    running.stop().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bind_mirrors_the_ek_certificates_as_verified_and_release_clears_them() {
    let (server, client) = start().await;
    let mut config = test_config(&client, "a");
    // Long enough a destruction to see the claim Releasing.
    config.simulated_provider.as_mut().unwrap().destroy_after = Duration::from_secs(4);
    let running = spawn_controllers(&client, config);
    create_pool(&client, &pool("p", 1, 1, "r1")).await;
    // What the member publishes before anyone claims it: nothing subject-specific.
    let before = wait_for("a Ready member with an EK certificate", T, || async {
        let vm = list_vms(&client).await.into_iter().next()?;
        let status = vm.status.clone()?;
        (status.phase.as_deref() == Some("Ready")
            && !status.tpm_endorsement_certificates.is_empty())
        .then_some(vm)
    })
    .await;
    let published = before.status.clone().unwrap().tpm_endorsement_certificates;
    create_claim(&client, &claim("c", "p", 3600, "alice")).await;
    let bound = wait_for("c Bound and verified", T, || async {
        let claim = claims(&client).get("c").await.ok()?;
        endorsement(&claim).is_some().then_some(claim)
    })
    .await;
    let status = bound.status.clone().unwrap();
    assert_eq!(status.phase.as_deref(), Some("Bound"));
    assert_eq!(status.virtual_machine_ref, Some(before.name_any()));
    let member = vms(&client).get(&before.name_any()).await.unwrap();
    assert_eq!(
        member.status.unwrap().tpm_endorsement_certificates,
        published,
        "a bind changes no certificate"
    );
    assert_eq!(status.tpm_endorsement_certificates, published);
    for pem in &published {
        let certificate = EndorsementCertificate::from_pem(pem).unwrap();
        assert!(
            !format!("{certificate:?}").contains("alice"),
            "{certificate:?}"
        );
    }
    let condition = endorsement(&bound).unwrap();
    assert_eq!(
        (condition.status.as_str(), condition.reason.as_str()),
        ("True", reason::CHAINS_TO_TRUST_BUNDLE),
        "{}",
        condition.message
    );
    assert_eq!(condition.observed_generation, bound.metadata.generation);
    assert_no_private_key(&client).await;

    claims(&client)
        .delete("c", &DeleteParams::default())
        .await
        .unwrap();
    let releasing = wait_phase(&client, "c", "Releasing", T).await;
    let status = releasing.status.unwrap();
    assert!(status.tpm_endorsement_certificates.is_empty(), "{status:?}");
    assert!(status.addresses.is_empty(), "{status:?}");
    assert!(status.conditions.is_empty(), "{status:?}");
    running.stop().await;
    server.shutdown().await;
}

/// The chart's built-in roles (ClusterRoles and bindings labelled builtin); on the test bed
/// helm installed them already.
async fn builtin_roles(server: &Server, client: &kube::Client) {
    if server.is_real() {
        return;
    }
    let policy = cluster::chart::ClaimSubjectPolicy::only_issuer(ISSUER);
    let roles: Vec<_> = cluster::chart::manifests(&policy)
        .unwrap()
        .into_iter()
        .filter(|o| {
            o.labels()
                .get("console.banlieue.io/builtin")
                .map(String::as_str)
                == Some("true")
        })
        .collect();
    assert!(!roles.is_empty());
    cluster::chart::apply(client, &roles).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_with_the_developer_role_reads_the_certificate_and_its_anchors_and_no_key() {
    let (server, client) = start().await;
    builtin_roles(&server, &client).await;
    let running = spawn_controllers(&client, test_config(&client, "a"));
    create_pool(&client, &pool("p", 1, 1, "r1")).await;
    create_claim(&client, &claim("c", "p", 3600, "alice")).await;
    let broker = impersonating(
        &server,
        "console:broker",
        &["console:developer", "system:authenticated"],
    )
    .await;
    let bound = wait_for("c verified, as the broker reads it", T, || async {
        let claim = claims(&broker).get("c").await.ok()?;
        let condition = endorsement(&claim)?;
        (condition.status == "True").then_some(claim)
    })
    .await;
    let pems = bound.status.unwrap().tpm_endorsement_certificates;
    let anchors = providers(&broker)
        .get(SIMULATED_PROVIDER)
        .await
        .expect("the developer role reads providers")
        .spec
        .attestation
        .unwrap()
        .ek_trust_bundle;
    let bundle = TrustBundle::from_pem(&anchors).unwrap();
    for pem in &pems {
        bundle
            .verify(
                &EndorsementCertificate::from_pem(pem).unwrap(),
                OffsetDateTime::now_utc(),
            )
            .unwrap();
    }
    let key = Api::<Secret>::default_namespaced(broker.clone())
        .get(EK_CA_SECRET)
        .await
        .unwrap_err();
    assert!(
        matches!(&key, kube::Error::Api(status) if status.code == 403),
        "{key}"
    );
    running.stop().await;
    server.shutdown().await;
}

/// A provider named for this test: providers are cluster-scoped, and test-bed tests share
/// the cluster.
fn unique_provider(server: &Server, name: &str) -> String {
    format!("{name}-{}", server.namespace())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_that_does_not_chain_or_a_missing_provider_is_never_verified() {
    let (server, client) = start().await;
    let now = OffsetDateTime::now_utc();
    let theirs = EkAuthority::generate(now).unwrap();
    let forger = EkAuthority::generate(now).unwrap();
    let honest = unique_provider(&server, "honest");
    providers(&client)
        .create(
            &PostParams::default(),
            &VirtualMachineProvider {
                metadata: ObjectMeta {
                    name: Some(honest.clone()),
                    ..ObjectMeta::default()
                },
                spec: VirtualMachineProviderSpec {
                    attestation: Some(ProviderAttestation {
                        ek_trust_bundle: theirs.certificate_pem().to_owned(),
                    }),
                },
            },
        )
        .await
        .unwrap();
    // One member whose EK certificate comes from another CA, one whose provider does not
    // exist; each in a pool of its own, Ready at once.
    let cases = [
        ("forged", honest.clone(), reason::UNTRUSTED),
        (
            "orphan",
            unique_provider(&server, "missing"),
            reason::PROVIDER_NOT_FOUND,
        ),
    ];
    for (name, provider, _) in &cases {
        let mut spec = pool(name, 1, 1, "r1");
        spec.spec.provider_ref = provider.clone();
        let created = create_pool(&client, &spec).await;
        let member = format!("{name}-0");
        ready_member(&client, &created, &member, "r1", 5).await;
        let forged = forger.issue("urn:banlieue:vm:forged", now).unwrap();
        vms(&client)
            .patch(
                &member,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"providerRef": provider}})),
            )
            .await
            .unwrap();
        vms(&client)
            .patch_status(
                &member,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"tpmEndorsementCertificates": [forged]}})),
            )
            .await
            .unwrap();
        create_claim(&client, &claim(name, name, 3600, "alice")).await;
    }
    let mut config = test_config(&client, "a");
    config.simulated_provider = None;
    let running = spawn_controllers(&client, config);
    for (name, _, expected) in &cases {
        let claim = wait_for(&format!("{name} Bound with a verdict"), T, || async {
            let claim = claims(&client).get(name).await.ok()?;
            endorsement(&claim).is_some().then_some(claim)
        })
        .await;
        let status = claim.status.clone().unwrap();
        assert_eq!(status.phase.as_deref(), Some("Bound"));
        assert_eq!(
            status.tpm_endorsement_certificates.len(),
            1,
            "mirrored as is"
        );
        let condition = endorsement(&claim).unwrap();
        assert_eq!(
            (condition.status.as_str(), condition.reason.as_str()),
            ("False", *expected),
            "{name}: {}",
            condition.message
        );
        if *expected == reason::UNTRUSTED {
            let fingerprint =
                EndorsementCertificate::from_pem(&status.tpm_endorsement_certificates[0])
                    .unwrap()
                    .fingerprint_sha256;
            assert!(
                condition.message.contains(&fingerprint),
                "{}",
                condition.message
            );
        }
    }
    running.stop().await;
    providers(&client)
        .delete(&honest, &DeleteParams::default())
        .await
        .unwrap();
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_naming_a_missing_provider_says_so_until_it_exists() {
    let (server, client) = start().await;
    let mut config = test_config(&client, "a");
    config.simulated_provider = None;
    let running = spawn_controllers(&client, config);
    let name = unique_provider(&server, "later");
    let mut spec = pool("p", 1, 1, "r1");
    spec.spec.provider_ref = name.clone();
    create_pool(&client, &spec).await;
    let progressing = |reason: &'static str| {
        let client = client.clone();
        async move {
            let pool = pools(&client).get("p").await.ok()?;
            let condition = pool.status?.conditions.into_iter().next()?;
            (condition.reason == reason).then_some(condition)
        }
    };
    let missing = wait_for("Progressing=False ProviderNotFound", T, || {
        progressing("ProviderNotFound")
    })
    .await;
    assert_eq!(missing.status, "False");
    assert!(missing.message.contains(&name), "{}", missing.message);
    providers(&client)
        .create(
            &PostParams::default(),
            &VirtualMachineProvider {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    ..ObjectMeta::default()
                },
                spec: VirtualMachineProviderSpec { attestation: None },
            },
        )
        .await
        .unwrap();
    // Its member waits for a provider that does not provision: Progressing, not missing.
    wait_for("Progressing=True Provisioning", T, || {
        progressing("Provisioning")
    })
    .await;
    running.stop().await;
    providers(&client)
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    server.shutdown().await;
}
