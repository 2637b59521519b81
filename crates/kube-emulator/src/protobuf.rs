//! Decoding of Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`)
//! for the built-in kinds kubectl's typed clients send (kubectl 1.32 `create configmap`,
//! `create clusterrolebinding`, `auth can-i`, …).
//!
//! Format from <https://kubernetes.io/docs/reference/using-api/api-concepts/#protobuf-encoding>:
//! the magic `k8s\0`, then a `runtime.Unknown` message whose `raw` field holds the object's
//! protobuf encoding. Field numbers come from the `generated.proto` files of `k8s.io/api`
//! and `k8s.io/apimachinery`. Only decoding is implemented; responses are always JSON,
//! which every client accepts. Unknown fields are skipped.

use base64::Engine;
use serde_json::{Map, Value, json};

/// Field type.
#[derive(Clone, Copy)]
enum T {
    Str,
    I64,
    I32,
    Bool,
    Time,
    Msg(&'static [F]),
    MapStr,
    MapBytes,
    MapMsg(&'static [F]),
}

/// One field: number, JSON name, type, repeated.
#[derive(Clone, Copy)]
struct F(u32, &'static str, T, bool);

const TIME: T = T::Time;
const OWNER_REF: &[F] = &[
    F(5, "apiVersion", T::Str, false),
    F(1, "kind", T::Str, false),
    F(3, "name", T::Str, false),
    F(4, "uid", T::Str, false),
    F(6, "controller", T::Bool, false),
    F(7, "blockOwnerDeletion", T::Bool, false),
];
const OBJECT_META: &[F] = &[
    F(1, "name", T::Str, false),
    F(2, "generateName", T::Str, false),
    F(3, "namespace", T::Str, false),
    F(5, "uid", T::Str, false),
    F(6, "resourceVersion", T::Str, false),
    F(7, "generation", T::I64, false),
    F(8, "creationTimestamp", TIME, false),
    F(9, "deletionTimestamp", TIME, false),
    F(10, "deletionGracePeriodSeconds", T::I64, false),
    F(11, "labels", T::MapStr, false),
    F(12, "annotations", T::MapStr, false),
    F(13, "ownerReferences", T::Msg(OWNER_REF), true),
    F(14, "finalizers", T::Str, true),
];
const META: F = F(1, "metadata", T::Msg(OBJECT_META), false);
const CONFIG_MAP: &[F] = &[
    META,
    F(2, "data", T::MapStr, false),
    F(3, "binaryData", T::MapBytes, false),
    F(4, "immutable", T::Bool, false),
];
const SECRET: &[F] = &[
    META,
    F(2, "data", T::MapBytes, false),
    F(3, "type", T::Str, false),
    F(4, "stringData", T::MapStr, false),
    F(5, "immutable", T::Bool, false),
];
const NAMESPACE_SPEC: &[F] = &[F(1, "finalizers", T::Str, true)];
const NAMESPACE: &[F] = &[META, F(2, "spec", T::Msg(NAMESPACE_SPEC), false)];
const OBJECT_REF: &[F] = &[
    F(1, "kind", T::Str, false),
    F(2, "namespace", T::Str, false),
    F(3, "name", T::Str, false),
    F(4, "uid", T::Str, false),
    F(5, "apiVersion", T::Str, false),
];
const LOCAL_REF: &[F] = &[F(1, "name", T::Str, false)];
const SERVICE_ACCOUNT: &[F] = &[
    META,
    F(2, "secrets", T::Msg(OBJECT_REF), true),
    F(3, "imagePullSecrets", T::Msg(LOCAL_REF), true),
    F(4, "automountServiceAccountToken", T::Bool, false),
];
const POLICY_RULE: &[F] = &[
    F(1, "verbs", T::Str, true),
    F(2, "apiGroups", T::Str, true),
    F(3, "resources", T::Str, true),
    F(4, "resourceNames", T::Str, true),
    F(5, "nonResourceURLs", T::Str, true),
];
const ROLE: &[F] = &[META, F(2, "rules", T::Msg(POLICY_RULE), true)];
const SUBJECT: &[F] = &[
    F(1, "kind", T::Str, false),
    F(2, "apiGroup", T::Str, false),
    F(3, "name", T::Str, false),
    F(4, "namespace", T::Str, false),
];
const ROLE_REF: &[F] = &[
    F(1, "apiGroup", T::Str, false),
    F(2, "kind", T::Str, false),
    F(3, "name", T::Str, false),
];
const BINDING: &[F] = &[
    META,
    F(2, "subjects", T::Msg(SUBJECT), true),
    F(3, "roleRef", T::Msg(ROLE_REF), false),
];
const RESOURCE_ATTRS: &[F] = &[
    F(1, "namespace", T::Str, false),
    F(2, "verb", T::Str, false),
    F(3, "group", T::Str, false),
    F(4, "version", T::Str, false),
    F(5, "resource", T::Str, false),
    F(6, "subresource", T::Str, false),
    F(7, "name", T::Str, false),
];
const NON_RESOURCE_ATTRS: &[F] = &[F(1, "path", T::Str, false), F(2, "verb", T::Str, false)];
const SSAR_SPEC: &[F] = &[
    F(1, "resourceAttributes", T::Msg(RESOURCE_ATTRS), false),
    F(
        2,
        "nonResourceAttributes",
        T::Msg(NON_RESOURCE_ATTRS),
        false,
    ),
];
const SSAR: &[F] = &[META, F(2, "spec", T::Msg(SSAR_SPEC), false)];
const EXTRA_VALUE: &[F] = &[F(1, "items", T::Str, true)];
const SAR_SPEC: &[F] = &[
    F(1, "resourceAttributes", T::Msg(RESOURCE_ATTRS), false),
    F(
        2,
        "nonResourceAttributes",
        T::Msg(NON_RESOURCE_ATTRS),
        false,
    ),
    F(3, "user", T::Str, false),
    F(4, "groups", T::Str, true),
    F(5, "extra", T::MapMsg(EXTRA_VALUE), false),
    F(6, "uid", T::Str, false),
];
const SAR: &[F] = &[META, F(2, "spec", T::Msg(SAR_SPEC), false)];
const SSR: &[F] = &[META];
const SSRR_SPEC: &[F] = &[F(1, "namespace", T::Str, false)];
const SSRR: &[F] = &[META, F(2, "spec", T::Msg(SSRR_SPEC), false)];
const LEASE_SPEC: &[F] = &[
    F(1, "holderIdentity", T::Str, false),
    F(2, "leaseDurationSeconds", T::I32, false),
    F(3, "acquireTime", TIME, false),
    F(4, "renewTime", TIME, false),
    F(5, "leaseTransitions", T::I32, false),
    F(6, "strategy", T::Str, false),
    F(7, "preferredHolder", T::Str, false),
];
const LEASE: &[F] = &[META, F(2, "spec", T::Msg(LEASE_SPEC), false)];
const PRECONDITIONS: &[F] = &[
    F(1, "uid", T::Str, false),
    F(2, "resourceVersion", T::Str, false),
];
const DELETE_OPTIONS: &[F] = &[
    F(1, "gracePeriodSeconds", T::I64, false),
    F(2, "preconditions", T::Msg(PRECONDITIONS), false),
    F(3, "orphanDependents", T::Bool, false),
    F(4, "propagationPolicy", T::Str, false),
    F(5, "dryRun", T::Str, true),
];

fn schema_for(api_version: &str, kind: &str) -> Option<&'static [F]> {
    Some(match (api_version, kind) {
        ("v1", "ConfigMap") => CONFIG_MAP,
        ("v1", "Secret") => SECRET,
        ("v1", "Namespace") => NAMESPACE,
        ("v1", "ServiceAccount") => SERVICE_ACCOUNT,
        ("rbac.authorization.k8s.io/v1", "Role" | "ClusterRole") => ROLE,
        ("rbac.authorization.k8s.io/v1", "RoleBinding" | "ClusterRoleBinding") => BINDING,
        ("authorization.k8s.io/v1", "SelfSubjectAccessReview") => SSAR,
        ("authorization.k8s.io/v1", "SubjectAccessReview") => SAR,
        ("authentication.k8s.io/v1", "SelfSubjectReview") => SSR,
        ("authorization.k8s.io/v1", "SelfSubjectRulesReview") => SSRR,
        ("coordination.k8s.io/v1", "Lease") => LEASE,
        (_, "DeleteOptions") => DELETE_OPTIONS,
        _ => return None,
    })
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, String> {
        let mut out = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self.buf.get(self.pos).ok_or("truncated varint")?;
            self.pos += 1;
            out |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(out);
            }
        }
        Err("varint too long".into())
    }

    fn bytes(&mut self) -> Result<&'a [u8], String> {
        let len = usize::try_from(self.varint()?).map_err(|_| "length overflow")?;
        let end = self
            .pos
            .checked_add(len)
            .filter(|e| *e <= self.buf.len())
            .ok_or("truncated field")?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn skip(&mut self, wire: u64) -> Result<(), String> {
        match wire {
            0 => self.varint().map(|_| ()),
            1 => self.fixed(8),
            2 => self.bytes().map(|_| ()),
            5 => self.fixed(4),
            w => Err(format!("unsupported wire type {w}")),
        }
    }

    /// Skips a fixed64 or fixed32 value, which must be there whole.
    fn fixed(&mut self, len: usize) -> Result<(), String> {
        if self.buf.len().saturating_sub(self.pos) < len {
            return Err("truncated field".into());
        }
        self.pos += len;
        Ok(())
    }
}

fn utf8(b: &[u8]) -> Result<String, String> {
    String::from_utf8(b.to_vec()).map_err(|e| e.to_string())
}

fn time_of(b: &[u8]) -> Result<Value, String> {
    let mut r = Reader { buf: b, pos: 0 };
    let (mut secs, mut nanos) = (0i64, 0i64);
    while r.pos < b.len() {
        let key = r.varint()?;
        match (key >> 3, key & 7) {
            (1, 0) => secs = r.varint()? as i64,
            (2, 0) => nanos = r.varint()? as i64,
            (_, w) => r.skip(w)?,
        }
    }
    let t = time::OffsetDateTime::from_unix_timestamp_nanos(
        i128::from(secs) * 1_000_000_000 + i128::from(nanos),
    )
    .map_err(|e| e.to_string())?;
    Ok(json!(
        t.format(&time::format_description::well_known::Rfc3339)
            .map_err(|e| e.to_string())?
    ))
}

fn map_entry(b: &[u8], value: T) -> Result<(String, Value), String> {
    let mut r = Reader { buf: b, pos: 0 };
    let (mut k, mut v) = (String::new(), Value::Null);
    while r.pos < b.len() {
        let key = r.varint()?;
        match (key >> 3, key & 7) {
            (1, 2) => k = utf8(r.bytes()?)?,
            (2, 2) => {
                let raw = r.bytes()?;
                v = match value {
                    T::MapBytes => json!(base64::engine::general_purpose::STANDARD.encode(raw)),
                    T::MapMsg(fields) => decode_message(raw, fields)?,
                    _ => json!(utf8(raw)?),
                };
            }
            (_, w) => r.skip(w)?,
        }
    }
    if v.is_null() {
        v = match value {
            T::MapMsg(_) => json!({}),
            _ => json!(""),
        };
    }
    Ok((k, v))
}

fn decode_message(buf: &[u8], fields: &[F]) -> Result<Value, String> {
    let mut r = Reader { buf, pos: 0 };
    let mut out = Map::new();
    while r.pos < buf.len() {
        let key = r.varint()?;
        // Not truncated to 32 bits: a huge number must not alias a real field.
        let num = u32::try_from(key >> 3).map_err(|_| "invalid field number")?;
        let wire = key & 7;
        let Some(F(_, name, ty, repeated)) = fields.iter().find(|f| f.0 == num).copied() else {
            r.skip(wire)?;
            continue;
        };
        let value = match ty {
            T::Str => json!(utf8(r.bytes()?)?),
            T::I64 | T::I32 => json!(r.varint()? as i64),
            T::Bool => json!(r.varint()? != 0),
            T::Time => time_of(r.bytes()?)?,
            T::Msg(sub) => decode_message(r.bytes()?, sub)?,
            T::MapStr | T::MapBytes | T::MapMsg(_) => {
                let (k, v) = map_entry(r.bytes()?, ty)?;
                let entry = out.entry(name.to_string()).or_insert_with(|| json!({}));
                entry[k] = v;
                continue;
            }
        };
        // Go's generated code always encodes non-pointer strings; their JSON form omits
        // empty ones (`omitempty`), so an empty string is as good as absent.
        if !repeated && value.as_str() == Some("") {
            continue;
        }
        if repeated {
            match out.entry(name.to_string()).or_insert_with(|| json!([])) {
                Value::Array(a) => a.push(value),
                other => *other = json!([value]),
            }
        } else {
            out.insert(name.to_string(), value);
        }
    }
    Ok(Value::Object(out))
}

/// Decodes a protobuf-encoded request body into the JSON the object would have had.
///
/// Errors: a missing `k8s\0` magic, malformed protobuf, or a kind this emulator cannot
/// decode (the caller answers 415).
pub fn decode(body: &[u8]) -> Result<Value, String> {
    let rest = body
        .strip_prefix(b"k8s\0")
        .ok_or("missing protobuf magic")?;
    let mut r = Reader { buf: rest, pos: 0 };
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    while r.pos < rest.len() {
        let key = r.varint()?;
        match (key >> 3, key & 7) {
            (1, 2) => {
                let tm = r.bytes()?;
                let mut t = Reader { buf: tm, pos: 0 };
                while t.pos < tm.len() {
                    let k = t.varint()?;
                    match (k >> 3, k & 7) {
                        (1, 2) => api_version = utf8(t.bytes()?)?,
                        (2, 2) => kind = utf8(t.bytes()?)?,
                        (_, w) => t.skip(w)?,
                    }
                }
            }
            (2, 2) => raw = r.bytes()?,
            (_, w) => r.skip(w)?,
        }
    }
    let fields = schema_for(&api_version, &kind)
        .ok_or_else(|| format!("protobuf decoding of {api_version} {kind} is not supported"))?;
    let mut v = decode_message(raw, fields)?;
    v["apiVersion"] = json!(api_version);
    v["kind"] = json!(kind);
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(num: u32, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![((num << 3) | 2) as u8, payload.len() as u8];
        out.extend_from_slice(payload);
        out
    }

    #[test]
    fn decodes_a_configmap_envelope() {
        let meta = [
            field(1, b"cm1"),
            field(11, &[field(1, b"app"), field(2, b"web")].concat()),
        ]
        .concat();
        let raw = [
            field(1, &meta),
            field(2, &[field(1, b"k"), field(2, b"v")].concat()),
        ]
        .concat();
        let type_meta = [field(1, b"v1"), field(2, b"ConfigMap")].concat();
        let body = [b"k8s\0".to_vec(), field(1, &type_meta), field(2, &raw)].concat();
        let v = decode(&body).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm1", "labels": {"app": "web"}}, "data": {"k": "v"}})
        );
        assert!(decode(b"nope").is_err());
    }

    #[test]
    fn truncated_fixed_width_fields_are_malformed() {
        let type_meta = [field(1, b"v1"), field(2, b"ConfigMap")].concat();
        let body = |raw: &[u8]| [b"k8s\0".to_vec(), field(1, &type_meta), field(2, raw)].concat();
        // An unknown fixed64 (field 9) and fixed32 (field 10), whole: skipped.
        let whole = [&[0x49][..], &[0; 8], &[0x55], &[0; 4]].concat();
        assert!(decode(&body(&whole)).is_ok());
        // Cut short: refused, as the API server refuses them, instead of ignored.
        assert!(decode(&body(&[0x49, 0, 0, 0])).is_err());
        assert!(decode(&body(&[0x55, 0])).is_err());
    }
}
