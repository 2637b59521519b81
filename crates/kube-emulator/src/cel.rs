//! CEL evaluation over JSON values (the `cel` crate with its strings, lists and math
//! extensions), shared by everything that runs Kubernetes CEL: ValidatingAdmissionPolicy
//! ([`crate::admission`]), CRD `x-kubernetes-validations` ([`crate::schema`]) and JWT
//! `userValidationRules` ([`crate::auth`]).

use std::sync::{Arc, OnceLock};

use ::cel::{Context, Env, Program};
use serde_json::Value;

/// The CEL environment, built once: the standard library and the extensions Kubernetes
/// CEL offers that the `cel` crate has.
fn env() -> Arc<Env> {
    static ENV: OnceLock<Arc<Env>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Env::stdlib();
        let _ = env.add_extension(::cel::extensions::strings);
        let _ = env.add_extension(::cel::extensions::lists);
        let _ = env.add_extension(::cel::extensions::math);
        Arc::new(env)
    })
    .clone()
}

/// Evaluates one CEL expression against the given variables.
///
/// Errors: a compile or evaluation error message.
pub(crate) fn eval(expr: &str, vars: &[(&str, &Value)]) -> Result<Value, String> {
    let env = env();
    let program: Program = env
        .compile(expr)
        .map_err(|e| format!("compilation failed: {e}"))?;
    let mut ctx = Context::with_env(env);
    for (name, value) in vars {
        ctx.add_variable(*name, *value).map_err(|e| e.to_string())?;
    }
    let out = program.execute(&ctx).map_err(|e| e.to_string())?;
    out.json().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn cel_over_json() {
        let obj = json!({"spec": {"subject": {"id": "alice", "issuer": "https://a"}}, "metadata": {"labels": {"x": "1"}}});
        let params = json!({"data": {"issuers": "https://a,https://b"}});
        let vars = [("object", &obj), ("params", &params)];
        assert_eq!(
            eval("object.spec.subject.id == 'alice'", &vars).unwrap(),
            json!(true)
        );
        assert_eq!(
            eval(
                "object.spec.subject.issuer in params.data.issuers.split(',')",
                &vars
            )
            .unwrap(),
            json!(true)
        );
        assert_eq!(
            eval("has(object.spec.poolRef)", &vars).unwrap(),
            json!(false)
        );
        assert_eq!(
            eval("'x: ' + object.spec.subject.id", &vars).unwrap(),
            json!("x: alice")
        );
        assert!(eval("object.(", &vars).is_err());
    }
}
