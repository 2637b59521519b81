//! The HTTP front: request parsing (as the API server's `RequestInfo` resolver does),
//! authentication, impersonation, RBAC, and dispatch to the store.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Poll;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::api::{self, Ctx, FieldValidation, PatchType};
use crate::auth::{Authenticator, UserInfo};
use crate::feed::{Recv, Subscriber};
use crate::rbac::{self, Attributes};
use crate::resources::{ResourceDef, Special};
use crate::selector::{FieldSelector, LabelSelector};
use crate::status::{ApiError, ApiResult, json_response};
use crate::store::{Change, Store};
use crate::table::{IncludeObject, table};

/// Shared server state.
pub struct AppState {
    /// The object store; every API operation holds this lock for its whole duration.
    pub store: Mutex<Store>,
    /// Authenticators.
    pub auth: Authenticator,
    /// Wakes the garbage collector.
    pub gc: Notify,
    /// Interval between watch bookmarks.
    pub bookmark_interval: Duration,
    /// `host:port` the server listens on.
    pub address: String,
}

impl AppState {
    /// Locks the store (a poisoned lock is recovered: the store stays consistent per operation).
    pub fn lock(&self) -> MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A parsed request path.
#[derive(Debug, Default, Clone)]
struct ReqInfo {
    resource_request: bool,
    group: String,
    version: String,
    namespace: String,
    resource: String,
    name: String,
    subresource: String,
}

fn parse_path(path: &str) -> ReqInfo {
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

type Query = BTreeMap<String, String>;

fn query_of(uri: &http::Uri) -> Query {
    uri.query()
        .map(|q| {
            url::form_urlencoded::parse(q.as_bytes())
                .into_owned()
                .collect()
        })
        .unwrap_or_default()
}

fn truthy(q: &Query, key: &str) -> bool {
    matches!(q.get(key).map(String::as_str), Some("true" | "1"))
}

fn wants_table(headers: &HeaderMap) -> bool {
    headers
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("as=Table"))
}

fn include_object(q: &Query) -> IncludeObject {
    match q.get("includeObject").map(String::as_str) {
        Some("None") => IncludeObject::None,
        Some("Object") => IncludeObject::Object,
        _ => IncludeObject::Metadata,
    }
}

fn parse_body(headers: &HeaderMap, body: &Bytes) -> ApiResult<Value> {
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
fn field_manager(q: &Query, headers: &HeaderMap) -> String {
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

fn with_warnings(mut resp: Response, warnings: &[String]) -> Response {
    for w in warnings {
        if let Ok(v) = http::HeaderValue::from_str(&format!("299 - \"{}\"", w.replace('"', "'"))) {
            resp.headers_mut().append("Warning", v);
        }
    }
    resp
}

/// Applies `Impersonate-*` headers after checking the `impersonate` verb for each.
fn impersonate(store: &Store, user: UserInfo, headers: &HeaderMap) -> ApiResult<UserInfo> {
    let as_user = headers
        .get("Impersonate-User")
        .and_then(|v| v.to_str().ok());
    let groups: Vec<String> = headers
        .get_all("Impersonate-Group")
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_string))
        .collect();
    let uid = headers.get("Impersonate-Uid").and_then(|v| v.to_str().ok());
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, value) in headers {
        if let Some(key) = name.as_str().strip_prefix("impersonate-extra-") {
            let key = percent_encoding::percent_decode_str(key)
                .decode_utf8_lossy()
                .to_string();
            if let Ok(v) = value.to_str() {
                extra.entry(key).or_default().push(v.to_string());
            }
        }
    }
    let Some(as_user) = as_user else {
        if !groups.is_empty() || !extra.is_empty() || uid.is_some() {
            return Err(ApiError::internal(
                "requested impersonation of groups, uid or extra without a user",
            ));
        }
        return Ok(user);
    };
    let check = |resource: &str, group: &str, name: &str, sub: &str| -> ApiResult<()> {
        let a = Attributes {
            verb: "impersonate".into(),
            group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            name: name.into(),
            resource_request: true,
            ..Attributes::default()
        };
        if rbac::authorize(store, &user, &a).allowed {
            Ok(())
        } else {
            Err(ApiError::forbidden(rbac::forbidden_message(&user, &a)))
        }
    };
    if let Some(sa) = as_user.strip_prefix("system:serviceaccount:") {
        let (ns, name) = sa.split_once(':').unwrap_or(("", sa));
        let a = Attributes {
            verb: "impersonate".into(),
            resource: "serviceaccounts".into(),
            namespace: ns.into(),
            name: name.into(),
            resource_request: true,
            ..Attributes::default()
        };
        if !rbac::authorize(store, &user, &a).allowed {
            return Err(ApiError::forbidden(rbac::forbidden_message(&user, &a)));
        }
    } else {
        check("users", "", as_user, "")?;
    }
    for g in &groups {
        check("groups", "", g, "")?;
    }
    if let Some(uid) = uid {
        check("uids", "authentication.k8s.io", uid, "")?;
    }
    for (k, vs) in &extra {
        for v in vs {
            check("userextras", "authentication.k8s.io", v, k)?;
        }
    }
    let mut out = UserInfo {
        username: as_user.to_string(),
        uid: uid.unwrap_or_default().to_string(),
        groups,
        extra,
    };
    if as_user.starts_with("system:serviceaccount:") {
        let ns = as_user.split(':').nth(2).unwrap_or_default();
        out.groups.push("system:serviceaccounts".into());
        out.groups.push(format!("system:serviceaccounts:{ns}"));
    }
    if as_user != "system:anonymous" {
        out.add_authenticated();
    }
    Ok(out)
}

/// The single entry point: every request goes through here.
pub async fn handle(State(app): State<Arc<AppState>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let body = match axum::body::to_bytes(body, 64 * 1024 * 1024).await {
        Ok(b) => b,
        Err(e) => return ApiError::bad_request(e.to_string()).into_response(),
    };
    let token = parts
        .headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
        .map(str::to_string);
    let path = parts.uri.path().to_string();
    if matches!(path.as_str(), "/healthz" | "/livez" | "/readyz") {
        return (StatusCode::OK, "ok").into_response();
    }
    let Some(token) = token else {
        return ApiError::unauthorized().into_response();
    };
    let Some(user) = app.auth.authenticate(&token).await else {
        return ApiError::unauthorized().into_response();
    };
    match dispatch(&app, user, &parts.method, &parts.uri, &parts.headers, body).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

async fn dispatch(
    app: &Arc<AppState>,
    user: UserInfo,
    method: &Method,
    uri: &http::Uri,
    headers: &HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    let path = uri.path();
    let q = query_of(uri);
    let info = parse_path(path);
    let user = {
        let store = app.lock();
        impersonate(&store, user, headers)?
    };
    if !info.resource_request {
        return non_resource(app, &user, method, path);
    }
    let is_watch = truthy(&q, "watch");
    let verb = match *method {
        Method::GET if info.name.is_empty() && is_watch => "watch",
        Method::GET if info.name.is_empty() => "list",
        Method::GET | Method::HEAD => "get",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if info.name.is_empty() => "deletecollection",
        Method::DELETE => "delete",
        _ => return Err(ApiError::method_not_allowed("method not allowed")),
    };
    let attrs = Attributes {
        verb: verb.into(),
        namespace: info.namespace.clone(),
        group: info.group.clone(),
        resource: info.resource.clone(),
        subresource: info.subresource.clone(),
        name: info.name.clone(),
        resource_request: true,
        path: path.into(),
    };
    let def = {
        let store = app.lock();
        if !rbac::authorize(&store, &user, &attrs).allowed {
            return Err(ApiError::forbidden(rbac::forbidden_message(&user, &attrs)));
        }
        store
            .registry
            .get(&info.group, &info.version, &info.resource)
            .ok_or_else(ApiError::no_route)?
    };
    let subresource_ok =
        info.subresource.is_empty() || (info.subresource == "status" && def.status_subresource);
    if !subresource_ok {
        return Err(ApiError::no_route());
    }
    if def.special != Special::None {
        if verb != "create" {
            return Err(ApiError::method_not_allowed(
                "the server does not allow this method on the requested resource".to_string(),
            ));
        }
        let body = parse_body(headers, &body)?;
        return review(app, &def, &user, body);
    }
    if def.namespaced && info.namespace.is_empty() && !matches!(verb, "list" | "watch") {
        return Err(ApiError::no_route());
    }
    let ns = if def.namespaced {
        info.namespace.clone()
    } else {
        String::new()
    };
    let dry_run = q.get("dryRun").is_some_and(|d| d == "All");
    let field_validation = match q.get("fieldValidation").map(String::as_str) {
        Some("Strict") => FieldValidation::Strict,
        Some("Ignore") => FieldValidation::Ignore,
        _ => FieldValidation::Warn,
    };
    let mut ctx = Ctx {
        user: &user,
        dry_run,
        field_validation,
        warnings: Vec::new(),
        field_manager: field_manager(&q, headers),
        force: truthy(&q, "force"),
    };
    let as_table = wants_table(headers);
    match verb {
        "get" => {
            let store = app.lock();
            let obj = store
                .get(&def.group, &def.plural, &ns, &info.name)
                .cloned()
                .ok_or_else(|| ApiError::not_found(&def.group, &def.plural, &info.name))?;
            let obj = api::as_version(&def, obj);
            if as_table && info.subresource.is_empty() {
                let rv = obj
                    .pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                return Ok(json_response(
                    StatusCode::OK,
                    &table(&def, &[obj], &rv, include_object(&q), true),
                ));
            }
            Ok(json_response(StatusCode::OK, &obj))
        }
        "list" => list(app, &def, &ns, &q, as_table),
        "watch" => watch(app, def, ns, &q, as_table),
        "create" => {
            let body = parse_body(headers, &body)?;
            let obj = {
                let mut store = app.lock();
                api::create(&mut store, &def, &ns, body, &mut ctx)?
            };
            let code = if dry_run {
                StatusCode::OK
            } else {
                StatusCode::CREATED
            };
            Ok(with_warnings(json_response(code, &obj), &ctx.warnings))
        }
        "update" => {
            let body = parse_body(headers, &body)?;
            let obj = {
                let mut store = app.lock();
                let removals = store.removals();
                let o = api::update(
                    &mut store,
                    &def,
                    &ns,
                    &info.name,
                    &info.subresource,
                    body,
                    &mut ctx,
                )?;
                if store.removals() != removals {
                    app.gc.notify_one();
                }
                o
            };
            Ok(with_warnings(
                json_response(StatusCode::OK, &obj),
                &ctx.warnings,
            ))
        }
        "patch" => {
            let ct = headers
                .get(http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            let kind = if ct.starts_with("application/json-patch+json") {
                PatchType::Json
            } else if ct.starts_with("application/merge-patch+json") {
                PatchType::Merge
            } else if ct.starts_with("application/strategic-merge-patch+json") {
                if def.custom {
                    return Err(ApiError::unsupported_media_type(ct));
                }
                PatchType::Strategic
            } else if ct.starts_with("application/apply-patch+yaml")
                || ct.starts_with("application/apply-patch+cbor")
            {
                if !q.contains_key("fieldManager") {
                    return Err(ApiError::bad_request(
                        "PATCH, application/apply-patch+yaml requires a non-empty fieldManager",
                    ));
                }
                PatchType::Apply
            } else {
                return Err(ApiError::unsupported_media_type(ct));
            };
            let body = parse_body(headers, &body)?;
            let (obj, created) = {
                let mut store = app.lock();
                let existed = store
                    .get(&def.group, &def.plural, &ns, &info.name)
                    .is_some();
                let removals = store.removals();
                let o = api::patch(
                    &mut store,
                    &def,
                    &ns,
                    &info.name,
                    &info.subresource,
                    kind,
                    body,
                    &mut ctx,
                )?;
                if store.removals() != removals {
                    app.gc.notify_one();
                }
                (o, !existed)
            };
            let code = if created && !dry_run {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            Ok(with_warnings(json_response(code, &obj), &ctx.warnings))
        }
        "delete" => {
            let mut opts = parse_body(headers, &body)?;
            if !opts.is_object() {
                opts = json!({});
            }
            if let Some(p) = q.get("propagationPolicy") {
                opts["propagationPolicy"] = json!(p);
            }
            if opts
                .get("dryRun")
                .and_then(Value::as_array)
                .is_some_and(|d| d.iter().any(|x| x == "All"))
            {
                ctx.dry_run = true;
            }
            let (obj, removed) = {
                let mut store = app.lock();
                let o = api::delete(&mut store, &def, &ns, &info.name, &opts, &mut ctx)?;
                let still_there = store
                    .get(&def.group, &def.plural, &ns, &info.name)
                    .is_some();
                (o, !still_there && !ctx.dry_run)
            };
            app.gc.notify_one();
            // The real server answers 200 whether the object is gone or only marked. Built-in
            // stores (ReturnDeletedObject=false) answer a removal with a Success Status;
            // custom resources and CRDs return the object.
            let returns_object = def.custom || def.plural == "customresourcedefinitions";
            if removed && !returns_object {
                let status = json!({
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Success",
                    "details": {
                        "name": info.name,
                        "group": def.group,
                        "kind": def.plural,
                        "uid": obj.pointer("/metadata/uid").cloned().unwrap_or(Value::Null),
                    }
                });
                return Ok(json_response(StatusCode::OK, &status));
            }
            Ok(json_response(StatusCode::OK, &obj))
        }
        "deletecollection" => {
            let mut opts = parse_body(headers, &body)?;
            if !opts.is_object() {
                opts = json!({});
            }
            if let Some(p) = q.get("propagationPolicy") {
                opts["propagationPolicy"] = json!(p);
            }
            let (labels, fields) = selectors(&def, &q)?;
            let mut store = app.lock();
            let names: Vec<(String, String)> = store
                .list_all(&def.group, &def.plural)
                .filter(|o| {
                    ns.is_empty()
                        || o.pointer("/metadata/namespace").and_then(Value::as_str)
                            == Some(ns.as_str())
                })
                .filter(|o| labels.matches(o) && fields.matches(o))
                .map(|o| {
                    (
                        o.pointer("/metadata/namespace")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string(),
                        o.pointer("/metadata/name")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string(),
                    )
                })
                .collect();
            let mut items = Vec::new();
            for (ons, n) in names {
                items.push(api::delete(&mut store, &def, &ons, &n, &opts, &mut ctx)?);
            }
            drop(store);
            app.gc.notify_one();
            Ok(json_response(
                StatusCode::OK,
                &json!({"kind": format!("{}List", def.kind), "apiVersion": def.api_version(), "metadata": {}, "items": items}),
            ))
        }
        _ => Err(ApiError::method_not_allowed("unsupported verb")),
    }
}

fn selectors(def: &ResourceDef, q: &Query) -> ApiResult<(LabelSelector, FieldSelector)> {
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

fn encode_continue(ns: &str, name: &str, rv: u64) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(serde_json::to_vec(&json!([ns, name, rv])).unwrap_or_default())
}

fn decode_continue(token: &str) -> ApiResult<(String, String)> {
    let bad = || ApiError::bad_request("continue key is not valid");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| bad())?;
    let v: (String, String, u64) = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    Ok((v.0, v.1))
}

fn list(
    app: &Arc<AppState>,
    def: &ResourceDef,
    ns: &str,
    q: &Query,
    as_table: bool,
) -> ApiResult<Response> {
    let (labels, fields) = selectors(def, q)?;
    let limit: usize = q
        .get("limit")
        .and_then(|l| l.parse().ok())
        .filter(|l| *l > 0)
        .unwrap_or(usize::MAX);
    let after = match q.get("continue").filter(|c| !c.is_empty()) {
        Some(c) => Some(decode_continue(c)?),
        None => None,
    };
    let store = app.lock();
    let rv = store.current_rv();
    let mut items: Vec<&crate::store::Stored> = Vec::new();
    let mut more = false;
    let start = match (&after, ns.is_empty()) {
        (Some(a), _) => Some(a.clone()),
        (None, false) => Some((ns.to_string(), String::new())),
        (None, true) => None,
    };
    for stored in store.list_after(&def.group, &def.plural, start) {
        let o = &stored.value;
        let ons = meta_str(o, "namespace");
        if !ns.is_empty() && ons != ns {
            if ons > ns {
                break;
            }
            continue;
        }
        if !labels.matches(o) || !fields.matches(o) {
            continue;
        }
        if items.len() == limit {
            more = true;
            break;
        }
        items.push(stored);
    }
    let rv_s = rv.to_string();
    let continue_token = more.then(|| items.last()).flatten().map(|last| {
        let m = |f: &str| {
            last.value
                .pointer(f)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        encode_continue(&m("/metadata/namespace"), &m("/metadata/name"), rv)
    });
    if as_table {
        let owned: Vec<Value> = items
            .iter()
            .map(|o| api::as_version(def, o.value.clone()))
            .collect();
        drop(store);
        let mut t = table(def, &owned, &rv_s, include_object(q), true);
        if let Some(c) = continue_token {
            t["metadata"]["continue"] = json!(c);
        }
        return Ok(json_response(StatusCode::OK, &t));
    }
    let mut meta = json!({"resourceVersion": rv_s});
    if let Some(c) = continue_token {
        meta["continue"] = json!(c);
    }
    // Serialise straight from the store (no per-object clone) while the lock is held.
    let api_version = def.api_version();
    let mut out = Vec::with_capacity(items.iter().map(|o| o.json.len() + 1).sum::<usize>() + 512);
    let head =
        json!({"kind": format!("{}List", def.kind), "apiVersion": api_version, "metadata": meta});
    let head = serde_json::to_vec(&head).map_err(|e| ApiError::internal(e.to_string()))?;
    out.extend_from_slice(&head[..head.len() - 1]);
    out.extend_from_slice(b",\"items\":[");
    for (i, o) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        if o.value.get("apiVersion").and_then(Value::as_str) == Some(api_version.as_str()) {
            out.extend_from_slice(&o.json);
        } else {
            serde_json::to_writer(&mut out, &api::as_version(def, o.value.clone()))
                .map_err(|e| ApiError::internal(e.to_string()))?;
        }
    }
    out.extend_from_slice(b"]}");
    drop(store);
    Ok(Response::builder()
        .status(StatusCode::OK)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Body::from(out))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response()))
}

/// `metadata.<field>` as a string (empty when absent).
fn meta_str<'a>(o: &'a Value, field: &str) -> &'a str {
    o.get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn watch_line(kind: &str, object: &Value) -> Bytes {
    let mut line = serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}

struct WatchFilter {
    def: Arc<ResourceDef>,
    ns: String,
    labels: LabelSelector,
    fields: FieldSelector,
}

impl WatchFilter {
    fn matches(&self, o: &Value) -> bool {
        (self.ns.is_empty() || meta_str(o, "namespace") == self.ns)
            && self.labels.matches(o)
            && self.fields.matches(o)
    }

    /// The event type this watch sees for a change, if any: an object that starts or stops
    /// matching the selectors is `ADDED` or `DELETED`.
    fn event(&self, c: &Change) -> Option<&'static str> {
        if c.group != self.def.group || c.plural != self.def.plural {
            return None;
        }
        let now = self.matches(&c.object);
        let before = c.prev.as_ref().map(|p| self.matches(p));
        match (c.kind, before, now) {
            ("MODIFIED", Some(false), true) => Some("ADDED"),
            ("MODIFIED", Some(true), false) => Some("DELETED"),
            (kind, _, true) => Some(kind),
            _ => None,
        }
    }
}

fn watch(
    app: &Arc<AppState>,
    def: Arc<ResourceDef>,
    ns: String,
    q: &Query,
    as_table: bool,
) -> ApiResult<Response> {
    let (labels, fields) = selectors(&def, q)?;
    let filter = WatchFilter {
        def: def.clone(),
        ns,
        labels,
        fields,
    };
    let bookmarks = truthy(q, "allowWatchBookmarks");
    let timeout = q
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map(Duration::from_secs)
        .unwrap_or(Duration::from_secs(1800));
    let include = include_object(q);
    // `sendInitialEvents=true` (streaming lists): the current state as ADDED events, then
    // a bookmark annotated `k8s.io/initial-events-end`, whatever resourceVersion was given.
    let send_initial = truthy(q, "sendInitialEvents");
    let from = q
        .get("resourceVersion")
        .filter(|r| !r.is_empty() && *r != "0" && !send_initial)
        .cloned();
    let encode = {
        let def = def.clone();
        let mut first = true;
        move |kind: &str, obj: Value| -> Bytes {
            let obj = api::as_version(&def, obj);
            if as_table && kind != "ERROR" && kind != "BOOKMARK" {
                let rv = obj
                    .pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                let t = table(&def, &[obj], &rv, include, first);
                first = false;
                watch_line(kind, &t)
            } else {
                watch_line(kind, &obj)
            }
        }
    };
    let (initial, sub, start_rv): (Vec<(String, Value)>, Subscriber, u64) = {
        let store = app.lock();
        match from {
            None => {
                let (_, sub) = store
                    .subscribe_from(&def.group, &def.plural, store.current_rv())
                    .map_err(|_| ApiError::internal("subscribe"))?;
                let items: Vec<(String, Value)> = store
                    .list_all(&def.group, &def.plural)
                    .filter(|o| filter.matches(o))
                    .map(|o| ("ADDED".to_string(), o.clone()))
                    .collect();
                (items, sub, store.current_rv())
            }
            Some(rv) => {
                let rv: u64 = rv.parse().map_err(|_| {
                    ApiError::bad_request(format!("invalid resource version: {rv}"))
                })?;
                match store.subscribe_from(&def.group, &def.plural, rv) {
                    Ok((backlog, sub)) => (
                        backlog
                            .iter()
                            .filter_map(|c| {
                                filter.event(c).map(|k| (k.to_string(), c.object.clone()))
                            })
                            .collect(),
                        sub,
                        store.current_rv(),
                    ),
                    Err(too_old) => {
                        let status = ApiError::expired(format!(
                            "too old resource version: {rv} ({})",
                            too_old.oldest.saturating_sub(1)
                        ))
                        .to_status();
                        let body = watch_line("ERROR", &status);
                        return Ok(Response::builder()
                            .status(StatusCode::OK)
                            .header(http::header::CONTENT_TYPE, "application/json")
                            .body(Body::from(body))
                            .unwrap_or_else(|_| {
                                StatusCode::INTERNAL_SERVER_ERROR.into_response()
                            }));
                    }
                }
            }
        }
    };
    let mut ticker = tokio::time::interval_at(
        tokio::time::Instant::now() + app.bookmark_interval,
        app.bookmark_interval,
    );
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let api_version = def.api_version();
    let body = WatchBody {
        initial: initial.into_iter(),
        encode,
        filter,
        sub,
        changes: Vec::new(),
        initial_end_pending: send_initial,
        last_rv: start_rv,
        start_rv,
        deadline: Box::pin(tokio::time::sleep(timeout)),
        ticker,
        bookmarks,
        as_table,
        api_version,
        done: false,
    };
    Ok(Response::builder()
        .status(StatusCode::OK)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::CACHE_CONTROL, "no-cache, private")
        .body(Body::from_stream(body))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response()))
}

/// Largest chunk a watch assembles from events that are ready at once (bytes).
const CHUNK: usize = 256 * 1024;

/// Most changes a watch takes from its feed per read.
const BATCH: usize = 256;

/// An open watch's response body: a stream polled by the connection itself (no task or
/// channel per watch). Each poll sends everything that is ready as one chunk: initial
/// events in chunks of up to [`CHUNK`] bytes, then every change queued since the last
/// poll (see [`crate::feed`]).
struct WatchBody<E> {
    initial: std::vec::IntoIter<(String, Value)>,
    encode: E,
    filter: WatchFilter,
    sub: Subscriber,
    /// Read buffer for changes (kept to reuse its allocation).
    changes: Vec<Arc<Change>>,
    /// `sendInitialEvents=true`: the `initial-events-end` bookmark is still to be sent.
    initial_end_pending: bool,
    last_rv: u64,
    start_rv: u64,
    deadline: std::pin::Pin<Box<tokio::time::Sleep>>,
    ticker: tokio::time::Interval,
    bookmarks: bool,
    as_table: bool,
    api_version: String,
    done: bool,
}

impl<E: FnMut(&str, Value) -> Bytes> WatchBody<E> {
    fn bookmark(&self, initial_end: bool) -> Bytes {
        let mut bm = json!({
            "kind": self.filter.def.kind,
            "apiVersion": self.filter.def.api_version(),
            "metadata": {"resourceVersion": self.last_rv.to_string()}
        });
        if initial_end {
            bm["metadata"]["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        watch_line("BOOKMARK", &bm)
    }

    /// Appends the watch line for a change, if this watch sees it.
    fn push_change(&mut self, c: &Change, out: &mut Vec<Bytes>) {
        if c.rv <= self.last_rv && c.rv <= self.start_rv {
            return;
        }
        self.last_rv = self.last_rv.max(c.rv);
        if let Some(kind) = self.filter.event(c) {
            let same_version = c.object.get("apiVersion").and_then(Value::as_str)
                == Some(self.api_version.as_str());
            out.push(if kind == c.kind && !self.as_table && same_version {
                c.line()
            } else {
                (self.encode)(kind, c.object.clone())
            });
        }
    }

    /// The lines of every change that is ready, up to about [`CHUNK`] bytes; `Pending`
    /// (with the watch parked on its feed) when none of them is for this watch. `None`
    /// ends the watch (server stopping); a watch that lagged ends after an `ERROR` line.
    fn poll_changes(&mut self, cx: &mut std::task::Context<'_>) -> Poll<Option<Vec<Bytes>>> {
        let mut lines = Vec::new();
        let mut size = 0;
        while size < CHUNK {
            let mut changes = std::mem::take(&mut self.changes);
            match self.sub.poll_recv(cx, &mut changes, BATCH) {
                Poll::Ready(Recv::Changes) => {
                    for c in changes.drain(..) {
                        let before = lines.len();
                        self.push_change(&c, &mut lines);
                        size += lines[before..].iter().map(Bytes::len).sum::<usize>();
                    }
                    self.changes = changes;
                }
                Poll::Ready(Recv::Lagged) => {
                    self.done = true;
                    lines.push(lagged());
                    break;
                }
                Poll::Ready(Recv::Closed) => {
                    self.done = true;
                    break;
                }
                Poll::Pending => {
                    self.changes = changes;
                    break;
                }
            }
        }
        match (lines.is_empty(), self.done) {
            (false, _) => Poll::Ready(Some(lines)),
            (true, true) => Poll::Ready(None),
            (true, false) => Poll::Pending,
        }
    }
}

impl<E: FnMut(&str, Value) -> Bytes + Unpin> futures::Stream for WatchBody<E> {
    type Item = Result<Bytes, std::convert::Infallible>;

    /// The next chunk to send, or `None` when the watch ends (timeout, server closing,
    /// history overrun after an `ERROR` event).
    fn poll_next(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        if !this.initial.as_slice().is_empty() {
            let mut buf = bytes::BytesMut::new();
            while buf.len() < CHUNK
                && let Some((kind, obj)) = this.initial.next()
            {
                buf.extend_from_slice(&(this.encode)(&kind, obj));
            }
            return Poll::Ready(Some(Ok(buf.freeze())));
        }
        if std::mem::take(&mut this.initial_end_pending) {
            return Poll::Ready(Some(Ok(this.bookmark(true))));
        }
        if this.deadline.as_mut().poll(cx).is_ready() {
            this.done = true;
            return Poll::Ready(None);
        }
        match this.poll_changes(cx) {
            Poll::Ready(Some(lines)) => {
                let chunk = if lines.len() == 1 {
                    lines.into_iter().next().unwrap_or_default()
                } else {
                    let mut buf =
                        bytes::BytesMut::with_capacity(lines.iter().map(Bytes::len).sum());
                    lines.iter().for_each(|l| buf.extend_from_slice(l));
                    buf.freeze()
                };
                return Poll::Ready(Some(Ok(chunk)));
            }
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => {}
        }
        if this.bookmarks && this.ticker.poll_tick(cx).is_ready() {
            return Poll::Ready(Some(Ok(this.bookmark(false))));
        }
        Poll::Pending
    }
}

/// The `ERROR` event of a watch that fell behind the retained history.
fn lagged() -> Bytes {
    let status = ApiError::expired("too old resource version: watch fell behind").to_status();
    watch_line("ERROR", &status)
}

fn review(
    app: &Arc<AppState>,
    def: &ResourceDef,
    user: &UserInfo,
    mut body: Value,
) -> ApiResult<Response> {
    if !body.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    }
    body["apiVersion"] = json!(def.api_version());
    body["kind"] = json!(def.kind);
    if def.special == Special::SelfSubjectRulesReview {
        let ns = body
            .pointer("/spec/namespace")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let rules = {
            let store = app.lock();
            rbac::rules_for(&store, user, &ns)
        };
        let (non_resource, resource): (Vec<Value>, Vec<Value>) = rules
            .into_iter()
            .partition(|r| r.get("nonResourceURLs").is_some());
        let strip = |r: Value, keys: &[&str]| {
            let mut o = serde_json::Map::new();
            for k in keys {
                if let Some(v) = r.get(*k) {
                    o.insert((*k).to_string(), v.clone());
                }
            }
            Value::Object(o)
        };
        body["status"] = json!({
            "resourceRules": resource.into_iter().map(|r| strip(r, &["verbs", "apiGroups", "resources", "resourceNames"])).collect::<Vec<_>>(),
            "nonResourceRules": non_resource.into_iter().map(|r| strip(r, &["verbs", "nonResourceURLs"])).collect::<Vec<_>>(),
            "incomplete": false,
        });
        return Ok(json_response(StatusCode::CREATED, &body));
    }
    if def.special == Special::SelfSubjectReview {
        body["status"] = json!({"userInfo": user});
        return Ok(json_response(StatusCode::CREATED, &body));
    }
    let subject = if def.special == Special::SubjectAccessReview {
        let spec = &body["spec"];
        UserInfo {
            username: spec["user"].as_str().unwrap_or_default().into(),
            uid: spec["uid"].as_str().unwrap_or_default().into(),
            groups: spec["groups"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|g| g.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
            extra: serde_json::from_value(spec["extra"].clone()).unwrap_or_default(),
        }
    } else {
        user.clone()
    };
    let spec = body.get("spec").cloned().unwrap_or(json!({}));
    let attrs = if let Some(r) = spec.get("resourceAttributes") {
        let s = |k: &str| {
            r.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        Attributes {
            verb: s("verb"),
            namespace: s("namespace"),
            group: s("group"),
            resource: s("resource"),
            subresource: s("subresource"),
            name: s("name"),
            resource_request: true,
            path: String::new(),
        }
    } else if let Some(n) = spec.get("nonResourceAttributes") {
        Attributes {
            verb: n["verb"].as_str().unwrap_or_default().into(),
            path: n["path"].as_str().unwrap_or_default().into(),
            ..Attributes::default()
        }
    } else {
        return Err(ApiError::invalid(
            &def.group,
            &def.kind,
            "",
            vec![crate::status::Cause {
                reason: "FieldValueRequired".into(),
                message: "Required value: exactly one of nonResourceAttributes or resourceAttributes must be specified".into(),
                field: "spec.resourceAttributes".into(),
            }],
        ));
    };
    let decision = {
        let store = app.lock();
        rbac::authorize(&store, &subject, &attrs)
    };
    let mut status = json!({"allowed": decision.allowed});
    if !decision.reason.is_empty() {
        status["reason"] = json!(decision.reason);
    }
    body["status"] = status;
    if body.get("metadata").is_none() {
        body["metadata"] = json!({});
    }
    Ok(json_response(StatusCode::CREATED, &body))
}

fn non_resource(
    app: &Arc<AppState>,
    user: &UserInfo,
    method: &Method,
    path: &str,
) -> ApiResult<Response> {
    let attrs = Attributes {
        verb: method.as_str().to_lowercase(),
        path: path.to_string(),
        ..Attributes::default()
    };
    let store = app.lock();
    if !rbac::authorize(&store, user, &attrs).allowed {
        return Err(ApiError::forbidden(rbac::forbidden_message(user, &attrs)));
    }
    if method != Method::GET {
        return Err(ApiError::method_not_allowed(
            "only GET is served on this path",
        ));
    }
    let parts: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let r = &store.registry;
    let body = match parts.as_slice() {
        ["version"] => json!({
            "major": "1", "minor": "32", "gitVersion": "v1.32.0-emulator", "gitCommit": "emulator",
            "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.23",
            "compiler": "gc", "platform": "linux/amd64"
        }),
        ["api"] => r.api_versions(&app.address),
        ["apis"] => r.api_group_list(),
        ["apis", g] => r.api_group(g).ok_or_else(ApiError::no_route)?,
        ["api", v] => r.api_resource_list("", v).ok_or_else(ApiError::no_route)?,
        ["apis", g, v] => r.api_resource_list(g, v).ok_or_else(ApiError::no_route)?,
        ["openapi", "v3"] => r.openapi_v3_index(),
        ["openapi", "v3", "api", v] => r.openapi_v3_doc("", v).ok_or_else(ApiError::no_route)?,
        ["openapi", "v3", "apis", g, v] => r.openapi_v3_doc(g, v).ok_or_else(ApiError::no_route)?,
        _ => return Err(ApiError::no_route()),
    };
    Ok(json_response(StatusCode::OK, &body))
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
