//! Small accessors on stored objects shared by the operations: `metadata` fields and the
//! object as served in the requested version.

use serde_json::{Value, json};

use crate::resources::ResourceDef;
pub(crate) use crate::store::meta_str as meta;

/// Output object in the requested version (objects are stored once per group/resource; a
/// multi-version CRD is served with `conversion: None` semantics).
pub(crate) fn as_version(def: &ResourceDef, mut obj: Value) -> Value {
    obj["apiVersion"] = json!(def.api_version());
    obj
}
