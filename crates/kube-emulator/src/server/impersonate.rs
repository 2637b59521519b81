//! Impersonation: the `Impersonate-User`, `-Group`, `-Uid` and `-Extra-*` headers, each
//! allowed by the `impersonate` verb in RBAC.

use std::collections::BTreeMap;

use axum::http::HeaderMap;

use crate::auth::UserInfo;
use crate::rbac::{self, Attributes};
use crate::status::{ApiError, ApiResult};
use crate::store::Store;

/// Applies `Impersonate-*` headers after checking the `impersonate` verb for each.
pub(crate) fn impersonate(
    store: &Store,
    user: UserInfo,
    headers: &HeaderMap,
) -> ApiResult<UserInfo> {
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
