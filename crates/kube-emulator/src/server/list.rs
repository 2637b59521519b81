//! List (GET of a collection): selectors, `limit`/`continue` paging over live data, and
//! the list serialised straight from the store's encodings (or as a `Table`).

use std::sync::Arc;

use axum::body::Body;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde_json::{Value, json};

use super::request::{Query, include_object, selectors};
use super::state::AppState;
use crate::api;
use crate::resources::ResourceDef;
use crate::status::{ApiError, ApiResult, json_response};
use crate::store::meta_str;
use crate::table::table;

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

/// Answers a list request of `def` in `ns` (every namespace when empty).
pub(crate) fn list(
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
