//! Counters of the identity side for `/metrics` (SPEC §9): sign-ins by result, tokens
//! issued by grant type, and refresh-token reuse detected.
//!
//! They are counted in one place, from the audit trail: [`Accounts`](crate::Accounts)
//! hands every audit event to [`IdentityMetrics::observe`], so a metric can never disagree
//! with the audit log about what happened.

use std::fmt::Write as _;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// The audit action of a sign-in attempt (every result).
pub(crate) const SIGN_IN: &str = "session.sign-in";
/// The audit action of an authorization-code exchange (`success` or `refused`).
pub(crate) const CODE_EXCHANGE: &str = "oidc.token.issue";
/// The audit action of a successful refresh.
pub(crate) const REFRESH: &str = "oidc.token.refresh";
/// The audit action of a refresh token presented after its family rotated past it.
pub(crate) const REFRESH_REUSE: &str = "oidc.refresh.reuse";
/// The audit result of a granted sign-in or token request.
pub(crate) const SUCCESS: &str = "success";

/// The sign-in results the console writes (`Accounts::sign_in`); each is exported from
/// start-up on, at 0, so rates work before the first occurrence.
const SIGN_IN_RESULTS: [&str; 4] = ["success", "invalid-credentials", "throttled", "error"];

/// Label set of `banlieue_sign_ins_total`: the audit result of the attempt.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SignInLabels {
    /// `success`, `invalid-credentials` (unknown user, disabled user, wrong or over-long
    /// password: one answer, no user enumeration), `throttled`, or `error` (the database or
    /// the hasher failed).
    pub result: String,
}

/// The OAuth 2.0 grant a token response answered (RFC 6749 §4.1.3, §6).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum GrantType {
    /// `authorization_code`: a code exchanged for tokens.
    AuthorizationCode,
    /// `refresh_token`: a refresh token rotated for new tokens.
    RefreshToken,
}

impl GrantType {
    /// The `grant_type` value of the token request, as RFC 6749 spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AuthorizationCode => "authorization_code",
            Self::RefreshToken => "refresh_token",
        }
    }
}

impl EncodeLabelValue for GrantType {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        encoder.write_str(self.as_str())
    }
}

/// Label set of `banlieue_oidc_tokens_issued_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GrantLabels {
    /// The grant the tokens were issued for.
    pub grant_type: GrantType,
}

/// The identity side's counters, all monotonic since the process started. One per
/// [`Accounts`](crate::Accounts); cheap to clone (the counters are shared atomics).
#[derive(Debug, Clone)]
pub struct IdentityMetrics {
    /// `banlieue_sign_ins_total{result}`: sign-in attempts by audit result.
    pub sign_ins: Family<SignInLabels, Counter>,
    /// `banlieue_oidc_tokens_issued_total{grant_type}`: successful token responses.
    pub tokens_issued: Family<GrantLabels, Counter>,
    /// `banlieue_oidc_refresh_reuse_detected_total`: refresh tokens presented again after
    /// their family rotated past them (outside the grace), each of which revoked its family.
    pub refresh_reuse_detected: Counter,
}

impl Default for IdentityMetrics {
    fn default() -> Self {
        let metrics = Self {
            sign_ins: Family::default(),
            tokens_issued: Family::default(),
            refresh_reuse_detected: Counter::default(),
        };
        for result in SIGN_IN_RESULTS {
            let _ = metrics.sign_ins.get_or_create(&SignInLabels {
                result: result.to_owned(),
            });
        }
        for grant_type in [GrantType::AuthorizationCode, GrantType::RefreshToken] {
            let _ = metrics
                .tokens_issued
                .get_or_create(&GrantLabels { grant_type });
        }
        metrics
    }
}

impl IdentityMetrics {
    /// Counts one audit event: `action` and `result` exactly as written to the audit log.
    /// Events that are none of the exported kinds are ignored.
    pub(crate) fn observe(&self, action: &str, result: &str) {
        match (action, result) {
            (SIGN_IN, result) => {
                self.sign_ins
                    .get_or_create(&SignInLabels {
                        result: result.to_owned(),
                    })
                    .inc();
            }
            (CODE_EXCHANGE, SUCCESS) => self.issued(GrantType::AuthorizationCode),
            (REFRESH, SUCCESS) => self.issued(GrantType::RefreshToken),
            (REFRESH_REUSE, _) => {
                self.refresh_reuse_detected.inc();
            }
            _ => {}
        }
    }

    fn issued(&self, grant_type: GrantType) {
        self.tokens_issued
            .get_or_create(&GrantLabels { grant_type })
            .inc();
    }

    /// Sign-ins counted with `result` so far.
    pub fn sign_ins_with(&self, result: &str) -> u64 {
        self.sign_ins
            .get(&SignInLabels {
                result: result.to_owned(),
            })
            .map_or(0, |c| c.get())
    }

    /// Tokens issued for `grant_type` so far.
    pub fn tokens_issued_for(&self, grant_type: GrantType) -> u64 {
        self.tokens_issued
            .get(&GrantLabels { grant_type })
            .map_or(0, |c| c.get())
    }

    /// Registers the counters under their exported names (the `_total` suffix is added by
    /// the encoder).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "banlieue_sign_ins",
            "Sign-in attempts by result (success, invalid-credentials, throttled, error)",
            self.sign_ins.clone(),
        );
        registry.register(
            "banlieue_oidc_tokens_issued",
            "Token responses of the OIDC issuer by grant_type (authorization_code, refresh_token)",
            self.tokens_issued.clone(),
        );
        registry.register(
            "banlieue_oidc_refresh_reuse_detected",
            "Refresh tokens presented again after rotation; each revoked its token family",
            self.refresh_reuse_detected.clone(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audit_events_map_to_counters() {
        let m = IdentityMetrics::default();
        let events = [
            ("session.sign-in", "success"),
            ("session.sign-in", "invalid-credentials"),
            ("session.sign-in", "invalid-credentials"),
            ("session.sign-in", "throttled"),
            ("oidc.token.issue", "success"),
            ("oidc.token.issue", "refused"),
            ("oidc.token.refresh", "success"),
            ("oidc.token.refresh", "success"),
            ("oidc.refresh.reuse", "revoked"),
            ("oidc.code.replay", "revoked"),
            ("oidc.token.revoke", "success"),
            ("user.create", "success"),
        ];
        for (action, result) in events {
            m.observe(action, result);
        }
        assert_eq!(m.sign_ins_with("success"), 1);
        assert_eq!(m.sign_ins_with("invalid-credentials"), 2);
        assert_eq!(m.sign_ins_with("throttled"), 1);
        assert_eq!(m.sign_ins_with("error"), 0);
        assert_eq!(m.tokens_issued_for(GrantType::AuthorizationCode), 1);
        assert_eq!(m.tokens_issued_for(GrantType::RefreshToken), 2);
        assert_eq!(m.refresh_reuse_detected.get(), 1);
    }

    #[test]
    fn exposition_names_and_labels() {
        let m = IdentityMetrics::default();
        m.observe("session.sign-in", "throttled");
        m.observe("oidc.token.refresh", "success");
        let mut registry = Registry::default();
        m.register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for line in [
            "# TYPE banlieue_sign_ins counter",
            "banlieue_sign_ins_total{result=\"throttled\"} 1",
            "banlieue_sign_ins_total{result=\"success\"} 0",
            "banlieue_oidc_tokens_issued_total{grant_type=\"refresh_token\"} 1",
            "banlieue_oidc_tokens_issued_total{grant_type=\"authorization_code\"} 0",
            "banlieue_oidc_refresh_reuse_detected_total 0",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
    }
}
