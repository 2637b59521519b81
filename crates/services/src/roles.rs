//! Roles (SPEC §5, admins): built-in and custom roles as Kubernetes ClusterRoles bound to
//! the group `console:<role>`, read and written as the admin, so Kubernetes RBAC decides
//! (its escalation check keeps an admin from granting more than they hold).
//!
//! A custom role is applied as one unit: a new role's ClusterRole is created first and
//! removed again when its binding cannot be made, so nothing is left half-made.
//!
//! After each change the console, with its own credentials and nothing else, brings the
//! list of groups it may impersonate up to date ([`cluster::impersonable`]), so a new
//! role's holders are acted for with its group at once and a deleted role's group is no
//! longer impersonable.

use std::collections::BTreeMap;

use banlieue_domain::views::{RoleRow, RolesView};
use banlieue_domain::{BuiltinRole, RoleName};
use cluster::crd::GROUP;
use cluster::impersonable::ROLE_LABEL;
use cluster::impersonation::CONSOLE_PREFIX;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use kube::api::{DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};

use crate::pools::FIELD_MANAGER;
use crate::{Console, Decider, Principal, Result, ServiceError};

/// The label of the chart's built-in roles.
const BUILTIN_LABEL: &str = "console.banlieue.io/builtin";
/// What a custom role may grant: the banlieue.io resources…
pub const CUSTOM_ROLE_RESOURCES: [&str; 3] = [
    "virtualmachinepools",
    "virtualmachineclaims",
    "virtualmachines",
];
/// …and verbs, as Kubernetes names them (saving a pool is a server-side apply: `patch`).
pub const CUSTOM_ROLE_VERBS: [&str; 7] = [
    "get", "list", "watch", "create", "update", "patch", "delete",
];
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// A custom role as its form sends it: a name and `(resource, verb)` grants, and for an
/// edit the version it was made from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SaveRole {
    /// The role's console name, as typed.
    pub name: String,
    /// `(resource, verb)` pairs from [`CUSTOM_ROLE_RESOURCES`] × [`CUSTOM_ROLE_VERBS`].
    pub grants: Vec<(String, String)>,
    /// `None`: a new role, refused when one of that name exists. `Some`: an edit of the
    /// role as it was at this version ([`RoleRow::version`], its ClusterRole's
    /// `resourceVersion`), refused when it changed since.
    pub version: Option<String>,
}

impl Console {
    /// The Roles page: built-in and custom roles with their Kubernetes rules and holders;
    /// `editing` names the custom role whose grants pre-fill the form.
    ///
    /// Errors: [`ServiceError::Forbidden`] for anyone but an admin; Kubernetes refusals;
    /// [`ServiceError::NoCluster`], [`ServiceError::Unavailable`].
    pub async fn roles(&self, who: &Principal, editing: Option<&str>) -> Result<RolesView> {
        let roles = Api::<ClusterRole>::all(self.admin_client(who).await?);
        let builtin = roles
            .list(&ListParams::default().labels(BUILTIN_LABEL))
            .await?;
        let custom = roles
            .list(&ListParams::default().labels(ROLE_LABEL))
            .await?;
        let builtin = self
            .role_rows(builtin.items, |r| {
                r.name_any().trim_start_matches("console-").to_owned()
            })
            .await?;
        let custom = self
            .role_rows(custom.items, |r| {
                r.labels().get(ROLE_LABEL).cloned().unwrap_or_default()
            })
            .await?;
        let editing = editing.and_then(|name| custom.iter().find(|r| r.name == name).cloned());
        Ok(RolesView {
            builtin,
            custom,
            resources: CUSTOM_ROLE_RESOURCES.map(str::to_owned).to_vec(),
            verbs: CUSTOM_ROLE_VERBS.map(str::to_owned).to_vec(),
            editing,
        })
    }

    /// The roles a person may be given on the Users pages: the built-in ones (each
    /// including those before it), then the custom roles the cluster has, by name. The
    /// custom roles are those whose groups the console may impersonate as it last saw them
    /// ([`cluster::Impersonation::impersonable_groups`]), so no request is made; without a
    /// cluster, or before that list is known, only the built-in roles.
    pub fn role_names(&self) -> Vec<String> {
        let groups = self
            .cluster
            .as_ref()
            .and_then(|cluster| cluster.impersonable_groups())
            .unwrap_or_default();
        let custom: std::collections::BTreeSet<&str> = groups
            .iter()
            .filter_map(|group| group.strip_prefix(CONSOLE_PREFIX))
            .filter(|name| BuiltinRole::parse(name).is_none() && RoleName::parse(name).is_ok())
            .collect();
        BuiltinRole::ALL
            .iter()
            .map(|role| role.as_str())
            .chain(custom)
            .map(str::to_owned)
            .collect()
    }

    /// Creates a custom role (ClusterRole and ClusterRoleBinding `console-role-<name>`,
    /// labelled with its name), or with [`SaveRole::version`] changes one. The author of a
    /// new role then holds it and so may grant it (audited `role.create`); changing an
    /// existing role is audited `role.update` and grants nothing. Returns the role's name.
    ///
    /// Errors: [`ServiceError::Invalid`] (`name`: malformed or built-in; `grants`: none,
    /// or outside what a custom role may grant); [`ServiceError::Conflict`] by the console
    /// (a new role's name is taken, or the edited role changed since its version);
    /// [`ServiceError::NotFound`] (the edited role is gone); [`ServiceError::Forbidden`]
    /// for anyone but an admin; Kubernetes refusals; [`ServiceError::NoCluster`],
    /// [`ServiceError::Unavailable`].
    pub async fn save_role(&self, who: &Principal, command: &SaveRole) -> Result<RoleName> {
        let saved = self.try_save_role(who, command).await;
        if saved.is_ok() {
            self.update_impersonable_groups().await;
        }
        let (action, outcome) = match saved {
            Ok((name, Applied::Created)) => ("role.create", Ok(name)),
            Ok((name, Applied::Updated)) => ("role.update", Ok(name)),
            Err(error) => ("role.save", Err(error)),
        };
        self.audited(who, action, command.name.trim(), outcome)
            .await
    }

    async fn try_save_role(
        &self,
        who: &Principal,
        command: &SaveRole,
    ) -> Result<(RoleName, Applied)> {
        let name = RoleName::parse(command.name.trim())
            .ok()
            .filter(|name| BuiltinRole::parse(name.as_str()).is_none())
            .ok_or_else(|| ServiceError::invalid("name", "a new name, not a built-in role's"))?;
        let mut role = custom_role(&name, &command.grants)?;
        let binding = custom_role_binding(&name);
        let client = self.admin_client(who).await?;
        let (roles, bindings) = (
            Api::<ClusterRole>::all(client.clone()),
            Api::<ClusterRoleBinding>::all(client),
        );
        let object = role.name_any();
        let conflict = |reason: &str| ServiceError::Conflict {
            by: Decider::Console,
            reason: reason.to_owned(),
        };
        let Some(version) = &command.version else {
            match roles.create(&PostParams::default(), &role).await {
                Err(kube::Error::Api(status)) if status.code == 409 => {
                    return Err(conflict("a role of this name exists"));
                }
                created => created?,
            };
            if let Err(error) = bindings.create(&PostParams::default(), &binding).await {
                // Nothing half-made: the role without its binding goes again.
                if let Err(undo) = roles.delete(&object, &DeleteParams::default()).await {
                    tracing::error!(%undo, role = %object, "cannot remove a ClusterRole whose binding failed");
                }
                return Err(error.into());
            }
            self.accounts
                .adopt_created_role(&who.actor()?, &name)
                .await?;
            return Ok((name, Applied::Created));
        };
        // The binding first: when it is refused, the rules are unchanged.
        let apply = PatchParams::apply(FIELD_MANAGER).force();
        bindings
            .patch(&object, &apply, &Patch::Apply(&binding))
            .await?;
        role.metadata.resource_version = Some(version.clone());
        match roles.replace(&object, &PostParams::default(), &role).await {
            Ok(_) => Ok((name, Applied::Updated)),
            Err(kube::Error::Api(status)) if status.code == 409 => {
                Err(conflict("the role changed since this edit began"))
            }
            Err(kube::Error::Api(status)) if status.code == 404 => {
                // Deleted meanwhile: the binding just applied must not outlive it.
                if let Err(undo) = bindings.delete(&object, &DeleteParams::default()).await {
                    tracing::error!(%undo, role = %object, "cannot remove the binding of a deleted role");
                }
                Err(ServiceError::not_found("the role was deleted meanwhile"))
            }
            Err(error) => Err(error.into()),
        }
    }

    /// Deletes a custom role's binding and ClusterRole as the admin, then takes the role
    /// from everyone who held it. Audited `role.delete` (with how many lost it).
    ///
    /// Errors: [`ServiceError::NotFound`] for a malformed name; [`ServiceError::Forbidden`]
    /// for anyone but an admin; Kubernetes refusals; [`ServiceError::NoCluster`],
    /// [`ServiceError::Unavailable`].
    pub async fn delete_role(&self, who: &Principal, name: &str) -> Result<u64> {
        let deleted = async {
            let name =
                RoleName::parse(name).map_err(|_| ServiceError::not_found("no such role"))?;
            let client = self.admin_client(who).await?;
            let object = custom_role_object(&name);
            Api::<ClusterRoleBinding>::all(client.clone())
                .delete(&object, &DeleteParams::default())
                .await?;
            Api::<ClusterRole>::all(client)
                .delete(&object, &DeleteParams::default())
                .await?;
            Ok(self
                .accounts
                .forget_deleted_role(&who.actor()?, &name)
                .await?)
        };
        let deleted = deleted.await;
        if deleted.is_ok() {
            self.update_impersonable_groups().await;
        }
        self.audited(who, "role.delete", name, deleted).await
    }

    /// Updates the groups the console may impersonate after a role changed; a failure
    /// is logged, and the controllers' next pass ([`cluster::impersonable`]) repairs it.
    async fn update_impersonable_groups(&self) {
        let Some(cluster) = &self.cluster else {
            return;
        };
        if let Err(error) = cluster.update_impersonable_groups().await {
            tracing::warn!(%error, "cannot update the groups the console impersonates; the controllers will retry");
        }
    }

    /// An impersonating client for an admin.
    async fn admin_client(&self, who: &Principal) -> Result<kube::Client> {
        if !who.holds(BuiltinRole::Admin) {
            return Err(ServiceError::forbidden("only admins manage roles"));
        }
        self.client(who).await
    }

    async fn role_rows(
        &self,
        roles: Vec<ClusterRole>,
        name_of: fn(&ClusterRole) -> String,
    ) -> Result<Vec<RoleRow>> {
        let mut rows = Vec::with_capacity(roles.len());
        for role in roles {
            let name = name_of(&role);
            let holders = self.accounts.store().user_names_with_role(&name).await?;
            rows.push(role_row(&role, name, holders));
        }
        rows.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(rows)
    }
}

/// How a save went.
enum Applied {
    Created,
    Updated,
}

/// `console-role-<name>`: the ClusterRole and ClusterRoleBinding of a custom role.
fn custom_role_object(name: &RoleName) -> String {
    format!("console-role-{name}")
}

fn labels(name: &RoleName) -> BTreeMap<String, String> {
    BTreeMap::from([(ROLE_LABEL.to_owned(), name.as_str().to_owned())])
}

/// The ClusterRole granting `grants` on `banlieue.io`.
///
/// Errors: [`ServiceError::Invalid`] (`grants`) when there are none or one is outside
/// [`CUSTOM_ROLE_RESOURCES`] × [`CUSTOM_ROLE_VERBS`].
fn custom_role(name: &RoleName, grants: &[(String, String)]) -> Result<ClusterRole> {
    let mut verbs_by_resource: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (resource, verb) in grants {
        let resource = CUSTOM_ROLE_RESOURCES
            .into_iter()
            .find(|r| r == resource)
            .filter(|_| CUSTOM_ROLE_VERBS.contains(&verb.as_str()))
            .ok_or_else(|| {
                ServiceError::invalid("grants", "not a permission a custom role may grant")
            })?;
        let verbs = verbs_by_resource.entry(resource).or_default();
        if !verbs.contains(verb) {
            verbs.push(verb.clone());
        }
    }
    if verbs_by_resource.is_empty() {
        return Err(ServiceError::invalid("grants", "at least one permission"));
    }
    Ok(ClusterRole {
        metadata: ObjectMeta {
            name: Some(custom_role_object(name)),
            labels: Some(labels(name)),
            ..ObjectMeta::default()
        },
        rules: Some(
            verbs_by_resource
                .into_iter()
                .map(|(resource, verbs)| PolicyRule {
                    api_groups: Some(vec![GROUP.into()]),
                    resources: Some(vec![resource.to_owned()]),
                    verbs,
                    ..PolicyRule::default()
                })
                .collect(),
        ),
        ..ClusterRole::default()
    })
}

/// The binding of a custom role to the group `console:<name>`.
fn custom_role_binding(name: &RoleName) -> ClusterRoleBinding {
    let object = custom_role_object(name);
    ClusterRoleBinding {
        metadata: ObjectMeta {
            name: Some(object.clone()),
            labels: Some(labels(name)),
            ..ObjectMeta::default()
        },
        role_ref: RoleRef {
            api_group: Some(RBAC_GROUP.into()),
            kind: "ClusterRole".into(),
            name: object,
        },
        subjects: Some(vec![Subject {
            api_group: Some(RBAC_GROUP.into()),
            kind: "Group".into(),
            name: format!("{CONSOLE_PREFIX}{name}"),
            ..Subject::default()
        }]),
    }
}

fn role_row(role: &ClusterRole, name: String, holders: Vec<String>) -> RoleRow {
    let rules = role.rules.clone().unwrap_or_default();
    let mut grants = Vec::new();
    let readable = rules
        .iter()
        .map(|rule| {
            let groups = rule.api_groups.clone().unwrap_or_default();
            let resources = rule.resources.clone().unwrap_or_default();
            if groups.iter().any(|g| g == GROUP) {
                for resource in &resources {
                    for verb in &rule.verbs {
                        grants.push((resource.clone(), verb.clone()));
                    }
                }
            }
            let group = groups
                .iter()
                .map(|g| if g.is_empty() { "core" } else { g.as_str() })
                .collect::<Vec<_>>()
                .join(", ");
            format!(
                "{} — {} ({group})",
                rule.verbs.join(", "),
                resources.join(", ")
            )
        })
        .collect();
    RoleRow {
        name,
        version: role.resource_version().unwrap_or_default(),
        rules: readable,
        grants,
        holders,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_outside_the_grid_is_invalid() {
        let name = RoleName::parse("viewer").unwrap();
        let refused = custom_role(&name, &[("secrets".into(), "get".into())]);
        assert!(
            matches!(refused, Err(ServiceError::Invalid { by: Decider::Console, ref field, .. }) if field == "grants")
        );
        assert!(custom_role(&name, &[]).is_err());
        let role = custom_role(
            &name,
            &[
                ("virtualmachineclaims".into(), "get".into()),
                ("virtualmachineclaims".into(), "list".into()),
            ],
        )
        .unwrap();
        assert_eq!(role.rules.unwrap()[0].verbs, ["get", "list"]);
    }
}
