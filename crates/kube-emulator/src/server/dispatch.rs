//! The single entry point and the routing of a request: bearer token authentication,
//! impersonation, the verb, RBAC, the resource type, then the verb's operation.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::discovery::non_resource;
use super::impersonate::impersonate;
use super::list::list;
use super::request::{
    field_manager, include_object, parse_body, parse_path, query_of, selectors, truthy, wants_table,
};
use super::review::review;
use super::state::AppState;
use super::watch::watch;
use crate::api::{self, Ctx, FieldValidation, PatchType};
use crate::auth::UserInfo;
use crate::rbac::{self, Attributes};
use crate::resources::Special;
use crate::status::{ApiError, ApiResult, json_response};
use crate::table::table;

/// Adds a `Warning: 299 - "<text>"` header per warning.
fn with_warnings(mut resp: Response, warnings: &[String]) -> Response {
    for w in warnings {
        if let Ok(v) = http::HeaderValue::from_str(&format!("299 - \"{}\"", w.replace('"', "'"))) {
            resp.headers_mut().append("Warning", v);
        }
    }
    resp
}

/// The single entry point: every request goes through here.
pub(crate) async fn handle(State(app): State<Arc<AppState>>, req: Request) -> Response {
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
