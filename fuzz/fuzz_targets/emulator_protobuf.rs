//! The Kubernetes emulator's protobuf request bodies (`application/vnd.kubernetes.protobuf`):
//! `kube_emulator::protobuf::decode`, the `k8s\0` envelope and the built-in kinds' messages.
//!
//! Properties: never a panic; a decoded body is a JSON object naming a supported
//! `apiVersion` and `kind`; its JSON is bounded by the input (at most 16 bytes per input
//! byte, plus a constant) and nests no deeper than the kinds' schemas (8 levels); decoding
//! is deterministic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|body: &[u8]| {
    let Ok(decoded) = kube_emulator::protobuf::decode(body) else {
        return;
    };
    let object = decoded.as_object().expect("an object");
    assert!(object["apiVersion"].is_string() && object["kind"].is_string());
    let json = serde_json::to_string(&decoded).expect("serialisable");
    assert!(
        json.len() <= 16 * body.len() + 256,
        "{} bytes of JSON from {} bytes",
        json.len(),
        body.len()
    );
    assert!(depth(&decoded) <= 8, "nested {} deep", depth(&decoded));
    let again: Value = serde_json::from_str(&json).expect("valid JSON");
    assert_eq!(again, decoded);
    assert_eq!(kube_emulator::protobuf::decode(body).ok(), Some(decoded));
});

fn depth(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        Value::Object(map) => 1 + map.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}
