//! What the platform publishes for attestation (claim design seed, section 6): the
//! simulated provider's EK certificates and trust bundle, their mirror on a Bound claim,
//! the claim's `EndorsementVerified` condition, and a pool's missing provider.

mod common;

use std::time::Duration;

use cluster::attestation::{EndorsementCertificate, TrustBundle, reason, vm_identity};
use cluster::crd::{
    ENDORSEMENT_VERIFIED_CONDITION, ProviderAttestation, VirtualMachineClaim,
    VirtualMachineProvider, VirtualMachineProviderSpec,
};
use cluster::ek_authority::{EK_CA_SECRET, EkAuthority};
use cluster::provider::SIMULATED_PROVIDER;
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
        let named = format!("{} {:?}", certificate.issuer, certificate.identities);
        assert!(!named.contains("alice"), "{named}");
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

/// What a member publishes in a case of the test below.
#[derive(Clone, Copy, PartialEq)]
enum Published {
    /// Its own identity, from the provider's CA.
    Honest,
    /// Its own identity, from another CA.
    OtherCa,
    /// Another VM's identity, from the provider's CA (a certificate copied elsewhere).
    OtherVm,
    /// A private key in front of an honest certificate, in one entry.
    KeyAndCertificate,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_members_own_certificate_from_its_providers_ca_is_verified() {
    let (server, client) = start().await;
    let now = OffsetDateTime::now_utc();
    let theirs = EkAuthority::generate(now).unwrap();
    let forger = EkAuthority::generate(now).unwrap();
    let honest = unique_provider(&server, "honest");
    let bundle_of = |ca: &EkAuthority| VirtualMachineProviderSpec {
        attestation: Some(ProviderAttestation {
            ek_trust_bundle: ca.certificate_pem().to_owned(),
        }),
    };
    providers(&client)
        .create(
            &PostParams::default(),
            &VirtualMachineProvider {
                metadata: ObjectMeta {
                    name: Some(honest.clone()),
                    ..ObjectMeta::default()
                },
                spec: bundle_of(&theirs),
            },
        )
        .await
        .unwrap();
    let missing = unique_provider(&server, "missing");
    // Each case in a pool of its own with one member, Ready at once.
    let cases = [
        (
            "good",
            &honest,
            Published::Honest,
            ("True", reason::CHAINS_TO_TRUST_BUNDLE),
        ),
        (
            "forged",
            &honest,
            Published::OtherCa,
            ("False", reason::UNTRUSTED),
        ),
        (
            "copied",
            &honest,
            Published::OtherVm,
            ("False", reason::UNTRUSTED),
        ),
        (
            "smuggled",
            &honest,
            Published::KeyAndCertificate,
            ("False", reason::UNTRUSTED),
        ),
        (
            "orphan",
            &missing,
            Published::Honest,
            ("False", reason::PROVIDER_NOT_FOUND),
        ),
    ];
    for (name, provider, published, _) in &cases {
        let mut spec = pool(name, 1, 1, "r1");
        spec.spec.provider_ref = (*provider).clone();
        let created = create_pool(&client, &spec).await;
        let member = format!("{name}-0");
        let vm = ready_member(&client, &created, &member, "r1", 5).await;
        let own = vm_identity(server.namespace(), &member, &vm.uid().unwrap());
        let entry = match published {
            Published::Honest => theirs.issue(&own, now).unwrap(),
            Published::OtherCa => forger.issue(&own, now).unwrap(),
            Published::OtherVm => theirs
                .issue(&vm_identity(server.namespace(), "elsewhere", "u"), now)
                .unwrap(),
            Published::KeyAndCertificate => format!(
                "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIA==\n-----END PRIVATE KEY-----\n{}",
                theirs.issue(&own, now).unwrap()
            ),
        };
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
                &Patch::Merge(json!({"status": {"tpmEndorsementCertificates": [entry]}})),
            )
            .await
            .unwrap();
        create_claim(&client, &claim(name, name, 3600, "alice")).await;
    }
    let mut config = test_config(&client, "a");
    config.simulated_provider = None;
    let running = spawn_controllers(&client, config);
    let verdict_of = |name: &'static str, status: &'static str| {
        let client = client.clone();
        async move {
            let claim = claims(&client).get(name).await.ok()?;
            endorsement(&claim)
                .filter(|c| c.status == status)
                .map(|c| (claim, c))
        }
    };
    for (name, _, published, (status, expected)) in cases {
        let (claim, condition) = wait_for(&format!("{name} Bound with {status}"), T, || {
            verdict_of(name, status)
        })
        .await;
        assert_eq!(condition.reason, expected, "{name}: {}", condition.message);
        let mirrored = claim.status.unwrap().tpm_endorsement_certificates;
        if published == Published::KeyAndCertificate {
            assert!(mirrored.is_empty(), "nothing but certificates is mirrored");
            assert!(
                condition
                    .message
                    .contains("not exactly one PEM CERTIFICATE block")
            );
        } else {
            assert_eq!(mirrored.len(), 1, "{name}: mirrored as is");
            let fingerprint = EndorsementCertificate::from_pem(&mirrored[0])
                .unwrap()
                .fingerprint_sha256;
            if expected == reason::UNTRUSTED {
                assert!(
                    condition.message.contains(&fingerprint),
                    "{}",
                    condition.message
                );
            }
        }
        if published == Published::OtherVm {
            assert!(condition.message.contains("names another VirtualMachine"));
        }
    }
    // The key a member carried reached no claim.
    let claimed = serde_json::to_string(
        &claims(&client)
            .list(&Default::default())
            .await
            .unwrap()
            .items,
    )
    .unwrap();
    assert!(!claimed.contains("PRIVATE KEY"), "{claimed}");
    // A change of the provider's bundle is judged again at once (not at the next resync):
    // with the forger's CA, the good claim is no longer verified and the forged one is.
    providers(&client)
        .patch(
            &honest,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": bundle_of(&forger)})),
        )
        .await
        .unwrap();
    wait_for("good no longer verified", T, || verdict_of("good", "False")).await;
    wait_for("forged now verified", T, || verdict_of("forged", "True")).await;
    // A change of the held member's certificate is judged at once too, both ways: the
    // forged claim's member publishes another VM's certificate, then its own again.
    let forged_vm = vms(&client).get("forged-0").await.unwrap();
    let own = forged_vm.status.unwrap().tpm_endorsement_certificates;
    let copied = forger
        .issue(&vm_identity(server.namespace(), "elsewhere", "u"), now)
        .unwrap();
    for (entry, status) in [(vec![copied], "False"), (own, "True")] {
        vms(&client)
            .patch_status(
                "forged-0",
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"tpmEndorsementCertificates": entry}})),
            )
            .await
            .unwrap();
        wait_for(
            &format!("forged {status} after its member changed"),
            T,
            || verdict_of("forged", status),
        )
        .await;
    }
    running.stop().await;
    providers(&client)
        .delete(&honest, &DeleteParams::default())
        .await
        .unwrap();
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_member_keeps_its_ek_and_a_deleted_provider_is_published_again() {
    let (server, client) = start().await;
    let running = spawn_controllers(&client, test_config(&client, "a"));
    create_pool(&client, &pool("p", 1, 1, "r1")).await;
    create_claim(&client, &claim("c", "p", 3600, "alice")).await;
    let bound = wait_for("c verified", T, || async {
        let claim = claims(&client).get("c").await.ok()?;
        (endorsement(&claim)?.status == "True").then_some(claim)
    })
    .await;
    let member = bound.status.unwrap().virtual_machine_ref.unwrap();
    let published = |vm: &cluster::crd::VirtualMachine| {
        vm.status
            .as_ref()
            .map(|s| s.tpm_endorsement_certificates.clone())
            .unwrap_or_default()
    };
    let before = published(&vms(&client).get(&member).await.unwrap());
    // Its phase reset by someone: the provider makes it Ready again with the same EK.
    let reset = vms(&client)
        .patch_status(
            &member,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Provisioning"}})),
        )
        .await
        .unwrap();
    let again = wait_for("the held member Ready again", T, || async {
        let vm = vms(&client).get(&member).await.ok()?;
        let ready = vm.status.as_ref()?.phase.as_deref() == Some("Ready")
            && vm.resource_version() != reset.resource_version();
        ready.then(|| published(&vm))
    })
    .await;
    assert_eq!(again, before, "a held member keeps its EK");
    // Its certificates cleared by someone: the provider does not give the held VM another
    // EK, and the claim says there is none.
    vms(&client)
        .patch_status(
            &member,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"tpmEndorsementCertificates": null}})),
        )
        .await
        .unwrap();
    let cleared = wait_for("c without certificate", T, || async {
        let claim = claims(&client).get("c").await.ok()?;
        let condition = endorsement(&claim)?;
        (condition.reason == reason::NO_CERTIFICATE).then_some(condition)
    })
    .await;
    assert_eq!(cleared.status, "False");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let vm = vms(&client).get(&member).await.unwrap();
    assert!(
        vm.status.unwrap().tpm_endorsement_certificates.is_empty(),
        "a held member gets no new EK"
    );
    // The shared provider object is deleted only on a cluster of this test's own.
    if !server.is_real() {
        providers(&client)
            .delete(SIMULATED_PROVIDER, &DeleteParams::default())
            .await
            .unwrap();
        wait_for("the simulated provider published again", T, || async {
            providers(&client).get_opt(SIMULATED_PROVIDER).await.ok()?
        })
        .await;
    }
    running.stop().await;
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
    // A claim on it waits, and says why: the pool makes nothing, not "soon".
    create_claim(&client, &claim("c", "p", 3600, "alice")).await;
    let waiting = wait_for("c waiting on a pool that makes nothing", T, || async {
        let status = claims(&client).get("c").await.ok()?.status?;
        (status.reason.as_deref() == Some("PoolNotProgressing")).then_some(status)
    })
    .await;
    assert_eq!(waiting.phase.as_deref(), Some("Pending"));
    let said = waiting.message.unwrap_or_default();
    assert!(
        said.contains("ProviderNotFound") && said.contains(&name),
        "{said}"
    );
    claims(&client)
        .delete("c", &DeleteParams::default())
        .await
        .unwrap();
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
