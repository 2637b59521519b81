use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use banlieue_domain::{BuiltinRole, Password, PasswordError, RoleName, Roles, UserName};
use banlieue_store::{AuditEvent, NewUser, Store, StoreError, UserRecord, UserSession};
use rand::Rng;
use rand::distributions::Alphanumeric;
use time::OffsetDateTime;

use crate::HashLane;
use crate::throttle::Attempt;
use crate::{HashError, IdentityMetrics, PasswordHasher, SignInThrottle, ThrottlePolicy};

/// Failures that are nobody's input mistake: the database or the hasher broke.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Hash(#[from] HashError),
    #[error("an enabled admin already exists; bootstrap refused")]
    AdminExists,
}

/// Why a sign-in failed. Unknown user, disabled user, missing credential and wrong
/// password are all [`SignInError::InvalidCredentials`] (no user enumeration).
#[derive(Debug, thiserror::Error)]
pub enum SignInError {
    #[error("too many failed sign-ins; retry after {retry_after:?}")]
    Throttled { retry_after: Duration },
    /// The password hasher's queue is full ([`HashError::Busy`]); nothing was checked.
    #[error("too many password checks are waiting; retry after {retry_after:?}")]
    Busy { retry_after: Duration },
    #[error("invalid user name or password")]
    InvalidCredentials,
    #[error("the password is longer than {} bytes", Password::MAX_BYTES)]
    PasswordTooLong,
    #[error(transparent)]
    Internal(#[from] IdentityError),
}

/// Why changing one's own password failed.
#[derive(Debug, thiserror::Error)]
pub enum ChangePasswordError {
    #[error("too many failed attempts; retry after {retry_after:?}")]
    Throttled { retry_after: Duration },
    /// The password hasher's queue is full ([`HashError::Busy`]); nothing was changed.
    #[error("too many password checks are waiting; retry after {retry_after:?}")]
    Busy { retry_after: Duration },
    #[error("the current password is wrong")]
    WrongCurrentPassword,
    /// The new password equals the current one (after an administrator set it, they know
    /// it, so keeping it defeats the forced change).
    #[error("the new password is the current one")]
    Unchanged,
    #[error("the new password is not acceptable: {0}")]
    InvalidNewPassword(PasswordError),
    #[error(transparent)]
    Internal(#[from] IdentityError),
}

impl From<StoreError> for ChangePasswordError {
    fn from(e: StoreError) -> Self {
        Self::Internal(e.into())
    }
}
impl From<HashError> for ChangePasswordError {
    fn from(e: HashError) -> Self {
        Self::Internal(e.into())
    }
}
impl From<StoreError> for SignInError {
    fn from(e: StoreError) -> Self {
        Self::Internal(e.into())
    }
}
impl From<HashError> for SignInError {
    fn from(e: HashError) -> Self {
        Self::Internal(e.into())
    }
}

/// One sign-in attempt as typed into the form.
#[derive(Debug, Clone, Copy)]
pub struct SignInAttempt<'a> {
    pub user_name: &'a str,
    pub password: &'a str,
    pub source: IpAddr,
}

/// What a browser session holds after sign-in: whose it is, since when, and the handle of
/// its row in "My sessions" (deleting that row ends the session).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SessionGrant {
    pub user_id: i64,
    /// 128 random bits, hex.
    pub handle: String,
    /// Milliseconds since the Unix epoch: the session is dead once the user's
    /// `not_before` passes it.
    pub auth_time_ms: i64,
}

impl SessionGrant {
    pub fn auth_time(&self) -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp_nanos(i128::from(self.auth_time_ms) * 1_000_000)
            .unwrap_or(OffsetDateTime::UNIX_EPOCH)
    }
}

/// How often a session's "last seen" is written, at most.
const LAST_SEEN_GRANULARITY: time::Duration = time::Duration::minutes(1);

/// Users and their credentials: sign-in, password changes, the first admin and session
/// validity. One per process, shared by every request.
#[derive(Debug)]
pub struct Accounts {
    store: Store,
    hasher: PasswordHasher,
    throttle: SignInThrottle,
    cache: Mutex<HashMap<i64, (Instant, UserRecord)>>,
    cache_ttl: Duration,
    session_lifetime: time::Duration,
    metrics: Arc<IdentityMetrics>,
    busy: Mutex<BusyRefusals>,
    /// Per person: their refused cross-site requests ([`Accounts::audit_cross_site`]).
    cross_site: Mutex<HashMap<String, BusyRefusals>>,
}

/// The most people whose cross-site refusals are remembered at once; past it, the
/// entries whose window ended are forgotten (they would be audited anyway).
const CROSS_SITE_PEOPLE: usize = 10_000;

/// This replica's sign-ins refused by a full hash queue, for their audit rows: a flood of
/// fresh names from fresh addresses, which no throttle key summarises, would otherwise
/// write a row per request.
#[derive(Debug, Default)]
struct BusyRefusals {
    last_audited: Option<Instant>,
    /// Refusals since the last audited one.
    unaudited: u32,
}

impl BusyRefusals {
    /// `Some(n)` when the refusal at `now` is audited (the first of its
    /// [`THROTTLED_AUDIT_WINDOW`](crate::THROTTLED_AUDIT_WINDOW)), `n` being the refusals
    /// not audited since the last row; `None`: counted, not written.
    fn refused(&mut self, now: Instant) -> Option<u32> {
        let due = self
            .last_audited
            .is_none_or(|last| now.duration_since(last) >= crate::THROTTLED_AUDIT_WINDOW);
        if !due {
            self.unaudited = self.unaudited.saturating_add(1);
            return None;
        }
        self.last_audited = Some(now);
        Some(std::mem::take(&mut self.unaudited))
    }
}

/// How long a request may trust a cached user before re-reading it (SPEC §3: ≤ 10 s).
pub const USER_CACHE_TTL: Duration = Duration::from_secs(10);

/// How long a browser session lasts from its sign-in, however active (the inactivity
/// timeout may end it sooner), unless [`Accounts::with_session_lifetime`] says otherwise.
pub const SESSION_LIFETIME: time::Duration = time::Duration::hours(12);

/// The actor name audit events use for the console itself.
const SYSTEM_ACTOR: &str = "system";

impl Accounts {
    pub fn new(store: Store, hasher: PasswordHasher, throttle: ThrottlePolicy) -> Self {
        Self {
            throttle: SignInThrottle::new(throttle, store.clone()),
            store,
            hasher,
            cache: Mutex::new(HashMap::new()),
            cache_ttl: USER_CACHE_TTL,
            session_lifetime: SESSION_LIFETIME,
            metrics: Arc::default(),
            busy: Mutex::default(),
            cross_site: Mutex::default(),
        }
    }

    /// Replaces [`SESSION_LIFETIME`]: a session signed in longer ago ends, and the person
    /// signs in again.
    pub fn with_session_lifetime(mut self, lifetime: time::Duration) -> Self {
        self.session_lifetime = lifetime;
        self
    }

    /// Replaces [`USER_CACHE_TTL`]; tests use zero to see every change at once.
    pub fn with_user_cache_ttl(mut self, ttl: Duration) -> Self {
        self.cache_ttl = ttl.min(USER_CACHE_TTL);
        self
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn hasher(&self) -> &PasswordHasher {
        &self.hasher
    }

    /// Deletes the sign-in back-off's rows that no longer count at `now`
    /// ([`SignInThrottle::prune`]); returns how many went.
    pub async fn prune_sign_in_backoff(&self, now: OffsetDateTime) -> Result<u64, StoreError> {
        self.throttle.prune(now).await
    }

    /// The counters of sign-ins, tokens issued and refresh reuse, fed by every audit event
    /// this service writes; register them to export them.
    pub fn metrics(&self) -> &Arc<IdentityMetrics> {
        &self.metrics
    }

    /// Checks a user name and password. Every path that reaches the password check costs
    /// exactly one argon2id verification, whether the user exists or not; a throttled
    /// attempt, a full hash queue or an over-long password costs none and reveals nothing
    /// about the user. Every attempt is audited, except that the refusals of one throttled
    /// key, and those of a full hash queue, write one row per
    /// [`THROTTLED_AUDIT_WINDOW`](crate::THROTTLED_AUDIT_WINDOW) and replica (which counts
    /// the others); the metrics count every attempt.
    pub async fn sign_in(&self, attempt: SignInAttempt<'_>) -> Result<UserRecord, SignInError> {
        let target = audit_safe(attempt.user_name);
        let admission = self
            .throttle
            .admit(attempt.user_name, attempt.source, OffsetDateTime::now_utc())
            .await;
        let admitted = match admission {
            Ok(Ok(admitted)) => admitted,
            Err(error) => {
                self.audit("-", SIGN_IN, &target, attempt.source, "error")
                    .await;
                return Err(error.into());
            }
            Ok(Err(throttled)) => {
                match throttled.audit {
                    Some(unaudited) => {
                        let detail = if unaudited == 0 {
                            String::new()
                        } else {
                            format!("{unaudited} more refused since the last row")
                        };
                        self.audit_event("-", SIGN_IN, &target, attempt.source, THROTTLED, &detail)
                            .await;
                    }
                    None => self.metrics.observe(SIGN_IN, THROTTLED),
                }
                return Err(SignInError::Throttled {
                    retry_after: throttled.retry_after,
                });
            }
        };
        let result = self.check_credentials(attempt, admitted).await;
        let outcome = match &result {
            Ok(_) => "success",
            Err(SignInError::Throttled { .. }) => THROTTLED,
            Err(SignInError::Busy { .. }) => "busy",
            Err(SignInError::InvalidCredentials | SignInError::PasswordTooLong) => {
                "invalid-credentials"
            }
            Err(SignInError::Internal(_)) => "error",
        };
        let actor = match &result {
            Ok(user) => user.name.to_string(),
            Err(_) => "-".to_owned(),
        };
        if matches!(result, Err(SignInError::Busy { .. })) {
            let audited = self
                .busy
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .refused(Instant::now());
            match audited {
                Some(0) => {
                    self.audit(&actor, SIGN_IN, &target, attempt.source, outcome)
                        .await
                }
                Some(unaudited) => {
                    let detail = format!("{unaudited} more refused since the last row");
                    self.audit_event(&actor, SIGN_IN, &target, attempt.source, outcome, &detail)
                        .await
                }
                None => self.metrics.observe(SIGN_IN, outcome),
            }
            return result;
        }
        self.audit(&actor, SIGN_IN, &target, attempt.source, outcome)
            .await;
        result
    }

    /// The password check of an admitted attempt, which it reports to the throttle.
    async fn check_credentials(
        &self,
        attempt: SignInAttempt<'_>,
        admitted: Attempt,
    ) -> Result<UserRecord, SignInError> {
        let Ok(password) = Password::presented(attempt.password) else {
            admitted.failed().await;
            return Err(SignInError::PasswordTooLong);
        };
        let lane = admitted.hash_lane();
        let checked = match self.load_credential(attempt.user_name).await {
            Ok(Some((user, phc))) => self
                .hasher
                .verify(&password, &phc, lane)
                .await
                .map(|ok| ok.then_some((user, phc))),
            Ok(None) => self
                .hasher
                .verify_dummy(&password, lane)
                .await
                .map(|()| None),
            Err(error) => {
                admitted.unchecked().await;
                return Err(IdentityError::from(error).into());
            }
        };
        let (user, phc) = match checked {
            Ok(Some(verified)) => verified,
            Ok(None) => {
                admitted.failed().await;
                return Err(SignInError::InvalidCredentials);
            }
            Err(HashError::Busy { retry_after }) => {
                admitted.unchecked().await;
                return Err(SignInError::Busy { retry_after });
            }
            Err(error) => {
                admitted.unchecked().await;
                return Err(IdentityError::from(error).into());
            }
        };
        admitted.succeeded().await;
        let now = OffsetDateTime::now_utc();
        if self.hasher.needs_rehash(&phc) {
            // Opportunistic: with the hasher busy, the next sign-in rehashes.
            match self.hasher.hash(&password).await {
                Ok(fresh) => self.store.rehash_password(user.id, &fresh, now).await?,
                Err(HashError::Busy { .. }) => {}
                Err(error) => return Err(IdentityError::from(error).into()),
            }
        }
        self.store.record_sign_in(user.id, now).await?;
        Ok(user)
    }

    /// The enabled user named `raw` and their password hash, or `None`.
    async fn load_credential(&self, raw: &str) -> Result<Option<(UserRecord, String)>, StoreError> {
        let Ok(name) = UserName::parse(raw) else {
            return Ok(None);
        };
        let Some(user) = self.store.user_by_name(&name).await? else {
            return Ok(None);
        };
        if user.disabled {
            return Ok(None);
        }
        Ok(self
            .store
            .password_phc(user.id)
            .await?
            .map(|phc| (user, phc)))
    }

    /// Changes the signed-in user's own password: checks the current one, sets the new
    /// one, clears must-change and moves `not_before` to `now`, which ends every other
    /// session (the caller re-stamps its own session with `now`). Returns the updated user.
    pub async fn change_password(
        &self,
        user: &UserRecord,
        current: &str,
        new: &str,
        source: IpAddr,
        now: OffsetDateTime,
    ) -> Result<UserRecord, ChangePasswordError> {
        let name = user.name.as_str();
        let admitted = self
            .throttle
            .admit(name, source, now)
            .await?
            .map_err(|throttled| ChangePasswordError::Throttled {
                retry_after: throttled.retry_after,
            })?;
        let new = match Password::new_secret(new) {
            Ok(new) => new,
            Err(error) => {
                admitted.unchecked().await;
                return Err(ChangePasswordError::InvalidNewPassword(error));
            }
        };
        let stored = match self.store.password_phc(user.id).await {
            Ok(stored) => stored,
            Err(error) => {
                admitted.unchecked().await;
                return Err(error.into());
            }
        };
        let current_ok = match (Password::presented(current), stored) {
            // A signed-in person's: never behind an anonymous flood.
            (Ok(current), Some(phc)) => {
                match self.hasher.verify(&current, &phc, HashLane::Known).await {
                    Ok(ok) => ok,
                    Err(error) => {
                        admitted.unchecked().await;
                        return Err(busy_or_internal(error));
                    }
                }
            }
            _ => false,
        };
        if !current_ok {
            admitted.failed().await;
            self.audit(name, "user.password-change", name, source, "wrong-password")
                .await;
            return Err(ChangePasswordError::WrongCurrentPassword);
        }
        admitted.succeeded().await;
        if Password::presented(current).is_ok_and(|current| current == new) {
            return Err(ChangePasswordError::Unchanged);
        }
        let phc = self.hasher.hash(&new).await.map_err(busy_or_internal)?;
        // Every session dies with `not_before`; their rows go too (the caller opens a
        // fresh one for the browser that made the change).
        let changed = AuditEvent::now(name, "user.password-change", name, source, "success", "");
        let updated = self
            .store
            .set_password(user.id, &phc, false, now, &changed)
            .await;
        self.forget(user.id);
        match &updated {
            Ok(_) => self.audited(&changed),
            Err(_) => {
                self.audit(name, "user.password-change", name, source, "error")
                    .await
            }
        }
        Ok(updated?)
    }

    /// Creates the first admin, `admin` with role admin and must-change set, and returns
    /// its generated password (24 characters; stored nowhere but as a hash).
    ///
    /// Errors: [`IdentityError::AdminExists`] when an enabled admin exists;
    /// `Store(AlreadyExists)` when a user named `admin` exists without being one.
    pub async fn bootstrap_admin(&self) -> Result<String, IdentityError> {
        if self
            .store
            .enabled_user_with_role_exists(BuiltinRole::Admin.as_str())
            .await?
        {
            return Err(IdentityError::AdminExists);
        }
        let password = generate_password();
        let phc = self
            .hasher
            .hash(&Password::presented(&password).expect("generated passwords are short"))
            .await?;
        let admin = NewUser {
            name: UserName::parse("admin").expect("constant name"),
            display_name: String::new(),
            email: String::new(),
            roles: Roles::new(vec![
                RoleName::parse(BuiltinRole::Admin.as_str()).expect("constant role"),
            ])
            .expect("one role"),
            must_change_password: true,
        };
        let created = AuditEvent::now(
            SYSTEM_ACTOR,
            "user.create",
            "admin",
            IpAddr::from([127, 0, 0, 1]),
            "success",
            "",
        );
        self.store
            .create_user(&admin, &phc, OffsetDateTime::now_utc(), &created)
            .await?;
        self.audited(&created);
        Ok(password)
    }

    /// Opens a browser session for `user` (after a sign-in or a password change): records
    /// it in "My sessions" and returns what the session cookie's record keeps.
    pub async fn open_session(
        &self,
        user: &UserRecord,
        source: IpAddr,
        user_agent: &str,
        now: OffsetDateTime,
    ) -> Result<SessionGrant, StoreError> {
        let handle = random_handle();
        self.store
            .insert_user_session(&UserSession {
                handle: handle.clone(),
                user_id: user.id,
                created_at: now,
                last_seen_at: now,
                source_ip: source.to_string(),
                user_agent: user_agent.chars().take(256).collect(),
            })
            .await?;
        Ok(SessionGrant {
            user_id: user.id,
            handle,
            auth_time_ms: i64::try_from(now.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MAX),
        })
    }

    /// The user of a session, or `None` when it has ended: revoked (its row is gone), its
    /// sign-in is older than the session lifetime (the row is deleted then), the user is
    /// gone or disabled, or `not_before` moved past its sign-in. The user is read
    /// at most every [`USER_CACHE_TTL`] (or the shorter TTL set), so a disable made by
    /// another replica ends the session within that time (at once on this replica); the
    /// session row is read on every request, so a revocation takes effect at once.
    pub async fn check_session(
        &self,
        grant: &SessionGrant,
        source: IpAddr,
    ) -> Result<Option<UserRecord>, StoreError> {
        let Some(row) = self.store.user_session(&grant.handle).await? else {
            return Ok(None);
        };
        if row.user_id != grant.user_id {
            return Ok(None);
        }
        let now = OffsetDateTime::now_utc();
        if now - grant.auth_time() >= self.session_lifetime {
            self.close_session(grant).await?;
            return Ok(None);
        }
        let Some(user) = self.cached_user(grant.user_id).await? else {
            return Ok(None);
        };
        if user.disabled || grant.auth_time() < user.not_before {
            return Ok(None);
        }
        if now - row.last_seen_at >= LAST_SEEN_GRANULARITY {
            self.store
                .touch_user_session(&grant.handle, now, &source.to_string())
                .await?;
        }
        Ok(Some(user))
    }

    /// Ends one session.
    pub async fn close_session(&self, grant: &SessionGrant) -> Result<(), StoreError> {
        self.store
            .delete_user_session(grant.user_id, &grant.handle)
            .await?;
        Ok(())
    }

    /// `name` signs out from `source`: ends the session of `grant`, audited
    /// `session.sign-out`.
    pub async fn sign_out(
        &self,
        grant: &SessionGrant,
        name: &str,
        source: IpAddr,
    ) -> Result<(), StoreError> {
        self.close_session(grant).await?;
        self.audit_event(name, "session.sign-out", name, source, "success", "")
            .await;
        Ok(())
    }

    async fn cached_user(&self, user_id: i64) -> Result<Option<UserRecord>, StoreError> {
        let cached = self
            .cache_lock()
            .get(&user_id)
            .filter(|(at, _)| at.elapsed() < self.cache_ttl)
            .map(|(_, user)| user.clone());
        if cached.is_some() {
            return Ok(cached);
        }
        let fresh = self.store.user_by_id(user_id).await?;
        let mut cache = self.cache_lock();
        match &fresh {
            Some(user) => {
                cache.insert(user_id, (Instant::now(), user.clone()));
            }
            None => {
                cache.remove(&user_id);
            }
        }
        Ok(fresh)
    }

    /// Drops the cached copy of a user after this process changed it.
    /// Drops every cached user (a change that touched many).
    pub fn forget_all(&self) {
        self.cache_lock().clear();
    }

    pub fn forget(&self, user_id: i64) {
        self.cache_lock().remove(&user_id);
    }

    fn cache_lock(&self) -> std::sync::MutexGuard<'_, HashMap<i64, (Instant, UserRecord)>> {
        self.cache
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Appends an audit event; a failure to write it is logged, never hidden.
    pub async fn audit(
        &self,
        actor: &str,
        action: &str,
        target: &str,
        source: IpAddr,
        result: &str,
    ) {
        self.audit_event(actor, action, target, source, result, "")
            .await;
    }

    /// Appends an audit event with a detail ([`Self::write_audit`]).
    pub async fn audit_event(
        &self,
        actor: &str,
        action: &str,
        target: &str,
        source: IpAddr,
        result: &str,
        detail: &str,
    ) {
        self.write_audit(&AuditEvent::now(
            actor, action, target, source, result, detail,
        ))
        .await;
    }

    /// Audits a cross-site request refused while it carried `actor`'s session
    /// (`request.cross-site`, result `refused`, `target` `<method> <path>`, `detail` where
    /// the browser said it came from): at most one row per person per
    /// [`THROTTLED_AUDIT_WINDOW`](crate::THROTTLED_AUDIT_WINDOW), the next saying how
    /// many were refused unwritten meanwhile. A hostile page the person visits can fire
    /// such requests without end; it must not fill the log under their name.
    pub async fn audit_cross_site(&self, actor: &str, target: &str, source: IpAddr, detail: &str) {
        let now = Instant::now();
        let audited = {
            let mut people = self
                .cross_site
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            if people.len() >= CROSS_SITE_PEOPLE {
                people.retain(|_, refusals| {
                    refusals.last_audited.is_some_and(|last| {
                        now.duration_since(last) < crate::THROTTLED_AUDIT_WINDOW
                    })
                });
            }
            people.entry(actor.to_owned()).or_default().refused(now)
        };
        const ACTION: &str = "request.cross-site";
        match audited {
            Some(0) => {
                self.audit_event(actor, ACTION, target, source, "refused", detail)
                    .await
            }
            Some(unaudited) => {
                let detail = format!("{detail}; {unaudited} more refused since the last row");
                self.audit_event(actor, ACTION, target, source, "refused", &detail)
                    .await
            }
            None => self.metrics.observe(ACTION, "refused"),
        }
    }

    /// Appends `event` and counts it in [`Accounts::metrics`] (whether or not the write
    /// succeeds: the event happened).
    pub(crate) async fn write_audit(&self, event: &AuditEvent) {
        self.audited(event);
        if let Err(error) = self.store.append_audit(event).await {
            tracing::error!(%error, action = event.action, "cannot write audit event");
        }
    }

    /// Counts `event` in [`Accounts::metrics`]: every audit event is counted here, those
    /// written by [`Self::audit_event`] and those a caller writes in the transaction of
    /// the action they record ([`AuditEvent::now`]).
    pub(crate) fn audited(&self, event: &AuditEvent) {
        self.metrics.observe(&event.action, &event.result);
    }
}

/// A hasher failure of a password change: a full queue is the caller's to retry.
fn busy_or_internal(error: HashError) -> ChangePasswordError {
    match error {
        HashError::Busy { retry_after } => ChangePasswordError::Busy { retry_after },
        other => ChangePasswordError::Internal(other.into()),
    }
}

/// The audit action of a sign-in attempt.
const SIGN_IN: &str = "session.sign-in";

/// The audit result, and metrics label, of a refused attempt.
const THROTTLED: &str = "throttled";

/// A typed name as it may appear in the audit log: at most 64 characters, no control
/// characters (log injection).
pub(crate) fn audit_safe(raw: &str) -> String {
    raw.chars()
        .filter(|c| !c.is_control())
        .take(UserName::MAX_LEN + 1)
        .collect()
}

/// 128 random bits from the OS RNG, as 32 hex digits.
fn random_handle() -> String {
    let bytes: [u8; 16] = rand::rngs::OsRng.r#gen();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A fresh random password: 24 characters of `[A-Za-z0-9]` from the OS RNG
/// (≈ 142 bits of entropy).
pub fn generate_password() -> String {
    rand::rngs::OsRng
        .sample_iter(&Alphanumeric)
        .take(24)
        .map(char::from)
        .collect()
}
