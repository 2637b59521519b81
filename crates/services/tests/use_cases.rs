//! The use cases on the Kubernetes emulator with the chart installed, without HTTP: as
//! different people, through impersonation, so the chart's RBAC and admission decide.
//! Every refused action leaves an audit row; a role whose binding is refused leaves
//! nothing behind.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use banlieue_domain::{RoleName, Roles, UserName};
use banlieue_identity::{Accounts, PasswordHasher, ThrottlePolicy};
use banlieue_store::{AuditEvent, NewUser, Store};
use cluster::Impersonation;
use cluster::chart;
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use kube_emulator::{Emulator, EmulatorConfig};
use services::{
    Authenticator, Console, CreateClaim, Decider, Principal, SavePool, SaveRole, ServiceError,
    Settings,
};
use time::OffsetDateTime;

const ISSUER: &str = "https://console.example.com";
/// The issuer of tenant `acme`, whose people the subject policy knows as `oidc:` +
/// `<tenant>:<sub>` (the chart's setting for tenants).
const TENANT_ISSUER: &str = "https://idp.acme.example";
const ADDRESS: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7));

struct Setup {
    emulator: Emulator,
    admin: Client,
    accounts: Arc<Accounts>,
    console: Console,
    _dir: tempfile::TempDir,
}

impl Setup {
    /// The emulator with the chart, namespace `demo` and pool `sandbox`.
    async fn start() -> Self {
        let emulator = Emulator::start(EmulatorConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            ..EmulatorConfig::default()
        })
        .await
        .unwrap();
        let config = kube::Config::from_custom_kubeconfig(
            kube::config::Kubeconfig::from_yaml(&emulator.kubeconfig_yaml()).unwrap(),
            &Default::default(),
        )
        .await
        .unwrap();
        let admin = Client::try_from(config.clone()).unwrap();
        let policy = chart::ClaimSubjectPolicy {
            issuers: format!("{ISSUER}\n{TENANT_ISSUER}\n"),
            brokers: String::new(),
            issuer_prefixes: format!("{TENANT_ISSUER}=oidc:\n"),
        };
        chart::install(&admin, &policy).await.unwrap();
        let demo = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: demo\n---\n\
            apiVersion: banlieue.io/v1alpha1\nkind: VirtualMachinePool\nmetadata:\n  name: sandbox\n  namespace: demo\n\
            spec:\n  warmReplicas: 1\n  maxReplicas: 2\n  imageRevision: r1\n  template:\n    cpu: 1\n    memory: 1Gi\n    image: img\n  providerRef: simulated\n";
        chart::apply(&admin, &chart::parse_documents(demo).unwrap())
            .await
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&format!("sqlite://{}/console.db", dir.path().display()))
            .await
            .unwrap();
        let hasher = PasswordHasher::with_params(argon2::Params::new(1024, 1, 1, None).unwrap());
        let accounts = Arc::new(Accounts::new(store, hasher, ThrottlePolicy::default()));
        let settings = Settings {
            issuer: ISSUER.into(),
            claim_ttl_choices: vec![900, 3600],
        };
        let console = Console::new(
            accounts.clone(),
            Some(Arc::new(Impersonation::new(config))),
            settings,
        );
        Self {
            emulator,
            admin,
            accounts,
            console,
            _dir: dir,
        }
    }

    /// A console account holding `roles`, as a principal.
    async fn person(&self, name: &str, roles: &[&str]) -> Principal {
        let new = NewUser {
            name: UserName::parse(name).unwrap(),
            display_name: String::new(),
            email: String::new(),
            roles: Roles::new(roles.iter().map(|r| RoleName::parse(r).unwrap()).collect()).unwrap(),
            must_change_password: false,
        };
        let user = self
            .accounts
            .store()
            .create_user(
                &new,
                "$argon2id$v=19$m=1024,t=1,p=1$c2FsdHNhbHQ$aGFzaA",
                OffsetDateTime::now_utc(),
                &banlieue_store::AuditEvent::now(
                    "-",
                    "user.create",
                    name,
                    std::net::IpAddr::from([127, 0, 0, 1]),
                    "success",
                    "",
                ),
            )
            .await
            .unwrap();
        Principal::local(user, Authenticator::Session, ADDRESS)
    }

    /// The use cases with the console's ServiceAccount's credentials (the chart's RBAC and
    /// policy), not the emulator's admin.
    async fn console_as_service_account(&self) -> Console {
        self.emulator.add_token(
            "console-sa",
            kube_emulator::UserInfo {
                username: "system:serviceaccount:banlieue-system:banlieue-console".into(),
                groups: vec!["system:serviceaccounts".into()],
                ..kube_emulator::UserInfo::default()
            },
        );
        let config = kube::Config::from_custom_kubeconfig(
            kube::config::Kubeconfig::from_yaml(&self.emulator.kubeconfig_for("console-sa"))
                .unwrap(),
            &Default::default(),
        )
        .await
        .unwrap();
        Console::new(
            self.accounts.clone(),
            Some(Arc::new(Impersonation::new(config))),
            Settings {
                issuer: ISSUER.into(),
                claim_ttl_choices: vec![900],
            },
        )
    }

    /// The audit rows of `action`, newest first.
    async fn audited(&self, action: &str) -> Vec<AuditEvent> {
        let rows = self.accounts.store().recent_audit(100).await.unwrap();
        rows.into_iter().filter(|e| e.action == action).collect()
    }
}

fn claim_in(pool: &str, ttl: u32) -> CreateClaim {
    CreateClaim {
        namespace: "demo".into(),
        pool: pool.into(),
        ttl_seconds: Some(ttl),
        subject: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_developer_claims_and_releases_and_both_are_audited() {
    let setup = Setup::start().await;
    let alice = setup.person("alice", &["developer"]).await;
    let view = setup.console.dashboard(&alice).await.unwrap();
    assert!(view.cluster);
    assert!(
        view.pools
            .iter()
            .any(|p| p.name == "sandbox" && p.can_claim)
    );

    let name = setup
        .console
        .create_claim(&alice, claim_in("sandbox", 900))
        .await
        .unwrap();
    assert!(name.starts_with("alice-"), "{name}");
    let view = setup.console.dashboard(&alice).await.unwrap();
    assert_eq!(view.claims.len(), 1);
    assert!(view.all_claims.is_empty(), "a developer oversees nobody");
    let detail = setup
        .console
        .claim(&alice, "demo", &name)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(detail.issuer, ISSUER);
    assert!(detail.claim.can_release);

    // Held by a finalizer, as the claim controller holds it, with the phase it wrote.
    let claims = Api::<cluster::crd::VirtualMachineClaim>::namespaced(setup.admin.clone(), "demo");
    claims
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(
                serde_json::json!({"metadata": {"finalizers": ["test.banlieue.io/hold"]}}),
            ),
        )
        .await
        .unwrap();
    claims
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"status": {"phase": "Bound"}})),
        )
        .await
        .unwrap();
    setup
        .console
        .release_claim(&alice, "demo", &name)
        .await
        .unwrap();
    // What Kubernetes holds right after the delete, before any controller wrote a phase.
    let view = setup.console.dashboard(&alice).await.unwrap();
    assert_eq!(
        (view.claims[0].phase, view.claims[0].can_release),
        (Some(banlieue_domain::claim::ClaimPhase::Releasing), false)
    );
    claims
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    let created = setup.audited("claim.create").await;
    assert_eq!(created[0].result, "success");
    assert_eq!(created[0].target, format!("demo/{name}"));
    assert_eq!(created[0].source_ip, ADDRESS.to_string());
    assert_eq!(setup.audited("claim.release").await[0].result, "success");
    setup.emulator.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_claims_are_audited_with_who_decided() {
    let setup = Setup::start().await;
    let viewer = setup.person("victor", &["viewer"]).await;
    let alice = setup.person("alice", &["developer"]).await;

    let refused = setup
        .console
        .create_claim(&viewer, claim_in("sandbox", 900))
        .await;
    assert!(
        matches!(
            refused,
            Err(ServiceError::Forbidden {
                by: Decider::Kubernetes,
                ..
            })
        ),
        "{refused:?}"
    );
    let bad_ttl = setup
        .console
        .create_claim(&alice, claim_in("sandbox", 5))
        .await;
    assert!(
        matches!(bad_ttl, Err(ServiceError::Invalid { by: Decider::Console, ref field, .. }) if field == "ttl_seconds"),
        "{bad_ttl:?}"
    );
    let no_pool = setup
        .console
        .create_claim(&alice, claim_in("nothing", 900))
        .await;
    assert!(matches!(no_pool, Err(ServiceError::Invalid { ref field, .. }) if field == "pool"));

    let rows = setup.audited("claim.create").await;
    let results: Vec<(&str, &str)> = rows
        .iter()
        .map(|e| (e.actor.as_str(), e.result.as_str()))
        .collect();
    assert_eq!(
        results,
        [
            ("alice", "invalid"),
            ("alice", "invalid"),
            ("victor", "forbidden")
        ]
    );
    assert!(!rows[2].detail.is_empty(), "Kubernetes' reason is kept");

    let released = setup
        .console
        .release_claim(&viewer, "demo", "someone-else")
        .await;
    assert!(released.is_err());
    assert_eq!(setup.audited("claim.release").await[0].result, "forbidden");
    setup.emulator.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pools_are_validated_by_the_crd_bounds_and_refusals_are_audited() {
    let setup = Setup::start().await;
    let operator = setup.person("olga", &["operator"]).await;
    let developer = setup.person("dev", &["developer"]).await;
    let pool = SavePool {
        namespace: "demo".into(),
        name: "big".into(),
        warm_replicas: "2".into(),
        max_replicas: "4".into(),
        image_revision: "r1".into(),
        cpu: "2".into(),
        memory: "2Gi".into(),
        image: "img".into(),
        provider: "simulated".into(),
    };
    assert_eq!(
        setup.console.save_pool(&operator, &pool).await.unwrap(),
        "big"
    );
    let view = setup
        .console
        .pools(&operator, Some(("demo", "big")))
        .await
        .unwrap();
    assert!(view.can_manage);
    assert_eq!(view.form.max_replicas, 4);

    let too_warm = SavePool {
        warm_replicas: "5".into(),
        ..pool.clone()
    };
    let refused = setup.console.save_pool(&operator, &too_warm).await;
    assert!(
        matches!(refused, Err(ServiceError::Invalid { ref field, .. }) if field == "warm_replicas")
    );
    let too_many = SavePool {
        max_replicas: "10001".into(),
        ..pool.clone()
    };
    assert!(setup.console.save_pool(&operator, &too_many).await.is_err());
    let by_rbac = setup.console.save_pool(&developer, &pool).await;
    assert!(matches!(
        by_rbac,
        Err(ServiceError::Forbidden {
            by: Decider::Kubernetes,
            ..
        })
    ));
    let deleted = setup.console.delete_pool(&developer, "demo", "big").await;
    assert!(deleted.is_err());

    let saves: Vec<String> = setup
        .audited("pool.save")
        .await
        .into_iter()
        .map(|e| format!("{}:{}", e.actor, e.result))
        .collect();
    assert_eq!(
        saves,
        [
            "dev:forbidden",
            "olga:invalid",
            "olga:invalid",
            "olga:success"
        ]
    );
    assert_eq!(setup.audited("pool.delete").await[0].result, "forbidden");
    setup.emulator.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pool_form_offers_the_providers_that_exist_and_a_pool_says_why_it_waits() {
    use cluster::crd::{VirtualMachinePool, VirtualMachineProvider, VirtualMachineProviderSpec};
    let setup = Setup::start().await;
    let operator = setup.person("olga", &["operator"]).await;
    // No provider yet: the form names none (no made-up default).
    let view = setup.console.pools(&operator, None).await.unwrap();
    assert_eq!(view.providers, Some(Vec::new()));
    assert_eq!(view.form.provider, "");
    let providers = Api::<VirtualMachineProvider>::all(setup.admin.clone());
    for name in ["zeta", "alpha"] {
        let provider =
            VirtualMachineProvider::new(name, VirtualMachineProviderSpec { attestation: None });
        providers
            .create(&Default::default(), &provider)
            .await
            .unwrap();
    }
    let view = setup.console.pools(&operator, None).await.unwrap();
    assert_eq!(view.providers, Some(vec!["alpha".into(), "zeta".into()]));
    assert_eq!(
        view.form.provider, "alpha",
        "a new pool's form takes the first"
    );
    // The pool controller's Progressing=False condition reaches the page.
    let sandbox = |view: &banlieue_domain::views::PoolsView| {
        view.pools
            .iter()
            .find(|p| p.name == "sandbox")
            .cloned()
            .unwrap()
    };
    assert_eq!(sandbox(&view).stalled, None);
    let status = serde_json::json!({ "status": { "conditions": [{
        "type": "Progressing", "status": "False", "reason": "ProviderNotFound",
        "message": "VirtualMachineProvider simulated does not exist",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }]}});
    Api::<VirtualMachinePool>::namespaced(setup.admin.clone(), "demo")
        .patch_status("sandbox", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    let view = setup.console.pools(&operator, None).await.unwrap();
    let stalled = sandbox(&view).stalled.expect("the condition is shown");
    assert_eq!(
        stalled.reason,
        banlieue_domain::views::PoolStall::PROVIDER_NOT_FOUND
    );
    assert_eq!(
        stalled.message,
        "VirtualMachineProvider simulated does not exist"
    );
    setup.emulator.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_role_granted_every_pool_verb_edits_and_deletes_pools() {
    let setup = Setup::start().await;
    let admin = setup.person("ada", &["admin"]).await;
    let grants = services::CUSTOM_ROLE_VERBS
        .iter()
        .map(|verb| ("virtualmachinepools".to_owned(), (*verb).to_owned()))
        .collect();
    let role = SaveRole {
        name: "pool-keeper".into(),
        grants,
        version: None,
    };
    setup.console.save_role(&admin, &role).await.unwrap();
    let keeper = setup.person("kim", &["pool-keeper"]).await;
    let edited = SavePool {
        namespace: "demo".into(),
        name: "sandbox".into(),
        warm_replicas: "1".into(),
        max_replicas: "3".into(),
        image_revision: "r1".into(),
        cpu: "1".into(),
        memory: "1Gi".into(),
        image: "img".into(),
        provider: "simulated".into(),
    };
    // Saving is a server-side apply, which Kubernetes authorizes as `patch`.
    let saved = setup.console.save_pool(&keeper, &edited).await;
    assert_eq!(saved.unwrap(), "sandbox");
    let view = setup
        .console
        .pools(&keeper, Some(("demo", "sandbox")))
        .await
        .unwrap();
    assert!(view.can_manage);
    assert_eq!(view.form.max_replicas, 3);
    setup
        .console
        .delete_pool(&keeper, "demo", "sandbox")
        .await
        .unwrap();
    let access = setup.console.access(&keeper).await.unwrap();
    let pools = access
        .iter()
        .find(|row| row.resource == "virtualmachinepools")
        .unwrap();
    assert!(
        pools.verbs.iter().all(|(_, allowed)| *allowed),
        "What can I do? shows every verb, patch too: {pools:?}"
    );
    assert!(pools.verbs.iter().any(|(verb, _)| verb == "patch"));
    setup.emulator.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_is_made_whole_or_not_at_all() {
    let setup = Setup::start().await;
    let admin = setup.person("ada", &["admin"]).await;
    let developer = setup.person("dev", &["developer"]).await;
    let grants = vec![("virtualmachineclaims".to_owned(), "get".to_owned())];
    let role = SaveRole {
        name: "auditor".into(),
        grants: grants.clone(),
        version: None,
    };
    let saved = setup.console.save_role(&admin, &role).await.unwrap();
    assert_eq!(saved.as_str(), "auditor");
    let view = setup.console.roles(&admin, Some("auditor")).await.unwrap();
    let editing = view.editing.expect("the role being edited");
    assert_eq!(editing.holders, ["ada"], "the author holds a new role");
    assert_eq!(setup.audited("role.create").await[0].result, "success");
    // Creating it again is refused; an edit names the version it was made from.
    let again = setup.console.save_role(&admin, &role).await;
    assert!(
        matches!(
            again,
            Err(ServiceError::Conflict {
                by: Decider::Console,
                ..
            })
        ),
        "{again:?}"
    );
    let edit = |verb: &str| SaveRole {
        grants: vec![("virtualmachineclaims".to_owned(), verb.to_owned())],
        version: Some(editing.version.clone()),
        ..role.clone()
    };
    setup
        .console
        .save_role(&admin, &edit("list"))
        .await
        .unwrap();
    assert_eq!(setup.audited("role.update").await[0].result, "success");
    // A second edit from the same version would undo the first unseen.
    let stale = setup.console.save_role(&admin, &edit("watch")).await;
    assert!(
        matches!(
            stale,
            Err(ServiceError::Conflict {
                by: Decider::Console,
                ..
            })
        ),
        "{stale:?}"
    );
    assert_eq!(setup.audited("role.save").await[0].result, "conflict");

    // Only admins; the console decides before Kubernetes is asked.
    let refused = setup.console.save_role(&developer, &role).await;
    assert!(matches!(
        refused,
        Err(ServiceError::Forbidden {
            by: Decider::Console,
            ..
        })
    ));
    assert_eq!(setup.audited("role.save").await[0].result, "forbidden");

    // Kubernetes lets this admin make ClusterRoles but not bind them: the new role's
    // ClusterRole goes again, and nobody holds it.
    let roles = Api::<ClusterRole>::all(setup.admin.clone());
    roles
        .patch(
            "console-admin",
            &PatchParams::apply("test").force(),
            &Patch::Apply(ClusterRole {
                metadata: kube::api::ObjectMeta {
                    name: Some("console-admin".into()),
                    ..Default::default()
                },
                rules: Some(vec![
                    PolicyRule {
                        api_groups: Some(vec!["rbac.authorization.k8s.io".into()]),
                        resources: Some(vec!["clusterroles".into()]),
                        verbs: vec!["*".into()],
                        ..Default::default()
                    },
                    PolicyRule {
                        api_groups: Some(vec!["banlieue.io".into()]),
                        resources: Some(vec!["*".into()]),
                        verbs: vec!["*".into()],
                        ..Default::default()
                    },
                ]),
                ..Default::default()
            }),
        )
        .await
        .unwrap();
    let half = SaveRole {
        name: "half".into(),
        grants,
        version: None,
    };
    let refused = setup.console.save_role(&admin, &half).await;
    assert!(
        matches!(
            refused,
            Err(ServiceError::Forbidden {
                by: Decider::Kubernetes,
                ..
            })
        ),
        "{refused:?}"
    );
    assert!(
        roles.get_opt("console-role-half").await.unwrap().is_none(),
        "no ClusterRole is left without its binding"
    );
    assert!(
        setup
            .accounts
            .store()
            .user_names_with_role("half")
            .await
            .unwrap()
            .is_empty()
    );
    let rows = setup.audited("role.save").await;
    assert_eq!(
        (rows[0].target.as_str(), rows[0].result.as_str()),
        ("half", "forbidden")
    );
    setup.emulator.shutdown().await;
}

/// The groups the chart's `banlieue-console-impersonator-groups` lets the console
/// impersonate.
async fn impersonable(admin: &Client) -> std::collections::BTreeSet<String> {
    let role = Api::<ClusterRole>::all(admin.clone())
        .get(cluster::impersonable::GROUPS_ROLE)
        .await
        .unwrap();
    cluster::impersonable::impersonable_in(&role).expect("groups by name")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saved_roles_group_is_impersonable_at_once_and_a_deleted_ones_no_more() {
    let setup = Setup::start().await;
    // No controllers: the Roles page itself keeps the list.
    let console = setup.console_as_service_account().await;
    let admin = setup.person("ada", &["admin"]).await;
    assert!(!impersonable(&setup.admin).await.contains("console:auditor"));
    let role = SaveRole {
        name: "auditor".into(),
        grants: vec![("virtualmachineclaims".to_owned(), "get".to_owned())],
        version: None,
    };
    console.save_role(&admin, &role).await.unwrap();
    assert!(impersonable(&setup.admin).await.contains("console:auditor"));
    // Its author now holds it, and is acted for with its group.
    let ada = setup
        .accounts
        .store()
        .user_by_name(&UserName::parse("ada").unwrap())
        .await
        .unwrap()
        .unwrap();
    let ada = Principal::local(ada, Authenticator::Session, ADDRESS);
    console
        .roles(&ada, None)
        .await
        .expect("the author, with the new role's group");
    console.delete_role(&admin, "auditor").await.unwrap();
    assert!(!impersonable(&setup.admin).await.contains("console:auditor"));
    setup.emulator.shutdown().await;
}

/// The users the chart's `banlieue-console-impersonator-users` lets the console
/// impersonate.
async fn impersonable_users(admin: &Client) -> std::collections::BTreeSet<String> {
    let role = Api::<ClusterRole>::all(admin.clone())
        .get(cluster::impersonable::USERS_ROLE)
        .await
        .unwrap();
    cluster::impersonable::impersonable_users_in(&role).expect("users by name")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_user_is_acted_for_at_once_and_a_deleted_one_no_more() {
    let setup = Setup::start().await;
    let console = setup.console_as_service_account().await;
    let listed = |name: &'static str| {
        let admin = setup.admin.clone();
        async move { impersonable_users(&admin).await.contains(name) }
    };
    // Made in the database directly, as `banlieue-console admin user create` does from a
    // shell: not listed until they first act, and then at once.
    let dora = setup.person("dora", &["developer"]).await;
    assert!(!listed("console:dora").await);
    console
        .create_claim(&dora, claim_in("sandbox", 900))
        .await
        .expect("claims as themselves at once");
    assert!(listed("console:dora").await);
    assert_eq!(console.dashboard(&dora).await.unwrap().claims.len(), 1);

    // Made through the console (its Users page updates the list right after).
    let (eve, _) = setup
        .accounts
        .create_user(
            &banlieue_identity::Actor::Operator,
            "eve",
            &banlieue_identity::UserProfile {
                display_name: String::new(),
                email: String::new(),
                roles: vec!["developer".into()],
            },
            banlieue_identity::PasswordChoice::Generate,
        )
        .await
        .unwrap();
    console.update_impersonable_users().await;
    assert!(listed("console:eve").await);
    let eve = Principal::local(eve, Authenticator::Session, ADDRESS);
    let view = console.dashboard(&eve).await.unwrap();
    assert!(
        view.pools
            .iter()
            .any(|p| p.name == "sandbox" && p.can_claim)
    );
    console
        .create_claim(&eve, claim_in("sandbox", 900))
        .await
        .expect("claims as themselves");
    assert_eq!(
        impersonable_users(&setup.admin).await,
        ["console:dora".to_owned(), "console:eve".to_owned()].into(),
        "exactly the users in the database (it has no bootstrap admin)"
    );

    // Deleted: no longer listed, and a request still in flight for them is refused.
    let record = setup
        .accounts
        .user(&banlieue_identity::Actor::Operator, "dora")
        .await
        .unwrap();
    setup
        .accounts
        .delete_user(&banlieue_identity::Actor::Operator, "dora", record.version)
        .await
        .unwrap();
    console.update_impersonable_users().await;
    assert!(!listed("console:dora").await);
    assert!(
        console
            .create_claim(&dora, claim_in("sandbox", 900))
            .await
            .is_err(),
        "a deleted user is not acted for"
    );
    setup.emulator.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_of_users_reset_in_the_cluster_is_written_again_at_once() {
    let setup = Setup::start().await;
    setup.person("dora", &["developer"]).await;
    let access = Arc::new(Impersonation::new(
        kube::Config::from_custom_kubeconfig(
            kube::config::Kubeconfig::from_yaml(&setup.emulator.kubeconfig_yaml()).unwrap(),
            &Default::default(),
        )
        .await
        .unwrap(),
    ));
    tokio::spawn(access.clone().follow_impersonable());
    let console = Arc::new(Console::new(
        setup.accounts.clone(),
        Some(access),
        Settings {
            issuer: ISSUER.into(),
            claim_ttl_choices: vec![900],
        },
    ));
    let keeping = console.clone();
    tokio::spawn(async move {
        keeping
            .keep_impersonable_users(std::future::pending())
            .await
    });
    let listed = |want: &'static [&'static str]| {
        let admin = setup.admin.clone();
        async move {
            let want: std::collections::BTreeSet<String> =
                want.iter().map(|u| (*u).to_owned()).collect();
            for _ in 0..100 {
                if impersonable_users(&admin).await == want {
                    return true;
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            false
        }
    };
    assert!(listed(&["console:dora"]).await, "written at start");

    // What `helm rollback` does: the list of an older revision, without dora. The minute's
    // pass is far off; the watch brings her back.
    let roles = Api::<ClusterRole>::all(setup.admin.clone());
    let mut role = roles.get(cluster::impersonable::USERS_ROLE).await.unwrap();
    role.rules.as_mut().unwrap()[0].resource_names = Some(vec!["console:admin".into()]);
    roles
        .replace(
            cluster::impersonable::USERS_ROLE,
            &Default::default(),
            &role,
        )
        .await
        .unwrap();
    assert!(
        listed(&["console:dora"]).await,
        "written again within 5 s, not at the next minute"
    );
    setup.emulator.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_can_i_do_is_kubernetes_answer_and_empty_without_a_cluster() {
    let setup = Setup::start().await;
    let viewer = setup.person("victor", &["viewer"]).await;
    let rows = setup.console.access(&viewer).await.unwrap();
    let claims = rows
        .iter()
        .find(|r| r.resource == "virtualmachineclaims")
        .unwrap();
    let allowed = |verb: &str| claims.verbs.iter().any(|(v, ok)| v == verb && *ok);
    assert!(allowed("list"));
    assert!(!allowed("create"));

    let settings = setup.console.settings().clone();
    let offline = Console::new(setup.accounts.clone(), None, settings);
    assert!(offline.access(&viewer).await.unwrap().is_empty());
    assert!(!offline.dashboard(&viewer).await.unwrap().cluster);
    assert!(matches!(
        offline
            .create_claim(&viewer, claim_in("sandbox", 900))
            .await,
        Err(ServiceError::NoCluster)
    ));
    assert_eq!(setup.audited("claim.create").await[0].result, "no-cluster");
    setup.emulator.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_that_does_not_answer_hides_the_pools_link_without_holding_the_page() {
    let setup = Setup::start().await;
    let alice = setup.person("alice", &["operator"]).await;
    assert!(
        setup.console.may_see_pools(&alice).await,
        "an operator lists pools"
    );

    // A cluster that takes connections and never answers them.
    let (url, held) = banlieue_testbed::silent_cluster().await;
    let config = kube::Config::new(url.parse().unwrap());
    let console = Console::new(
        setup.accounts.clone(),
        Some(Arc::new(Impersonation::new(config))),
        Settings {
            issuer: ISSUER.into(),
            claim_ttl_choices: vec![900],
        },
    );
    let started = std::time::Instant::now();
    let shown = tokio::time::timeout(
        services::NAVIGATION_TIMEOUT * 4,
        console.may_see_pools(&alice),
    )
    .await
    .expect("the header does not wait on the cluster");
    assert!(!shown);
    assert!(started.elapsed() >= services::NAVIGATION_TIMEOUT);
    held.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_that_stalls_makes_each_page_unavailable_within_the_request_timeout() {
    let setup = Setup::start().await;
    let alice = setup.person("alice", &["operator"]).await;
    // A cluster that takes connections and never answers them.
    let (url, held) = banlieue_testbed::silent_cluster().await;
    let timeout = std::time::Duration::from_secs(1);
    let console = Console::new(
        setup.accounts.clone(),
        Some(Arc::new(
            Impersonation::new(kube::Config::new(url.parse().unwrap()))
                .with_request_timeout(timeout),
        )),
        Settings {
            issuer: ISSUER.into(),
            claim_ttl_choices: vec![900],
        },
    );
    let bounded = |started: std::time::Instant| started.elapsed() < timeout * 4;
    let started = std::time::Instant::now();
    let dashboard = console.dashboard(&alice).await;
    assert!(
        matches!(dashboard, Err(ServiceError::Unavailable { .. })),
        "{dashboard:?}"
    );
    assert!(
        bounded(started),
        "the dashboard waited {:?}",
        started.elapsed()
    );
    let started = std::time::Instant::now();
    let access = console.access(&alice).await;
    assert!(
        access.is_err() || access.as_ref().is_ok_and(|a| a.is_empty()),
        "{access:?}"
    );
    assert!(
        bounded(started),
        "What can I do? waited {:?}",
        started.elapsed()
    );
    held.abort();
}

/// Tenant `acme`'s person `sub` with `roles`, who may claim in `namespaces`, as their
/// verified token names them.
fn tenant_person(sub: &str, roles: &[&str], namespaces: &[&str]) -> Principal {
    let person = tenants::TenantIdentity {
        tenant: "acme".into(),
        issuer: TENANT_ISSUER.into(),
        subject: sub.into(),
        username: format!("{sub}@acme.example"),
        name: Some(format!("{sub} of acme")),
        email: None,
        roles: Roles::new(roles.iter().map(|r| RoleName::parse(r).unwrap()).collect()).unwrap(),
        namespaces: namespaces.iter().map(|n| n.to_string()).collect(),
        expires_at: u64::MAX,
    };
    Principal::tenant(person, Authenticator::BearerToken, ADDRESS)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_person_claims_as_themselves_only_in_their_tenants_namespaces() {
    let setup = Setup::start().await;
    let console = setup.console_as_service_account().await;
    let tina = tenant_person("t-17", &["developer"], &["demo"]);
    assert!(
        !impersonable_users(&setup.admin)
            .await
            .contains("oidc:acme:t-17")
    );

    // Acted for at once, through the chart's RBAC and policies: noted in the database,
    // then on the list of users the console may impersonate.
    let view = console.dashboard(&tina).await.unwrap();
    assert!(
        view.pools
            .iter()
            .any(|p| p.name == "sandbox" && p.can_claim)
    );
    assert!(
        impersonable_users(&setup.admin)
            .await
            .contains("oidc:acme:t-17")
    );
    let noted = setup
        .accounts
        .store()
        .tenant_people_seen_since(OffsetDateTime::now_utc() - time::Duration::minutes(1))
        .await
        .unwrap();
    assert_eq!(noted.len(), 1);
    assert_eq!(noted[0].person.username, "t-17@acme.example");

    // The claim names them at their tenant's issuer; the subject policy binds it to them.
    let name = console
        .create_claim(&tina, claim_in("sandbox", 900))
        .await
        .expect("a tenant's person claims in their tenant's namespace");
    assert!(name.starts_with("acme-"), "{name}");
    let claim = Api::<cluster::crd::VirtualMachineClaim>::namespaced(setup.admin.clone(), "demo")
        .get(&name)
        .await
        .unwrap();
    assert_eq!(claim.spec.subject.issuer, TENANT_ISSUER);
    assert_eq!(claim.spec.subject.id, "acme:t-17");
    let view = console.dashboard(&tina).await.unwrap();
    assert_eq!(view.claims.len(), 1, "their own claim is theirs");
    assert!(view.claims[0].can_release);

    // Another person of the tenant does not own it.
    let other = tenant_person("t-18", &["developer"], &["demo"]);
    assert!(console.dashboard(&other).await.unwrap().claims.is_empty());

    // Outside the tenant's namespaces: refused by the console, before Kubernetes, and
    // audited under their Kubernetes user.
    let elsewhere = tenant_person("t-17", &["developer"], &["acme-sandboxes"]);
    let refused = console
        .create_claim(&elsewhere, claim_in("sandbox", 900))
        .await;
    assert!(
        matches!(
            &refused,
            Err(ServiceError::Forbidden { by: Decider::Console, reason }) if reason.contains("acme-sandboxes")
        ),
        "{refused:?}"
    );
    assert!(
        !console
            .dashboard(&elsewhere)
            .await
            .unwrap()
            .pools
            .iter()
            .any(|p| p.can_claim),
        "no pool is offered outside the tenant's namespaces"
    );
    let created = setup.audited("claim.create").await;
    assert_eq!(created[0].actor, "oidc:acme:t-17");
    assert_eq!(created[0].result, "forbidden");
    assert_eq!(created[1].actor, "oidc:acme:t-17");
    assert_eq!(created[1].result, "success");

    console.release_claim(&tina, "demo", &name).await.unwrap();
    setup.emulator.shutdown().await;
}
