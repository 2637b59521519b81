//! The resource types the emulator serves: built-ins and CRD-defined kinds, and the
//! discovery documents built from them.
//!
//! Discovery shapes follow
//! <https://kubernetes.io/docs/concepts/overview/kubernetes-api/#discovery-api> (the
//! legacy, unaggregated format: `APIVersions`, `APIGroupList`, `APIResourceList`).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::schema::CrdSchema;

/// What a resource does beyond plain storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Special {
    /// Stored objects.
    None,
    /// `authorization.k8s.io` SelfSubjectAccessReview (create-only, not stored).
    SelfSubjectAccessReview,
    /// `authorization.k8s.io` SubjectAccessReview (create-only, not stored).
    SubjectAccessReview,
    /// `authentication.k8s.io` SelfSubjectReview (`kubectl auth whoami`).
    SelfSubjectReview,
    /// `authorization.k8s.io` SelfSubjectRulesReview (`kubectl auth can-i --list`).
    SelfSubjectRulesReview,
}

/// One `additionalPrinterColumns` entry of a CRD version.
#[derive(Debug, Clone)]
pub(crate) struct PrinterColumn {
    /// Column header.
    pub(crate) name: String,
    /// OpenAPI type: `string`, `integer`, `number`, `boolean`, `date`.
    pub(crate) type_: String,
    /// Simple JSONPath, e.g. `.status.phase`.
    pub(crate) json_path: String,
    /// 0 shows in `kubectl get`; higher only with `-o wide`.
    pub(crate) priority: i64,
    /// Column description.
    pub(crate) description: String,
}

/// A resource type served at `/api/v1/…` or `/apis/<group>/<version>/…`.
#[derive(Debug, Clone)]
pub struct ResourceDef {
    /// API group, empty for core.
    pub(crate) group: String,
    /// Served version.
    pub(crate) version: String,
    /// Lower-case plural (`configmaps`).
    pub(crate) plural: String,
    /// Lower-case singular (`configmap`).
    pub(crate) singular: String,
    /// Kind (`ConfigMap`).
    pub(crate) kind: String,
    /// Whether objects live in namespaces.
    pub(crate) namespaced: bool,
    /// Short names for kubectl (`cm`).
    pub(crate) short_names: Vec<String>,
    /// Categories (`all`).
    pub(crate) categories: Vec<String>,
    /// The `status` subresource is enabled (CR semantics: spec and status written separately).
    pub(crate) status_subresource: bool,
    /// Objects carry `metadata.generation` (CRs, CRDs).
    pub(crate) has_generation: bool,
    /// Special handling.
    pub(crate) special: Special,
    /// CRD schema, for validation and pruning.
    pub(crate) schema: Option<Arc<CrdSchema>>,
    /// CRD printer columns.
    pub(crate) printer_columns: Vec<PrinterColumn>,
    /// True for CRD-defined kinds.
    pub(crate) custom: bool,
    /// Extra field-selector paths (CRD `selectableFields`, dotted without the leading dot).
    pub(crate) selectable_fields: Vec<String>,
}

impl ResourceDef {
    fn builtin(group: &str, version: &str, plural: &str, kind: &str, namespaced: bool) -> Self {
        Self {
            group: group.into(),
            version: version.into(),
            plural: plural.into(),
            singular: kind.to_lowercase(),
            kind: kind.into(),
            namespaced,
            short_names: Vec::new(),
            categories: Vec::new(),
            status_subresource: false,
            has_generation: false,
            special: Special::None,
            schema: None,
            printer_columns: Vec::new(),
            custom: false,
            selectable_fields: Vec::new(),
        }
    }

    fn short(mut self, names: &[&str]) -> Self {
        self.short_names = names.iter().map(|s| s.to_string()).collect();
        self
    }

    fn special(mut self, special: Special) -> Self {
        self.special = special;
        self
    }

    fn with_status(mut self) -> Self {
        self.status_subresource = true;
        self
    }

    fn with_generation(mut self) -> Self {
        self.has_generation = true;
        self
    }

    /// Whether `field` may be used in a field selector on this type (as the real server
    /// allows per kind).
    pub(crate) fn field_selectable(&self, field: &str) -> bool {
        if matches!(field, "metadata.name" | "metadata.namespace") {
            return true;
        }
        if self.custom {
            return self.selectable_fields.iter().any(|f| f == field);
        }
        match (self.group.as_str(), self.plural.as_str()) {
            ("", "secrets") => field == "type",
            ("", "namespaces") => field == "status.phase",
            ("", "events") => {
                field.starts_with("involvedObject.")
                    || matches!(field, "reason" | "reportingComponent" | "source" | "type")
            }
            ("events.k8s.io", "events") => {
                field.starts_with("regarding.")
                    || matches!(field, "reason" | "reportingController" | "type")
            }
            _ => false,
        }
    }

    /// `v1` or `<group>/<version>`.
    pub(crate) fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The verbs listed in discovery.
    pub(crate) fn verbs(&self) -> Vec<&'static str> {
        match self.special {
            Special::None => vec![
                "create",
                "delete",
                "deletecollection",
                "get",
                "list",
                "patch",
                "update",
                "watch",
            ],
            _ => vec!["create"],
        }
    }

    /// The URL path of the collection (`/api/v1/namespaces/ns/configmaps`).
    pub(crate) fn collection_path(&self, namespace: Option<&str>) -> String {
        let prefix = if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        };
        match namespace {
            Some(ns) if self.namespaced => format!("{prefix}/namespaces/{ns}/{}", self.plural),
            _ => format!("{prefix}/{}", self.plural),
        }
    }
}

/// The built-in resource types (those of issue 5, plus what kubectl and kube-rs commonly touch).
pub(crate) fn builtins() -> Vec<ResourceDef> {
    use ResourceDef as R;
    vec![
        R::builtin("", "v1", "namespaces", "Namespace", false)
            .short(&["ns"])
            .with_status(),
        R::builtin("", "v1", "configmaps", "ConfigMap", true).short(&["cm"]),
        R::builtin("", "v1", "secrets", "Secret", true),
        R::builtin("", "v1", "serviceaccounts", "ServiceAccount", true).short(&["sa"]),
        R::builtin("", "v1", "events", "Event", true).short(&["ev"]),
        R::builtin("events.k8s.io", "v1", "events", "Event", true).short(&["ev"]),
        R::builtin("rbac.authorization.k8s.io", "v1", "roles", "Role", true),
        R::builtin(
            "rbac.authorization.k8s.io",
            "v1",
            "rolebindings",
            "RoleBinding",
            true,
        ),
        R::builtin(
            "rbac.authorization.k8s.io",
            "v1",
            "clusterroles",
            "ClusterRole",
            false,
        ),
        R::builtin(
            "rbac.authorization.k8s.io",
            "v1",
            "clusterrolebindings",
            "ClusterRoleBinding",
            false,
        ),
        R::builtin("coordination.k8s.io", "v1", "leases", "Lease", true),
        R::builtin(
            "apiextensions.k8s.io",
            "v1",
            "customresourcedefinitions",
            "CustomResourceDefinition",
            false,
        )
        .short(&["crd", "crds"])
        .with_status()
        .with_generation(),
        R::builtin(
            "authorization.k8s.io",
            "v1",
            "selfsubjectaccessreviews",
            "SelfSubjectAccessReview",
            false,
        )
        .special(Special::SelfSubjectAccessReview),
        R::builtin(
            "authorization.k8s.io",
            "v1",
            "subjectaccessreviews",
            "SubjectAccessReview",
            false,
        )
        .special(Special::SubjectAccessReview),
        R::builtin(
            "authorization.k8s.io",
            "v1",
            "selfsubjectrulesreviews",
            "SelfSubjectRulesReview",
            false,
        )
        .special(Special::SelfSubjectRulesReview),
        R::builtin(
            "authentication.k8s.io",
            "v1",
            "selfsubjectreviews",
            "SelfSubjectReview",
            false,
        )
        .special(Special::SelfSubjectReview),
        R::builtin(
            "admissionregistration.k8s.io",
            "v1",
            "validatingadmissionpolicies",
            "ValidatingAdmissionPolicy",
            false,
        )
        .with_status()
        .with_generation(),
        R::builtin(
            "admissionregistration.k8s.io",
            "v1",
            "validatingadmissionpolicybindings",
            "ValidatingAdmissionPolicyBinding",
            false,
        )
        .with_generation(),
    ]
}

/// Resource types derived from one CRD object (one per served version).
///
/// Errors: a human-readable reason when the CRD is malformed or its schema does not compile.
pub(crate) fn from_crd(crd: &Value) -> Result<Vec<ResourceDef>, String> {
    let spec = crd.get("spec").ok_or("spec: Required value")?;
    let group = spec
        .get("group")
        .and_then(Value::as_str)
        .ok_or("spec.group: Required value")?;
    let names = spec.get("names").ok_or("spec.names: Required value")?;
    let plural = names
        .get("plural")
        .and_then(Value::as_str)
        .ok_or("spec.names.plural: Required value")?;
    let kind = names
        .get("kind")
        .and_then(Value::as_str)
        .ok_or("spec.names.kind: Required value")?;
    let singular = names
        .get("singular")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| kind.to_lowercase());
    let strings = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let short_names = strings(names.get("shortNames"));
    let categories = strings(names.get("categories"));
    let namespaced = spec.get("scope").and_then(Value::as_str) != Some("Cluster");
    let versions = spec
        .get("versions")
        .and_then(Value::as_array)
        .ok_or("spec.versions: Required value")?;
    let mut out = Vec::new();
    for v in versions {
        if v.get("served").and_then(Value::as_bool) == Some(false) {
            continue;
        }
        let version = v
            .get("name")
            .and_then(Value::as_str)
            .ok_or("spec.versions[].name: Required value")?;
        let status_subresource = v
            .pointer("/subresources/status")
            .is_some_and(|s| !s.is_null());
        let schema = match v.pointer("/schema/openAPIV3Schema") {
            Some(s) => {
                Some(Arc::new(CrdSchema::compile(s).map_err(|e| {
                    format!("spec.versions[{version}].schema: {e}")
                })?))
            }
            None => None,
        };
        let printer_columns = v
            .get("additionalPrinterColumns")
            .and_then(Value::as_array)
            .map(|cols| {
                cols.iter()
                    .map(|c| PrinterColumn {
                        name: c["name"].as_str().unwrap_or_default().to_string(),
                        type_: c["type"].as_str().unwrap_or("string").to_string(),
                        json_path: c["jsonPath"].as_str().unwrap_or_default().to_string(),
                        priority: c["priority"].as_i64().unwrap_or(0),
                        description: c["description"].as_str().unwrap_or_default().to_string(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        out.push(ResourceDef {
            group: group.to_string(),
            version: version.to_string(),
            plural: plural.to_string(),
            singular: singular.clone(),
            kind: kind.to_string(),
            namespaced,
            short_names: short_names.clone(),
            categories: categories.clone(),
            status_subresource,
            has_generation: true,
            special: Special::None,
            schema,
            printer_columns,
            custom: true,
            selectable_fields: v
                .get("selectableFields")
                .and_then(Value::as_array)
                .map(|fs| {
                    fs.iter()
                        .filter_map(|f| f["jsonPath"].as_str())
                        .map(|p| p.trim_start_matches('.').to_string())
                        .collect()
                })
                .unwrap_or_default(),
        });
    }
    Ok(out)
}

/// The set of served resource types, keyed by (group, version, plural).
#[derive(Debug, Clone, Default)]
pub struct Registry {
    defs: BTreeMap<(String, String, String), Arc<ResourceDef>>,
    /// Preferred (first-listed) version per group, in registration order.
    group_order: Vec<(String, Vec<String>)>,
}

impl Registry {
    /// A registry with the built-in types.
    pub(crate) fn with_builtins() -> Self {
        let mut r = Self::default();
        for d in builtins() {
            r.insert(d);
        }
        r
    }

    /// Adds or replaces a type.
    pub(crate) fn insert(&mut self, def: ResourceDef) {
        match self.group_order.iter_mut().find(|(g, _)| *g == def.group) {
            Some((_, versions)) => {
                if !versions.contains(&def.version) {
                    versions.push(def.version.clone());
                }
            }
            None => self
                .group_order
                .push((def.group.clone(), vec![def.version.clone()])),
        }
        self.defs.insert(
            (def.group.clone(), def.version.clone(), def.plural.clone()),
            Arc::new(def),
        );
    }

    /// Removes every version of `<plural>.<group>` (a deleted CRD).
    pub(crate) fn remove_custom(&mut self, group: &str, plural: &str) {
        self.defs
            .retain(|(g, _, p), d| !(g == group && p == plural && d.custom));
        let remaining: Vec<(String, String)> = self
            .defs
            .keys()
            .map(|(g, v, _)| (g.clone(), v.clone()))
            .collect();
        for (g, versions) in &mut self.group_order {
            versions.retain(|v| remaining.iter().any(|(rg, rv)| rg == g && rv == v));
        }
        self.group_order.retain(|(_, v)| !v.is_empty());
    }

    /// Looks a type up by URL parts.
    pub fn get(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceDef>> {
        self.defs
            .get(&(group.to_string(), version.to_string(), plural.to_string()))
            .cloned()
    }

    /// Looks a type up by `apiVersion` and `kind`.
    pub(crate) fn by_kind(&self, api_version: &str, kind: &str) -> Option<Arc<ResourceDef>> {
        let (group, version) = split_api_version(api_version);
        self.defs
            .values()
            .find(|d| d.group == group && d.version == version && d.kind == kind)
            .cloned()
    }

    /// Every served version of a group/plural (a CRD may serve several).
    pub(crate) fn versions_of(&self, group: &str, plural: &str) -> Vec<Arc<ResourceDef>> {
        self.defs
            .values()
            .filter(|d| d.group == group && d.plural == plural)
            .cloned()
            .collect()
    }

    /// Whether a group/version is served.
    pub(crate) fn has_group_version(&self, group: &str, version: &str) -> bool {
        self.defs.keys().any(|(g, v, _)| g == group && v == version)
    }

    /// `GET /api`.
    pub(crate) fn api_versions(&self, server_address: &str) -> Value {
        json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
        })
    }

    fn group_json(group: &str, versions: &[String]) -> Value {
        let vs: Vec<Value> = versions
            .iter()
            .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
            .collect();
        json!({
            "name": group,
            "versions": vs,
            "preferredVersion": vs.first().cloned().unwrap_or(Value::Null),
        })
    }

    /// `GET /apis` (`APIGroupList`).
    pub(crate) fn api_group_list(&self) -> Value {
        let groups: Vec<Value> = self
            .group_order
            .iter()
            .filter(|(g, _)| !g.is_empty())
            .map(|(g, versions)| Self::group_json(g, versions))
            .collect();
        json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
    }

    /// `GET /apis/<group>` (`APIGroup`).
    pub(crate) fn api_group(&self, group: &str) -> Option<Value> {
        self.group_order
            .iter()
            .find(|(g, _)| g == group && !g.is_empty())
            .map(|(g, versions)| {
                let mut v = Self::group_json(g, versions);
                v["kind"] = json!("APIGroup");
                v["apiVersion"] = json!("v1");
                v
            })
    }

    /// `GET /api/v1` or `/apis/<group>/<version>` (`APIResourceList`), or `None` if not served.
    pub(crate) fn api_resource_list(&self, group: &str, version: &str) -> Option<Value> {
        if !self.has_group_version(group, version) {
            return None;
        }
        let mut resources = Vec::new();
        for d in self
            .defs
            .values()
            .filter(|d| d.group == group && d.version == version)
        {
            let mut r = json!({
                "name": d.plural,
                "singularName": d.singular,
                "namespaced": d.namespaced,
                "kind": d.kind,
                "verbs": d.verbs(),
            });
            if !d.short_names.is_empty() {
                r["shortNames"] = json!(d.short_names);
            }
            if !d.categories.is_empty() {
                r["categories"] = json!(d.categories);
            }
            resources.push(r);
            if d.status_subresource {
                resources.push(json!({
                    "name": format!("{}/status", d.plural),
                    "singularName": "",
                    "namespaced": d.namespaced,
                    "kind": d.kind,
                    "verbs": ["get", "patch", "update"],
                }));
            }
        }
        let gv = if group.is_empty() {
            version.to_string()
        } else {
            format!("{group}/{version}")
        };
        Some(json!({
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": gv,
            "resources": resources,
        }))
    }

    /// `GET /openapi/v3`: the index of group-version documents.
    pub(crate) fn openapi_v3_index(&self) -> Value {
        let mut paths = serde_json::Map::new();
        let mut gvs: Vec<(String, String)> = self
            .defs
            .keys()
            .map(|(g, v, _)| (g.clone(), v.clone()))
            .collect();
        gvs.dedup();
        for (g, v) in gvs {
            let key = if g.is_empty() {
                format!("api/{v}")
            } else {
                format!("apis/{g}/{v}")
            };
            paths.insert(
                key.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{key}?hash={}", self.defs.len())}),
            );
        }
        json!({"paths": paths})
    }

    /// `GET /openapi/v3/<api|apis/group>/<version>`: a minimal OpenAPI 3 document that
    /// declares, for every kind, a PATCH operation accepting `fieldValidation` (so kubectl
    /// leaves field validation to the server) and the CRD schemas.
    pub(crate) fn openapi_v3_doc(&self, group: &str, version: &str) -> Option<Value> {
        if !self.has_group_version(group, version) {
            return None;
        }
        let mut paths = serde_json::Map::new();
        let mut schemas = serde_json::Map::new();
        for d in self
            .defs
            .values()
            .filter(|d| d.group == group && d.version == version)
        {
            let gvk = json!({"group": d.group, "version": d.version, "kind": d.kind});
            let item_path = format!(
                "{}/{{name}}",
                d.collection_path(if d.namespaced {
                    Some("{namespace}")
                } else {
                    None
                })
            );
            let params = json!([
                {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}}
            ]);
            paths.insert(
                item_path,
                json!({
                    "patch": {
                        "x-kubernetes-group-version-kind": gvk,
                        "x-kubernetes-action": "patch",
                        "parameters": params,
                        "responses": {"200": {"description": "OK"}}
                    }
                }),
            );
            let schema_name = format!(
                "{}.{}.{}",
                if d.group.is_empty() {
                    "io.k8s.api.core"
                } else {
                    &d.group
                },
                d.version,
                d.kind
            );
            let mut schema = d.schema.as_ref().map(|s| s.raw.clone()).unwrap_or_else(
                || json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
            );
            schema["x-kubernetes-group-version-kind"] = json!([gvk]);
            schemas.insert(schema_name, schema);
        }
        Some(json!({
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": "v1.32.0"},
            "paths": paths,
            "components": {"schemas": schemas},
        }))
    }
}

/// Splits `group/version` (or `v1`) into `(group, version)`.
pub(crate) fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    }
}
