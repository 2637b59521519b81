//! The access reviews, answered without storing anything: SelfSubjectAccessReview,
//! SubjectAccessReview, SelfSubjectRulesReview (`kubectl auth can-i`) and
//! SelfSubjectReview (`kubectl auth whoami`).

use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use super::state::AppState;
use crate::auth::UserInfo;
use crate::rbac::{self, Attributes};
use crate::resources::{ResourceDef, Special};
use crate::status::{ApiError, ApiResult, json_response};

/// Answers the create of a review kind (`def.special`) for `user`.
pub(crate) fn review(
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
