//! The tenants' signing keys: one cache per JWK Set endpoint, shared by every tenant that
//! names it (SPEC §7).
//!
//! - Keys are used for [`JwksPolicy::fresh`] (15 min) after a successful fetch, then
//!   fetched again on the next use.
//! - When fetching fails, the last keys stay usable until [`JwksPolicy::keep`] (24 h)
//!   after that success, then every token of the endpoint is refused until a fetch works.
//! - Fetches are limited to one per [`JwksPolicy::min_fetch_interval`] per endpoint,
//!   whether they succeed or not: a token naming an unknown `kid` causes at most one
//!   refetch per window, however many such tokens arrive. Concurrent callers share one
//!   fetch; an endpoint that is slow delays no other endpoint's tokens, and a token whose
//!   key is known and fresh waits for no fetch at all.
//! - Over plain http only to loopback (as the documents); a redirect from https to http is
//!   refused, as is one to plain http off loopback.
//! - [`JwksLocation::Discovery`]: the provider's discovery document gives `jwks_uri`; its
//!   `issuer` must be the one the document was derived from.
//!
//! The fetch gate is a timestamp per endpoint taken under the endpoint's own lock: it is
//! these rules (single flight, one attempt per window, stale-while-failing), which a
//! general-purpose rate limiter would not express.
//!
//! Each key is parsed by aws-lc-rs once per algorithm it verifies and kept
//! ([`VerifyingKey`]): `jsonwebtoken::decode` parses the public key again on every call,
//! which costs as much as the RSA verification itself.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};

use aws_lc_rs::signature::{self as sig, ParsedPublicKey, RsaPublicKeyComponents};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, AlgorithmFamily};
use url::Url;

use crate::document::{JwksLocation, provider_url};
use crate::metrics::FetchLabels;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

/// The asymmetric algorithms a tenant's token may be signed with. Never `none`, never an
/// HMAC (a shared secret would let anyone holding it mint tokens).
pub const ALGORITHMS: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// The discovery document's path below an issuer (OpenID Connect Discovery 1.0 §4).
const DISCOVERY_PATH: &str = "/.well-known/openid-configuration";

/// The most bytes read of a JWK Set or discovery document.
const MAX_DOCUMENT_BYTES: usize = 512 * 1024;

/// The timings of [`JwksCache`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JwksPolicy {
    /// How long fetched keys are used before the next use fetches them again.
    pub fresh: Duration,
    /// How long after the last successful fetch its keys stay usable while fetching fails.
    pub keep: Duration,
    /// The least time between two fetches of one endpoint, successful or not.
    pub min_fetch_interval: Duration,
    /// How long one fetch (discovery and keys together) may take.
    pub timeout: Duration,
}

impl Default for JwksPolicy {
    /// 15 min fresh, kept 24 h while failing, one fetch per 30 s, 5 s per fetch.
    fn default() -> Self {
        Self {
            fresh: Duration::from_secs(15 * 60),
            keep: Duration::from_secs(24 * 3600),
            min_fetch_interval: Duration::from_secs(30),
            timeout: Duration::from_secs(5),
        }
    }
}

/// Why no key verifies a token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The endpoint's keys could not be fetched, or were last fetched longer ago than
    /// [`JwksPolicy::keep`] (the provider is unreachable: a 503).
    #[error("the keys of {endpoint} are unavailable: {reason}")]
    Unavailable {
        /// The endpoint (JWK Set or discovery URL).
        endpoint: String,
        /// The last fetch's failure, or the keys' age.
        reason: String,
    },
    /// The endpoint's keys are known but none is the token's (an unknown `kid`, a `kid`
    /// the provider withdrew, or no `kid` where the set has several keys of the kind).
    #[error("no key of {endpoint} {reason}")]
    NoKey {
        /// The endpoint.
        endpoint: String,
        /// Which key was asked for.
        reason: String,
    },
}

/// One verification key of a set.
struct Key {
    kid: Option<String>,
    /// The `alg` the set pins the key to, if any.
    algorithm: Option<Algorithm>,
    key: Arc<VerifyingKey>,
}

/// A public key of a JWK Set, parsed by aws-lc-rs at most once for each algorithm of
/// [`ALGORITHMS`] it is used with.
pub struct VerifyingKey {
    material: Material,
    parsed: [OnceLock<Option<ParsedPublicKey>>; ALGORITHMS.len()],
}

/// A key's public parameters, decoded from its JWK.
enum Material {
    /// The modulus and exponent, big-endian.
    Rsa { n: Vec<u8>, e: Vec<u8> },
    /// An uncompressed point (`04 || x || y`) on the curve of `algorithm`.
    Ec {
        algorithm: Algorithm,
        point: Vec<u8>,
    },
    /// An Ed25519 public key.
    Ed25519(Vec<u8>),
}

impl VerifyingKey {
    /// The key of `jwk`'s parameters, or `None` for a kind not verified here (symmetric,
    /// P-521, unreadable base64).
    fn from_jwk(jwk: &Jwk) -> Option<Self> {
        let bytes = |text: &str| URL_SAFE_NO_PAD.decode(text.trim_end_matches('=')).ok();
        let material = match &jwk.algorithm {
            AlgorithmParameters::RSA(rsa) => Material::Rsa {
                n: bytes(&rsa.n)?,
                e: bytes(&rsa.e)?,
            },
            AlgorithmParameters::EllipticCurve(ec) => {
                let algorithm = match ec.curve {
                    EllipticCurve::P256 => Algorithm::ES256,
                    EllipticCurve::P384 => Algorithm::ES384,
                    _ => return None,
                };
                let mut point = vec![4];
                point.extend(bytes(&ec.x)?);
                point.extend(bytes(&ec.y)?);
                Material::Ec { algorithm, point }
            }
            AlgorithmParameters::OctetKeyPair(okp) if okp.curve == EllipticCurve::Ed25519 => {
                Material::Ed25519(bytes(&okp.x)?)
            }
            _ => return None,
        };
        Some(Self {
            material,
            parsed: Default::default(),
        })
    }

    /// Whether this key can verify `algorithm` (its family, and for EC its curve).
    fn fits(&self, algorithm: Algorithm) -> bool {
        match &self.material {
            Material::Rsa { .. } => algorithm.family() == AlgorithmFamily::Rsa,
            Material::Ec { algorithm: own, .. } => *own == algorithm,
            Material::Ed25519(_) => algorithm == Algorithm::EdDSA,
        }
    }

    /// Whether `signature` is this key's signature of `message` under `algorithm` (false
    /// for an algorithm the key does not fit, or parameters aws-lc-rs refuses).
    pub fn verifies(&self, algorithm: Algorithm, message: &[u8], signature: &[u8]) -> bool {
        let Some(slot) = ALGORITHMS.iter().position(|a| *a == algorithm) else {
            return false;
        };
        if !self.fits(algorithm) {
            return false;
        }
        let parsed = self.parsed[slot].get_or_init(|| self.parse(algorithm));
        parsed
            .as_ref()
            .is_some_and(|key| key.verify_sig(message, signature).is_ok())
    }

    fn parse(&self, algorithm: Algorithm) -> Option<ParsedPublicKey> {
        let rsa = |params: &'static sig::RsaParameters, n: &[u8], e: &[u8]| {
            RsaPublicKeyComponents { n, e }
                .to_parsed_public_key(params)
                .ok()
        };
        match (&self.material, algorithm) {
            (Material::Rsa { n, e }, Algorithm::RS256) => {
                rsa(&sig::RSA_PKCS1_2048_8192_SHA256, n, e)
            }
            (Material::Rsa { n, e }, Algorithm::RS384) => {
                rsa(&sig::RSA_PKCS1_2048_8192_SHA384, n, e)
            }
            (Material::Rsa { n, e }, Algorithm::RS512) => {
                rsa(&sig::RSA_PKCS1_2048_8192_SHA512, n, e)
            }
            (Material::Rsa { n, e }, Algorithm::PS256) => rsa(&sig::RSA_PSS_2048_8192_SHA256, n, e),
            (Material::Rsa { n, e }, Algorithm::PS384) => rsa(&sig::RSA_PSS_2048_8192_SHA384, n, e),
            (Material::Rsa { n, e }, Algorithm::PS512) => rsa(&sig::RSA_PSS_2048_8192_SHA512, n, e),
            (Material::Ec { point, .. }, Algorithm::ES256) => {
                ParsedPublicKey::new(&sig::ECDSA_P256_SHA256_FIXED, point).ok()
            }
            (Material::Ec { point, .. }, Algorithm::ES384) => {
                ParsedPublicKey::new(&sig::ECDSA_P384_SHA384_FIXED, point).ok()
            }
            (Material::Ed25519(x), Algorithm::EdDSA) => ParsedPublicKey::new(&sig::ED25519, x).ok(),
            _ => None,
        }
    }
}

/// What an endpoint last fetched.
#[derive(Default)]
struct Fetched {
    keys: Arc<Vec<Key>>,
    /// The last successful fetch.
    succeeded_at: Option<Instant>,
    /// The last attempt, successful or not.
    attempted_at: Option<Instant>,
    /// Why the last attempt failed, when it did.
    failure: Option<String>,
}

/// One endpoint's cache.
struct Endpoint {
    fetched: RwLock<Fetched>,
    /// Held while fetching, so concurrent callers share one fetch.
    fetching: tokio::sync::Mutex<()>,
}

/// The JWK Sets of the tenants' providers, one cache per endpoint.
pub struct JwksCache {
    http: reqwest::Client,
    policy: JwksPolicy,
    endpoints: Mutex<HashMap<JwksLocation, Arc<Endpoint>>>,
    /// `banlieue_tenant_jwks_fetches_total` ([`crate::TenantMetrics::jwks_fetches`]).
    fetches: Family<FetchLabels, Counter>,
}

impl JwksCache {
    /// An empty cache fetching with its own HTTP client (rustls, the platform's roots;
    /// redirects followed up to 5, never from https to http).
    ///
    /// Errors: the HTTP client cannot be built (TLS set-up).
    pub fn new(policy: JwksPolicy) -> Result<Self, reqwest::Error> {
        Self::trusting(policy, &[])
    }

    /// [`JwksCache::new`], also trusting the CA certificates of `pem_bundle` (PEM; for
    /// providers behind a private CA).
    ///
    /// Errors: a certificate that cannot be read, or the HTTP client cannot be built.
    pub fn trusting(policy: JwksPolicy, pem_bundle: &[u8]) -> Result<Self, reqwest::Error> {
        let roots = if pem_bundle.is_empty() {
            Vec::new()
        } else {
            reqwest::Certificate::from_pem_bundle(pem_bundle)?
        };
        let http = reqwest::Client::builder()
            .tls_certs_merge(roots)
            .redirect(reqwest::redirect::Policy::custom(
                |attempt| match redirect_refusal(attempt.previous(), attempt.url()) {
                    None => attempt.follow(),
                    Some(reason) => attempt.error(reason),
                },
            ))
            .timeout(policy.timeout)
            .build()?;
        Ok(Self {
            http,
            policy,
            endpoints: Mutex::new(HashMap::new()),
            fetches: Family::default(),
        })
    }

    /// The fetches counted by endpoint and result, for [`crate::TenantMetrics`].
    pub fn fetches(&self) -> &Family<FetchLabels, Counter> {
        &self.fetches
    }

    /// The timings.
    pub fn policy(&self) -> JwksPolicy {
        self.policy
    }

    /// The key of `location` that verifies a token whose header names `kid` and `alg`,
    /// at `now`: from the cache when its keys are fresh and hold that `kid`, else after
    /// one fetch when the window allows it.
    ///
    /// Errors: [`KeyError::Unavailable`] when no usable keys are known,
    /// [`KeyError::NoKey`] when they hold none for this token.
    pub async fn key(
        &self,
        location: &JwksLocation,
        kid: Option<&str>,
        algorithm: Algorithm,
        now: Instant,
    ) -> Result<Arc<VerifyingKey>, KeyError> {
        let endpoint = self.endpoint(location);
        let wanted = |fetched: &Fetched| {
            let fresh = fetched
                .succeeded_at
                .is_some_and(|at| now.saturating_duration_since(at) < self.policy.fresh);
            fresh && pick(&fetched.keys, kid, algorithm).is_ok()
        };
        let may_fetch = |fetched: &Fetched| {
            fetched.attempted_at.is_none_or(|at| {
                now.saturating_duration_since(at) >= self.policy.min_fetch_interval
            })
        };
        let needs_fetch = {
            let fetched = read(&endpoint.fetched);
            !wanted(&fetched) && may_fetch(&fetched)
        };
        if needs_fetch {
            let _one = endpoint.fetching.lock().await;
            // Another caller may have fetched while this one waited.
            let still = {
                let fetched = read(&endpoint.fetched);
                !wanted(&fetched) && may_fetch(&fetched)
            };
            if still {
                let outcome = self.fetch(location).await;
                self.fetches
                    .get_or_create(&FetchLabels {
                        endpoint: describe(location),
                        result: if outcome.is_ok() {
                            "success"
                        } else {
                            "failure"
                        },
                    })
                    .inc();
                let mut fetched = endpoint.fetched.write().unwrap_or_else(|p| p.into_inner());
                fetched.attempted_at = Some(now);
                match outcome {
                    Ok(keys) => {
                        fetched.keys = Arc::new(keys);
                        fetched.succeeded_at = Some(now);
                        fetched.failure = None;
                    }
                    Err(reason) => {
                        tracing::warn!(endpoint = %describe(location), %reason, "fetching a tenant provider's keys failed");
                        fetched.failure = Some(reason);
                    }
                }
            }
        }
        let fetched = read(&endpoint.fetched);
        let usable = fetched
            .succeeded_at
            .is_some_and(|at| now.saturating_duration_since(at) < self.policy.keep);
        if !usable {
            let reason = match (&fetched.failure, fetched.succeeded_at) {
                (Some(failure), None) => failure.clone(),
                (failure, Some(at)) => format!(
                    "last fetched {} s ago, longer than the {} s kept{}",
                    now.saturating_duration_since(at).as_secs(),
                    self.policy.keep.as_secs(),
                    failure
                        .as_ref()
                        .map(|f| format!("; the last fetch: {f}"))
                        .unwrap_or_default()
                ),
                (None, None) => "not fetched yet".to_owned(),
            };
            return Err(KeyError::Unavailable {
                endpoint: describe(location),
                reason,
            });
        }
        pick(&fetched.keys, kid, algorithm).map_err(|reason| KeyError::NoKey {
            endpoint: describe(location),
            reason,
        })
    }

    /// Drops the caches of every endpoint not in `live` (the endpoints the current
    /// tenants name), so a removed tenant's keys are not kept.
    pub fn retain<'a>(&self, live: impl IntoIterator<Item = &'a JwksLocation>) {
        let live: Vec<&JwksLocation> = live.into_iter().collect();
        self.endpoints
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|location, _| live.contains(&location));
    }

    /// How many endpoints are cached.
    pub fn len(&self) -> usize {
        self.endpoints
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }

    /// Whether no endpoint is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn endpoint(&self, location: &JwksLocation) -> Arc<Endpoint> {
        let mut endpoints = self.endpoints.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(endpoint) = endpoints.get(location) {
            return endpoint.clone();
        }
        endpoints
            .entry(location.clone())
            .or_insert_with(|| {
                Arc::new(Endpoint {
                    fetched: RwLock::new(Fetched::default()),
                    fetching: tokio::sync::Mutex::new(()),
                })
            })
            .clone()
    }

    /// The keys at `location` (through discovery when it is a discovery document).
    ///
    /// Errors: a sentence saying what failed.
    async fn fetch(&self, location: &JwksLocation) -> Result<Vec<Key>, String> {
        let jwks_url = match location {
            JwksLocation::Url(url) => url.clone(),
            JwksLocation::Discovery(url) => self.discover(url).await?,
        };
        #[derive(serde::Deserialize)]
        struct Set {
            keys: Vec<serde_json::Value>,
        }
        // Key by key: one the library cannot read (another kind, a future algorithm)
        // leaves the others usable.
        let set: Set = self.get_json(&jwks_url).await?;
        let keys: Vec<Key> = set
            .keys
            .into_iter()
            .filter_map(|key| serde_json::from_value::<Jwk>(key).ok())
            .filter_map(|jwk| verification_key(&jwk))
            .collect();
        if keys.is_empty() {
            return Err(format!("{jwks_url} holds no usable signature key"));
        }
        Ok(keys)
    }

    /// The `jwks_uri` of the discovery document at `url`, whose `issuer` must be the
    /// issuer `url` was derived from.
    async fn discover(&self, url: &Url) -> Result<Url, String> {
        #[derive(serde::Deserialize)]
        struct Discovery {
            issuer: String,
            jwks_uri: String,
        }
        let discovery: Discovery = self.get_json(url).await?;
        let expected = url.as_str().trim_end_matches(DISCOVERY_PATH);
        if discovery.issuer.trim_end_matches('/') != expected.trim_end_matches('/') {
            return Err(format!(
                "{url} names the issuer {:?}, not {expected:?}",
                discovery.issuer
            ));
        }
        provider_url(&discovery.jwks_uri).map_err(|reason| format!("{url}: jwks_uri {reason}"))
    }

    async fn get_json<T: serde::de::DeserializeOwned>(&self, url: &Url) -> Result<T, String> {
        let mut response = self
            .http
            .get(url.clone())
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| format!("{url}: {}", error_chain(&e)))?;
        if !response.status().is_success() {
            return Err(format!("{url} answered {}", response.status()));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| format!("{url}: {}", error_chain(&e)))?
        {
            body.extend_from_slice(&chunk);
            if body.len() > MAX_DOCUMENT_BYTES {
                return Err(format!("{url}: longer than {MAX_DOCUMENT_BYTES} bytes"));
            }
        }
        serde_json::from_slice(&body).map_err(|e| format!("{url}: not the JSON expected: {e}"))
    }
}

/// Why a fetch that went through `previous` may not follow a redirect to `next`: more
/// than 5 hops, a step down from https to http, or a URL [`provider_url`] refuses (plain
/// http off loopback).
fn redirect_refusal(previous: &[Url], next: &Url) -> Option<String> {
    if previous.len() >= 5 {
        return Some("more than 5 redirects".into());
    }
    if previous.iter().any(|u| u.scheme() == "https") && next.scheme() != "https" {
        return Some(format!(
            "an https endpoint redirected to {next}, which is not https"
        ));
    }
    provider_url(next.as_str())
        .err()
        .map(|reason| format!("redirected: {reason}"))
}

fn read(lock: &RwLock<Fetched>) -> std::sync::RwLockReadGuard<'_, Fetched> {
    lock.read().unwrap_or_else(|p| p.into_inner())
}

/// `error` and its sources, as one line (reqwest's own message omits the cause).
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut line = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        line.push_str(": ");
        line.push_str(&cause.to_string());
        source = cause.source();
    }
    line
}

fn describe(location: &JwksLocation) -> String {
    match location {
        JwksLocation::Url(url) | JwksLocation::Discovery(url) => url.to_string(),
    }
}

/// `jwk` as a verification key, or `None` for one that is not (an encryption key, a
/// symmetric key, an algorithm outside [`ALGORITHMS`], unreadable parameters).
fn verification_key(jwk: &Jwk) -> Option<Key> {
    if matches!(jwk.common.public_key_use, Some(ref u) if *u != PublicKeyUse::Signature) {
        return None;
    }
    let algorithm = match jwk.common.key_algorithm {
        None => None,
        Some(alg) => {
            let alg = signature_algorithm(alg)?;
            ALGORITHMS.contains(&alg).then_some(alg)?;
            Some(alg)
        }
    };
    let key = VerifyingKey::from_jwk(jwk)?;
    if algorithm.is_some_and(|alg| !key.fits(alg)) {
        return None;
    }
    Some(Key {
        kid: jwk.common.key_id.clone(),
        algorithm,
        key: Arc::new(key),
    })
}

fn signature_algorithm(alg: KeyAlgorithm) -> Option<Algorithm> {
    Some(match alg {
        KeyAlgorithm::RS256 => Algorithm::RS256,
        KeyAlgorithm::RS384 => Algorithm::RS384,
        KeyAlgorithm::RS512 => Algorithm::RS512,
        KeyAlgorithm::PS256 => Algorithm::PS256,
        KeyAlgorithm::PS384 => Algorithm::PS384,
        KeyAlgorithm::PS512 => Algorithm::PS512,
        KeyAlgorithm::ES256 => Algorithm::ES256,
        KeyAlgorithm::ES384 => Algorithm::ES384,
        KeyAlgorithm::EdDSA => Algorithm::EdDSA,
        _ => return None,
    })
}

/// The key of `keys` for a token naming `kid` (or none) signed with `algorithm`.
///
/// Errors: which key was asked for and not found.
fn pick(
    keys: &[Key],
    kid: Option<&str>,
    algorithm: Algorithm,
) -> Result<Arc<VerifyingKey>, String> {
    let fits = |key: &&Key| key.key.fits(algorithm) && key.algorithm.is_none_or(|a| a == algorithm);
    match kid {
        Some(kid) => keys
            .iter()
            .filter(fits)
            .find(|key| key.kid.as_deref() == Some(kid))
            .map(|key| key.key.clone())
            .ok_or_else(|| format!("has the id {kid:?} for {algorithm:?}")),
        None => {
            let mut fitting = keys.iter().filter(fits);
            match (fitting.next(), fitting.next()) {
                (Some(key), None) => Ok(key.key.clone()),
                (None, _) => Err(format!("is for {algorithm:?}")),
                (Some(_), Some(_)) => Err(format!(
                    "is chosen: the token names no key id and several keys are for {algorithm:?}"
                )),
            }
        }
    }
}
