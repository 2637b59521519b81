//! Reading a request: its path (as the API server's `RequestInfo` resolver does), query
//! parameters, body (JSON, YAML or protobuf), field manager, selectors and `Accept`
//! header.

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::http::HeaderMap;
use serde_json::Value;

use crate::resources::ResourceDef;
use crate::selector::{FieldSelector, LabelSelector};
use crate::status::{ApiError, ApiResult};
use crate::table::IncludeObject;

/// A parsed request path.
#[derive(Debug, Default, Clone)]
pub(crate) struct ReqInfo {
    /// Under `/api/<v>/…` or `/apis/<g>/<v>/…` with a resource (else discovery, `/version`,
    /// OpenAPI, …).
    pub(crate) resource_request: bool,
    /// API group, empty for core.
    pub(crate) group: String,
    /// API version.
    pub(crate) version: String,
    /// Namespace, empty for cluster-scoped or all-namespace requests.
    pub(crate) namespace: String,
    /// Resource plural.
    pub(crate) resource: String,
    /// Object name, empty for collections.
    pub(crate) name: String,
    /// Subresource (`status`), or empty.
    pub(crate) subresource: String,
}

/// Splits a request path into group, version, namespace, resource, name and subresource,
/// as the API server's `RequestInfoFactory` does.
pub(crate) fn parse_path(path: &str) -> ReqInfo {
    let parts: Vec<String> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .map(|s| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8_lossy()
                .to_string()
        })
        .collect();
    let mut info = ReqInfo::default();
    let rest: &[String] = match parts.first().map(String::as_str) {
        Some("api") if parts.len() >= 2 => {
            info.version = parts[1].clone();
            &parts[2..]
        }
        Some("apis") if parts.len() >= 3 => {
            info.group = parts[1].clone();
            info.version = parts[2].clone();
            &parts[3..]
        }
        _ => return info,
    };
    if rest.is_empty() {
        return info;
    }
    info.resource_request = true;
    let mut rest = rest.to_vec();
    if rest[0] == "namespaces" && rest.len() > 1 {
        info.namespace = rest[1].clone();
        if rest.len() > 2 && rest[2] != "status" && rest[2] != "finalize" {
            rest = rest[2..].to_vec();
        }
    }
    info.resource = rest[0].clone();
    if let Some(n) = rest.get(1) {
        info.name = n.clone();
    }
    if let Some(s) = rest.get(2) {
        info.subresource = s.clone();
    }
    if info.resource == "namespaces" && info.group.is_empty() {
        info.namespace.clear();
    }
    info
}

/// Query parameters (the last value of a repeated one).
pub(crate) type Query = BTreeMap<String, String>;

/// The query parameters of a URI.
pub(crate) fn query_of(uri: &http::Uri) -> Query {
    uri.query()
        .map(|q| {
            url::form_urlencoded::parse(q.as_bytes())
                .into_owned()
                .collect()
        })
        .unwrap_or_default()
}

/// A boolean query parameter (`true` or `1`).
pub(crate) fn truthy(q: &Query, key: &str) -> bool {
    matches!(q.get(key).map(String::as_str), Some("true" | "1"))
}

/// Whether the `Accept` header asks for a `Table` (`kubectl get`).
pub(crate) fn wants_table(headers: &HeaderMap) -> bool {
    headers
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("as=Table"))
}

/// The `includeObject` parameter of a `Table` request (default `Metadata`).
pub(crate) fn include_object(q: &Query) -> IncludeObject {
    match q.get("includeObject").map(String::as_str) {
        Some("None") => IncludeObject::None,
        Some("Object") => IncludeObject::Object,
        _ => IncludeObject::Metadata,
    }
}

/// Decodes a request body by its `Content-Type`: protobuf, JSON, or YAML; `null` when
/// empty.
pub(crate) fn parse_body(headers: &HeaderMap, body: &Bytes) -> ApiResult<Value> {
    if body.is_empty() {
        return Ok(Value::Null);
    }
    let ct = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .to_string();
    if ct.contains("protobuf") {
        return crate::protobuf::decode(body).map_err(|e| {
            tracing::info!(error = %e, "protobuf body refused");
            ApiError::unsupported_media_type(&ct)
        });
    }
    match serde_json::from_slice(body) {
        Ok(v) => Ok(v),
        Err(json_err) => {
            if ct.contains("yaml") {
                serde_yaml::from_slice::<Value>(body)
                    .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))
            } else {
                Err(ApiError::bad_request(format!(
                    "error decoding JSON: {json_err}"
                )))
            }
        }
    }
}

/// The `fieldManager` parameter, else the `User-Agent` up to its first `/` (at most 128
/// characters), as the real server names the manager of a write
/// (`k8s.io/apiserver/pkg/endpoints/handlers/rest.go`, `prefixFromUserAgent`).
pub(crate) fn field_manager(q: &Query, headers: &HeaderMap) -> String {
    if let Some(m) = q.get("fieldManager") {
        return m.clone();
    }
    headers
        .get(http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .and_then(|ua| ua.split('/').next())
        .map(|m| m.chars().take(128).collect())
        .unwrap_or_default()
}

/// The `labelSelector` and `fieldSelector` parameters; a field the type cannot select on
/// is refused as the real server refuses it.
pub(crate) fn selectors(def: &ResourceDef, q: &Query) -> ApiResult<(LabelSelector, FieldSelector)> {
    let labels = match q.get("labelSelector") {
        Some(s) => LabelSelector::parse(s).map_err(ApiError::bad_request)?,
        None => LabelSelector::default(),
    };
    let fields = match q.get("fieldSelector") {
        Some(s) => FieldSelector::parse(s).map_err(ApiError::bad_request)?,
        None => FieldSelector::default(),
    };
    for (field, _, _) in &fields.0 {
        if !def.field_selectable(field) {
            return Err(ApiError::bad_request(if def.custom {
                format!(
                    "\"{field}\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
                )
            } else {
                format!("field label not supported: {field}")
            }));
        }
    }
    Ok((labels, fields))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_info_table() {
        let cases = [
            ("/api/v1/namespaces", ("", "", "namespaces", "", "")),
            ("/api/v1/namespaces/foo", ("", "", "namespaces", "foo", "")),
            (
                "/api/v1/namespaces/foo/status",
                ("", "", "namespaces", "foo", "status"),
            ),
            (
                "/api/v1/namespaces/ns/configmaps",
                ("", "ns", "configmaps", "", ""),
            ),
            (
                "/api/v1/namespaces/ns/configmaps/a",
                ("", "ns", "configmaps", "a", ""),
            ),
            (
                "/apis/banlieue.io/v1alpha1/namespaces/ns/virtualmachineclaims/c/status",
                ("banlieue.io", "ns", "virtualmachineclaims", "c", "status"),
            ),
            (
                "/apis/rbac.authorization.k8s.io/v1/clusterroles/x",
                ("rbac.authorization.k8s.io", "", "clusterroles", "x", ""),
            ),
        ];
        for (path, (g, ns, r, n, s)) in cases {
            let i = parse_path(path);
            assert!(i.resource_request, "{path}");
            assert_eq!(
                (
                    i.group.as_str(),
                    i.namespace.as_str(),
                    i.resource.as_str(),
                    i.name.as_str(),
                    i.subresource.as_str()
                ),
                (g, ns, r, n, s),
                "{path}"
            );
        }
        assert!(!parse_path("/apis/banlieue.io/v1alpha1").resource_request);
        assert!(!parse_path("/version").resource_request);
    }
}
