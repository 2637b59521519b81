//! The token endpoint (RFC 6749 §4.1.3 and §6, RFC 7636 §4.6), ID tokens (OpenID Connect
//! Core §2) and revocation (RFC 7009).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::task::Poll;

use banlieue_store::{
    AuditEvent, CodeRedemption, RefreshFamilyRecord, RefreshTokenRecord, StoreError, UserRecord,
};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use super::clients::Client;
use super::error::{OAuthError, OAuthErrorCode};
use super::keys::SigningKey;
use super::{Issuer, random_token, token_hash};
use crate::metrics::{CODE_EXCHANGE, REFRESH, REFRESH_REUSE, SUCCESS};

/// The claims of an ID token (OpenID Connect Core §2), as the issuer signs them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdTokenClaims {
    pub iss: String,
    /// The user name: Kubernetes maps it to `console:<sub>`.
    pub sub: String,
    /// The requested audience, followed by the client id when they differ (so relying
    /// parties that insist on their client id in `aud` accept the token, and the API
    /// server matches on `kubernetes`).
    pub aud: Vec<String>,
    /// The client the token was issued to.
    pub azp: String,
    /// Expiry, seconds since the epoch.
    pub exp: i64,
    pub iat: i64,
    pub auth_time: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nonce: Option<String>,
    /// The user's roles: Kubernetes maps each to the group `console:<role>`.
    pub groups: Vec<String>,
    pub preferred_username: String,
    #[serde(skip_serializing_if = "String::is_empty", default)]
    pub name: String,
}

/// A successful token response (RFC 6749 §5.1, OpenID Connect Core §3.1.3.3).
/// `access_token` is the ID token itself: the console has no other resource server, and
/// access tokens are not revocable (they expire within minutes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenResponse {
    pub access_token: String,
    pub token_type: String,
    /// Seconds until `id_token` expires.
    pub expires_in: u64,
    pub id_token: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    pub scope: String,
}

/// What an ID token is minted for.
struct Grant<'a> {
    user: &'a UserRecord,
    client_id: &'a str,
    audience: &'a str,
    nonce: Option<&'a str>,
    auth_time: OffsetDateTime,
}

impl Issuer {
    /// `POST /oidc/token` with the form fields: the `authorization_code` and
    /// `refresh_token` grants for public clients. Every issue and refresh is audited.
    pub async fn token(
        &self,
        form: &[(String, String)],
        source: IpAddr,
        now: OffsetDateTime,
    ) -> Result<TokenResponse, OAuthError> {
        let form = single_values(form)?;
        let client = client_of(&form)?;
        match form.get("grant_type").copied() {
            Some("authorization_code") => self.exchange_code(&form, &client, source, now).await,
            Some("refresh_token") => self.refresh(&form, &client, source, now).await,
            Some(_) => Err(OAuthError::new(
                OAuthErrorCode::UnsupportedGrantType,
                "only authorization_code and refresh_token are supported",
            )),
            None => Err(OAuthError::invalid_request("grant_type is missing")),
        }
    }

    /// `POST /oidc/revoke` (RFC 7009): a refresh token ends its whole family. Unknown
    /// tokens are accepted silently (§2.2); a token of another client is `invalid_grant`;
    /// `token_type_hint=access_token` is `unsupported_token_type` (access tokens are
    /// short-lived JWTs and are not revocable).
    pub async fn revoke(
        &self,
        form: &[(String, String)],
        source: IpAddr,
        now: OffsetDateTime,
    ) -> Result<(), OAuthError> {
        let form = single_values(form)?;
        let client = client_of(&form)?;
        let token = form
            .get("token")
            .copied()
            .filter(|t| !t.is_empty())
            .ok_or_else(|| OAuthError::invalid_request("token is missing"))?;
        if form.get("token_type_hint").copied() == Some("access_token") {
            return Err(OAuthError::new(
                OAuthErrorCode::UnsupportedTokenType,
                "access tokens cannot be revoked; they expire on their own",
            ));
        }
        let Some(record) = self.stored_refresh_token(token).await? else {
            return Ok(());
        };
        if record.family.client_id != client.id {
            return Err(OAuthError::invalid_grant(
                "the token was issued to another client",
            ));
        }
        let revoked = self
            .accounts
            .store()
            .revoke_refresh_family(&record.family.id, now)
            .await
            .map_err(server_error)?;
        if revoked {
            self.audit_family(&record.family, "oidc.token.revoke", source, "success")
                .await;
        }
        Ok(())
    }

    async fn exchange_code(
        &self,
        form: &HashMap<&str, &str>,
        client: &Client,
        source: IpAddr,
        now: OffsetDateTime,
    ) -> Result<TokenResponse, OAuthError> {
        let code = required(form, "code")?;
        let redirect_uri = required(form, "redirect_uri")?;
        let store = self.accounts.store();
        let code_hash = token_hash(code);
        let Some(stored) = store
            .authorization_code(&code_hash)
            .await
            .map_err(server_error)?
        else {
            return Err(OAuthError::invalid_grant(
                "the authorization code is not valid",
            ));
        };
        if stored.redeemed {
            return Err(self.code_replayed(stored.family_id, source, now).await);
        }
        let record = stored.record;
        // Checked before the code is redeemed: whoever saw the code but cannot prove they
        // are its client (redirect URI, PKCE verifier) cannot burn it.
        let verifier = form.get("code_verifier").copied().unwrap_or_default();
        let refusal = if record.expires_at <= now {
            Some("the authorization code has expired")
        } else if record.client_id != client.id || record.redirect_uri != redirect_uri {
            Some("the authorization code was issued to another client or redirect_uri")
        } else if !pkce_s256_matches(verifier, &record.code_challenge) {
            Some("code_verifier does not match the code_challenge")
        } else {
            None
        };
        if let Some(description) = refusal {
            self.audit_user(
                record.user_id,
                CODE_EXCHANGE,
                client.id,
                source,
                "refused",
                description,
            )
            .await;
            return Err(OAuthError::invalid_grant(description));
        }
        let user = self.live_user(record.user_id, record.auth_time).await?;
        let grant = Grant {
            user: &user,
            client_id: client.id,
            audience: &record.audience,
            nonce: record.nonce.as_deref(),
            auth_time: record.auth_time,
        };
        let refresh = record
            .scope
            .split(' ')
            .any(|s| s == "offline_access")
            .then(|| {
                let token = random_token();
                let family = RefreshFamilyRecord {
                    id: random_token(),
                    user_id: user.id,
                    client_id: client.id.to_owned(),
                    audience: record.audience.clone(),
                    scope: record.scope.clone(),
                    secret: rand::random::<[u8; 32]>().to_vec(),
                    auth_time: record.auth_time,
                    created_at: now,
                    expires_at: now + self.config.refresh_lifetime,
                    revoked_at: None,
                };
                (token, family)
            });
        let first_token_hash = refresh.as_ref().map(|(token, _)| token_hash(token));
        let family = refresh
            .as_ref()
            .zip(first_token_hash.as_deref())
            .map(|((_, family), hash)| (family, hash));
        match store
            .redeem_authorization_code(&code_hash, now, family)
            .await
            .map_err(server_error)?
        {
            CodeRedemption::Fresh => {}
            // Another request redeemed it a moment earlier: a replay, whoever was first.
            CodeRedemption::Replayed { family_id } => {
                return Err(self.code_replayed(family_id, source, now).await);
            }
            CodeRedemption::Unknown => {
                return Err(OAuthError::invalid_grant(
                    "the authorization code is not valid",
                ));
            }
        }
        let refresh_token = refresh.map(|(token, _)| token);
        let id_token = self.sign_id_token(&grant, now).await?;
        let response = token_response(id_token, refresh_token, &record.scope, self);
        self.accounts
            .audit_event(
                user.name.as_str(),
                CODE_EXCHANGE,
                client.id,
                source,
                "success",
                &format!("audience {}", record.audience),
            )
            .await;
        Ok(response)
    }

    /// A code presented again (RFC 6749 §4.1.2): the refresh family its first redemption
    /// started is revoked (audited `oidc.code.replay`), and the request refused.
    async fn code_replayed(
        &self,
        family_id: Option<String>,
        source: IpAddr,
        now: OffsetDateTime,
    ) -> OAuthError {
        if let Some(family_id) = family_id {
            match self
                .accounts
                .store()
                .revoke_refresh_family(&family_id, now)
                .await
            {
                Ok(true) => {
                    self.accounts
                        .audit_event("-", "oidc.code.replay", &family_id, source, "revoked", "")
                        .await;
                }
                Ok(false) => {}
                Err(error) => return server_error(error),
            }
        }
        OAuthError::invalid_grant("the authorization code was already used")
    }

    /// The refresh grant. A token this process issued comes from its memory of them
    /// without a read; any other is read with its family and user. The rotation's write
    /// re-checks in the database what the judgement relied on (token current, family
    /// live, user unchanged); when something changed first, the rows are read again and
    /// judged as they are now.
    async fn refresh(
        &self,
        form: &HashMap<&str, &str>,
        client: &Client,
        source: IpAddr,
        now: OffsetDateTime,
    ) -> Result<TokenResponse, OAuthError> {
        let presented = required(form, "refresh_token")?;
        let presented_hash = token_hash(presented);
        let mut remembered = self.current_tokens.take(&presented_hash);
        for _ in 0..ROTATION_ATTEMPTS {
            let record = match remembered.take() {
                Some(record) => record,
                None => self
                    .stored_refresh_token(presented)
                    .await?
                    .ok_or_else(dead_refresh_token)?,
            };
            if let Some(outcome) = self
                .rotate(form, client, source, now, presented, record)
                .await?
            {
                return outcome;
            }
        }
        tracing::error!("a refresh token kept changing under its rotation");
        let error = OAuthError::server_error();
        self.accounts
            .audit_event(
                "-",
                REFRESH,
                client.id,
                source,
                "error",
                "the token's rows kept changing under its rotation",
            )
            .await;
        Err(error)
    }

    /// One attempt at refreshing with `record`, the presented token's row: the answer,
    /// or `None` when the rotation found the rows changed since they were read.
    async fn rotate(
        &self,
        form: &HashMap<&str, &str>,
        client: &Client,
        source: IpAddr,
        now: OffsetDateTime,
        presented: &str,
        record: RefreshTokenRecord,
    ) -> Result<Option<Result<TokenResponse, OAuthError>>, OAuthError> {
        let store = self.accounts.store();
        let family = &record.family;
        let refusal = if family.client_id != client.id {
            Some(OAuthError::invalid_grant(
                "the refresh token was issued to another client",
            ))
        } else if family.revoked_at.is_some() || family.expires_at <= now {
            Some(dead_refresh_token())
        } else {
            form.get("scope").and_then(|asked| {
                let granted: Vec<&str> = family.scope.split(' ').collect();
                (!asked.split(' ').all(|scope| granted.contains(&scope))).then(|| {
                    OAuthError::new(
                        OAuthErrorCode::InvalidScope,
                        "a refresh cannot widen the granted scope",
                    )
                })
            })
        };
        if let Some(error) = refusal {
            return Ok(Some(Err(self.refuse_refresh(family, source, error).await)));
        }
        let user = match may_receive_tokens(record.holder.clone(), family.auth_time) {
            Ok(user) => user,
            Err(error) => {
                store
                    .revoke_refresh_family(&family.id, now)
                    .await
                    .map_err(server_error)?;
                return Ok(Some(Err(self.refuse_refresh(family, source, error).await)));
            }
        };
        let retired = record.retired_at.is_some();
        if retired {
            let in_grace = record
                .retired_at
                .is_some_and(|retired_at| now - retired_at <= self.config.refresh_grace);
            if !(in_grace && record.successor_is_current) {
                store
                    .revoke_refresh_family(&family.id, now)
                    .await
                    .map_err(server_error)?;
                self.audit_family(family, REFRESH_REUSE, source, "revoked")
                    .await;
                return Ok(Some(Err(OAuthError::invalid_grant(
                    "the refresh token was already used; its sessions are revoked",
                ))));
            }
        }
        let successor = successor_token(&family.secret, presented);
        let grant = Grant {
            user: &user,
            client_id: client.id,
            audience: &family.audience,
            nonce: None,
            auth_time: family.auth_time,
        };
        let unsigned = self.unsigned_id_token(&grant, now).await?;
        let success = AuditEvent::now(
            user.name.as_str(),
            REFRESH,
            &family.client_id,
            source,
            SUCCESS,
            &format!("audience {}", family.audience),
        );
        let id_token = if retired {
            // Within the grace window: the same successor again, nothing to rotate, as
            // long as the chain, its family and its user are still as judged.
            let (id_token, still_due) = signed_while(
                store.audit_refresh_in_grace(&record.token_hash, user.version, &success),
                &unsigned,
            )
            .await;
            if !still_due.map_err(server_error)? {
                return Ok(None);
            }
            self.accounts.audited(&success);
            id_token
        } else {
            let successor_hash = token_hash(&successor);
            let (id_token, rotated) = signed_while(
                store.rotate_refresh_token(
                    &record.token_hash,
                    &successor_hash,
                    user.version,
                    now,
                    &success,
                ),
                &unsigned,
            )
            .await;
            if !rotated.map_err(server_error)? {
                return Ok(None);
            }
            self.accounts.audited(&success);
            self.current_tokens.put(RefreshTokenRecord {
                token_hash: successor_hash,
                family: record.family.clone(),
                issued_at: now,
                retired_at: None,
                successor_is_current: false,
                holder: Some(user.clone()),
            });
            id_token
        };
        let response = token_response(id_token?, Some(successor), &family.scope, self);
        Ok(Some(Ok(response)))
    }

    /// The user `user_id` as stored now, if they may still receive tokens for an
    /// authentication at `auth_time` ([`may_receive_tokens`]).
    async fn live_user(
        &self,
        user_id: i64,
        auth_time: OffsetDateTime,
    ) -> Result<UserRecord, OAuthError> {
        let user = self
            .accounts
            .store()
            .user_by_id(user_id)
            .await
            .map_err(server_error)?;
        may_receive_tokens(user, auth_time)
    }

    async fn stored_refresh_token(
        &self,
        token: &str,
    ) -> Result<Option<RefreshTokenRecord>, OAuthError> {
        self.accounts
            .store()
            .refresh_token(&token_hash(token))
            .await
            .map_err(server_error)
    }

    async fn sign_id_token(
        &self,
        grant: &Grant<'_>,
        now: OffsetDateTime,
    ) -> Result<String, OAuthError> {
        self.unsigned_id_token(grant, now).await?.sign()
    }

    /// The claims of the ID token for `grant` and the key that will sign them.
    async fn unsigned_id_token(
        &self,
        grant: &Grant<'_>,
        now: OffsetDateTime,
    ) -> Result<UnsignedIdToken, OAuthError> {
        let key = self.keys.signing_key(now).await.map_err(|error| {
            tracing::error!(%error, "no usable signing key");
            OAuthError::server_error()
        })?;
        let mut aud = vec![grant.audience.to_owned()];
        if grant.audience != grant.client_id {
            aud.push(grant.client_id.to_owned());
        }
        let claims = IdTokenClaims {
            iss: self.config.issuer_url.clone(),
            sub: grant.user.name.as_str().to_owned(),
            aud,
            azp: grant.client_id.to_owned(),
            exp: (now + self.config.id_token_ttl).unix_timestamp(),
            iat: now.unix_timestamp(),
            auth_time: grant.auth_time.unix_timestamp(),
            nonce: grant.nonce.map(str::to_owned),
            groups: grant
                .user
                .roles
                .iter()
                .map(|role| role.as_str().to_owned())
                .collect(),
            preferred_username: grant.user.name.as_str().to_owned(),
            name: grant.user.display_name.clone(),
        };
        Ok(UnsignedIdToken { key, claims })
    }

    async fn audit_family(
        &self,
        family: &RefreshFamilyRecord,
        action: &str,
        source: IpAddr,
        result: &str,
    ) {
        let detail = format!("audience {}", family.audience);
        self.audit_user(
            family.user_id,
            action,
            &family.client_id,
            source,
            result,
            &detail,
        )
        .await;
    }

    /// Records a refused refresh of `family` (SPEC §4: every refresh is audited, refused
    /// ones too, with the reason) and gives the error back.
    async fn refuse_refresh(
        &self,
        family: &RefreshFamilyRecord,
        source: IpAddr,
        error: OAuthError,
    ) -> OAuthError {
        self.audit_user(
            family.user_id,
            REFRESH,
            &family.client_id,
            source,
            "refused",
            &error.description,
        )
        .await;
        error
    }

    /// An audit event with the user `user_id` as actor (`-` when gone) and the client as
    /// target.
    async fn audit_user(
        &self,
        user_id: i64,
        action: &str,
        client_id: &str,
        source: IpAddr,
        result: &str,
        detail: &str,
    ) {
        let actor = match self.accounts.store().user_by_id(user_id).await {
            Ok(Some(user)) => user.name.as_str().to_owned(),
            _ => "-".to_owned(),
        };
        self.accounts
            .audit_event(&actor, action, client_id, source, result, detail)
            .await;
    }
}

/// `user`, if they may still receive tokens for an authentication at `auth_time`: present,
/// enabled, not due to change their password, and authenticated after `not_before`
/// (SPEC §3: a password change or "sign out everywhere" ends tokens).
fn may_receive_tokens(
    user: Option<UserRecord>,
    auth_time: OffsetDateTime,
) -> Result<UserRecord, OAuthError> {
    match user {
        Some(user)
            if !user.disabled && !user.must_change_password && auth_time >= user.not_before =>
        {
            Ok(user)
        }
        _ => Err(OAuthError::invalid_grant(
            "the user's session has ended; sign in again",
        )),
    }
}

/// How often a refresh reads its token's rows again when they change under its rotation
/// (another replica, an administrator) before giving up with `server_error`.
const ROTATION_ATTEMPTS: usize = 3;

fn dead_refresh_token() -> OAuthError {
    OAuthError::invalid_grant("the refresh token is not valid")
}

/// The token response around a signed ID token, which is also the access token.
fn token_response(
    id_token: String,
    refresh_token: Option<String>,
    scope: &str,
    issuer: &Issuer,
) -> TokenResponse {
    TokenResponse {
        access_token: id_token.clone(),
        token_type: "Bearer".to_owned(),
        expires_in: issuer.config.id_token_ttl.as_secs(),
        id_token,
        refresh_token,
        scope: scope.to_owned(),
    }
}

/// The next token of a family: HMAC-SHA256(family secret, presented token). Deterministic,
/// so two requests presenting the same token in the grace window get the same successor,
/// and only the holder of the predecessor and the secret can compute it.
fn successor_token(secret: &[u8], presented: &str) -> String {
    let key = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, secret);
    URL_SAFE_NO_PAD.encode(aws_lc_rs::hmac::sign(&key, presented.as_bytes()).as_ref())
}

/// RFC 7636 §4.6: BASE64URL(SHA256(verifier)) == challenge, the verifier being 43–128
/// characters of `[A-Za-z0-9-._~]` (§4.1). Compared in constant time.
fn pkce_s256_matches(verifier: &str, challenge: &str) -> bool {
    let well_formed = (43..=128).contains(&verifier.len())
        && verifier
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'));
    if !well_formed {
        return false;
    }
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, verifier.as_bytes());
    let computed = URL_SAFE_NO_PAD.encode(digest.as_ref());
    aws_lc_rs::constant_time::verify_slices_are_equal(computed.as_bytes(), challenge.as_bytes())
        .is_ok()
}

/// The form as name → value, refusing repeated parameters (RFC 6749 §3.2).
fn single_values(form: &[(String, String)]) -> Result<HashMap<&str, &str>, OAuthError> {
    let mut values = HashMap::new();
    for (name, value) in form {
        if values.insert(name.as_str(), value.as_str()).is_some() {
            return Err(OAuthError::repeated_parameter(name));
        }
    }
    Ok(values)
}

fn client_of(form: &HashMap<&str, &str>) -> Result<Client, OAuthError> {
    let id = form.get("client_id").copied().unwrap_or_default();
    Client::find(id).ok_or_else(|| {
        OAuthError::new(
            OAuthErrorCode::InvalidClient,
            "client_id is missing or not registered",
        )
    })
}

fn required<'a>(form: &HashMap<&str, &'a str>, name: &str) -> Result<&'a str, OAuthError> {
    form.get(name)
        .copied()
        .filter(|v| !v.is_empty())
        .ok_or_else(|| OAuthError::invalid_request(format!("{name} is missing")))
}

/// An ID token's claims with the key that signs them ([`Issuer::unsigned_id_token`]).
struct UnsignedIdToken {
    key: Arc<SigningKey>,
    claims: IdTokenClaims,
}

impl UnsignedIdToken {
    fn sign(&self) -> Result<String, OAuthError> {
        self.key.sign(&self.claims).map_err(|error| {
            tracing::error!(%error, "cannot sign an ID token");
            OAuthError::server_error()
        })
    }
}

/// Signs `unsigned` while `write` runs: `write` is polled once first, which hands its
/// batch to the database, so the database writes while this thread signs (the signature
/// is most of a refresh's time) and the write is usually done when the signature is.
async fn signed_while<W: Future>(
    write: W,
    unsigned: &UnsignedIdToken,
) -> (Result<String, OAuthError>, W::Output) {
    let mut write = std::pin::pin!(write);
    let early = std::future::poll_fn(|cx| Poll::Ready(write.as_mut().poll(cx))).await;
    let signed = unsigned.sign();
    let written = match early {
        Poll::Ready(written) => written,
        Poll::Pending => write.await,
    };
    (signed, written)
}

fn server_error(error: StoreError) -> OAuthError {
    tracing::error!(%error, "issuer storage failed");
    OAuthError::server_error()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pkce_matches_the_rfc_7636_example() {
        // RFC 7636 Appendix B.
        let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
        let challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";
        assert!(pkce_s256_matches(verifier, challenge));
        assert!(!pkce_s256_matches(
            "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXl",
            challenge
        ));
        assert!(!pkce_s256_matches("", challenge));
        assert!(!pkce_s256_matches(challenge, challenge));
    }

    #[test]
    fn successors_are_deterministic_per_family_secret() {
        let a = successor_token(b"secret-one", "token");
        assert_eq!(a, successor_token(b"secret-one", "token"));
        assert_ne!(a, successor_token(b"secret-two", "token"));
        assert_ne!(a, successor_token(b"secret-one", "other"));
        assert_eq!(a.len(), 43);
    }
}
