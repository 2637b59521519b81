//! User administration with its rules (SPEC §3, §5 guards), shared by the web console
//! and the `banlieue-console admin user …` commands: same checks, same audit events.

use std::net::IpAddr;

use banlieue_domain::{BuiltinRole, NameError, Password, PasswordError, RoleName, Roles, UserName};
use banlieue_store::{
    AuditEvent, AuditPage, AuditQuery, NewUser, StoreError, UserPage, UserRecord, UserUpdate,
};
use time::OffsetDateTime;

use crate::accounts::audit_safe;
use crate::{Accounts, IdentityError, generate_password};

/// Who performs an administrative action.
#[derive(Debug, Clone)]
pub enum Actor {
    /// A signed-in person; needs the `admin` role and can only grant roles they hold.
    User {
        user: Box<UserRecord>,
        source: IpAddr,
    },
    /// Someone with a shell on the server (`banlieue-console admin …`): holds every role.
    Operator,
}

impl Actor {
    fn name(&self) -> &str {
        match self {
            Self::User { user, .. } => user.name.as_str(),
            Self::Operator => "operator",
        }
    }

    fn source(&self) -> IpAddr {
        match self {
            Self::User { source, .. } => *source,
            Self::Operator => IpAddr::from([127, 0, 0, 1]),
        }
    }

    fn holds(&self, role: &RoleName) -> bool {
        match self {
            Self::User { user, .. } => user.roles.hold(role.as_str()),
            Self::Operator => true,
        }
    }
}

/// How a new password is chosen by an administrator.
#[derive(Debug, Clone)]
pub enum PasswordChoice {
    /// 24 random characters, shown once.
    Generate,
    /// Typed by the administrator (12–128 bytes after NFC).
    Typed(String),
}

/// Why an administrative action was refused.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error("only admins may manage users")]
    Forbidden,
    #[error("invalid user name: {0}")]
    InvalidName(NameError),
    #[error("invalid roles: {0}")]
    InvalidRoles(NameError),
    #[error("you cannot grant the role {0}, which you do not hold")]
    RoleNotHeld(String),
    #[error("the display name or e-mail is longer than {max} characters")]
    FieldTooLong { max: usize },
    #[error("the password is not acceptable: {0}")]
    InvalidPassword(PasswordError),
    #[error("a user with this name already exists")]
    NameTaken,
    #[error("no such user")]
    NotFound,
    #[error("the user was changed by someone else in the meantime; reload and try again")]
    Conflict,
    #[error("the last enabled admin cannot be disabled, deleted or demoted")]
    LastAdmin,
    #[error("the typed confirmation does not name the user")]
    ConfirmationMismatch,
    #[error(
        "the display name or e-mail contains a character that would let it pass for other text (banlieue_domain::text::disguising_character: an invisible, reordering, unassigned or private-use character such as U+200B, U+202E or U+3164, a variation selector after an ASCII letter, or a mark on nothing)"
    )]
    HiddenCharacters,
    #[error("the e-mail is not an address such as name@example.org")]
    InvalidEmail,
    #[error(transparent)]
    Internal(#[from] IdentityError),
}

impl From<StoreError> for AdminError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::AlreadyExists { .. } => Self::NameTaken,
            StoreError::NotFound { .. } => Self::NotFound,
            StoreError::Conflict { .. } => Self::Conflict,
            StoreError::LastAdmin => Self::LastAdmin,
            other => Self::Internal(other.into()),
        }
    }
}

/// The editable profile of a user, as typed into a form.
#[derive(Debug, Clone, Default)]
pub struct UserProfile {
    pub display_name: String,
    pub email: String,
    /// Role names as typed; validated and de-duplicated here.
    pub roles: Vec<String>,
}

/// Longest display name or e-mail, in characters.
pub const MAX_PROFILE_FIELD: usize = 200;

/// Rows per page of the user list.
pub const USERS_PER_PAGE: i64 = 50;

/// Events per page of the audit log.
pub const AUDIT_PER_PAGE: i64 = 100;

impl Accounts {
    /// One page (0-based) of users matching `search`; past the last page, the last page
    /// (its number is `offset / USERS_PER_PAGE` of the answer).
    pub async fn list_users(
        &self,
        actor: &Actor,
        search: &str,
        page: u32,
    ) -> Result<UserPage, AdminError> {
        require_admin(actor)?;
        let search: String = search.trim().chars().take(100).collect();
        Ok(self
            .store()
            .list_users(&search, i64::from(page) * USERS_PER_PAGE, USERS_PER_PAGE)
            .await?)
    }

    /// The user named `name`.
    pub async fn user(&self, actor: &Actor, name: &str) -> Result<UserRecord, AdminError> {
        require_admin(actor)?;
        let name = UserName::parse(name).map_err(|_| AdminError::NotFound)?;
        self.store()
            .user_by_name(&name)
            .await?
            .ok_or(AdminError::NotFound)
    }

    /// Creates a user who must change the password at first sign-in. Returns the user
    /// and, for [`PasswordChoice::Generate`], the password to show once.
    pub async fn create_user(
        &self,
        actor: &Actor,
        name: &str,
        profile: &UserProfile,
        password: PasswordChoice,
    ) -> Result<(UserRecord, Option<String>), AdminError> {
        self.admit(actor, "user.create", name.trim()).await?;
        let name = UserName::parse(name.trim()).map_err(AdminError::InvalidName)?;
        let roles = self
            .audited_grant(
                actor,
                "user.create",
                name.as_str(),
                &profile.roles,
                &Roles::default(),
            )
            .await?;
        check_profile(profile)?;
        let (password, shown) = choose_password(password)?;
        let phc = self
            .hasher()
            .hash(&password)
            .await
            .map_err(IdentityError::from)?;
        let new = NewUser {
            name,
            display_name: profile.display_name.trim().to_owned(),
            email: profile.email.trim().to_owned(),
            roles,
            must_change_password: true,
        };
        // Written with the user, in its transaction; a refusal is audited on its own.
        let created = success(actor, "user.create", new.name.as_str());
        let result = self
            .store()
            .create_user(&new, &phc, OffsetDateTime::now_utc(), &created)
            .await;
        Ok((self.settle(actor, &[created], result).await?, shown))
    }

    /// Replaces display name, e-mail and roles, if the user is still at `version`.
    /// An admin who created the custom role `role` (as a Kubernetes ClusterRole) takes it
    /// as their own, so that — holding it — they may grant it (SPEC §5: nobody grants a
    /// role they don't hold). Kubernetes already checked that the role's rules are within
    /// the admin's own rights. Not audited here: the role use case records `role.create`.
    /// Errors: [`AdminError::Forbidden`] for anyone but an admin; store errors.
    pub async fn adopt_created_role(
        &self,
        actor: &Actor,
        role: &RoleName,
    ) -> Result<UserRecord, AdminError> {
        require_admin(actor)?;
        let Actor::User { user, .. } = actor else {
            return Err(AdminError::Forbidden);
        };
        let current = self
            .store()
            .user_by_id(user.id)
            .await?
            .ok_or(AdminError::Forbidden)?;
        if current.roles.contains(role.as_str()) {
            return Ok(current);
        }
        let mut roles: Vec<RoleName> = current.roles.iter().cloned().collect();
        roles.push(role.clone());
        let roles = banlieue_domain::Roles::new(roles).map_err(AdminError::InvalidRoles)?;
        let result = self
            .store()
            .update_user(
                current.id,
                current.version,
                &UserUpdate {
                    display_name: &current.display_name,
                    email: &current.email,
                    roles: &roles,
                },
                OffsetDateTime::now_utc(),
                &[],
            )
            .await;
        self.forget(current.id);
        Ok(result?)
    }

    /// After the custom role's ClusterRole was deleted: nobody holds it any more (so a
    /// new role of the same name grants nothing by surprise); returns how many users lost
    /// it. Admins only; not audited here: the role use case records `role.delete`.
    pub async fn forget_deleted_role(
        &self,
        actor: &Actor,
        role: &RoleName,
    ) -> Result<u64, AdminError> {
        require_admin(actor)?;
        let result = self
            .store()
            .remove_role_from_all(role.as_str(), OffsetDateTime::now_utc())
            .await;
        self.forget_all();
        Ok(result?)
    }

    pub async fn update_user(
        &self,
        actor: &Actor,
        name: &str,
        version: i64,
        profile: &UserProfile,
    ) -> Result<UserRecord, AdminError> {
        self.admit(actor, "user.update", name).await?;
        let user = self.user(actor, name).await?;
        let roles = self
            .audited_grant(actor, "user.update", name, &profile.roles, &user.roles)
            .await?;
        check_profile(profile)?;
        let mut events = vec![success(actor, "user.update", name)];
        if roles != user.roles {
            let listed: Vec<&str> = roles.iter().map(RoleName::as_str).collect();
            let mut listing = success(actor, "user.roles", name);
            listing.detail = listed.join(",");
            events.push(listing);
        }
        let result = self
            .store()
            .update_user(
                user.id,
                version,
                &UserUpdate {
                    display_name: profile.display_name.trim(),
                    email: profile.email.trim(),
                    roles: &roles,
                },
                OffsetDateTime::now_utc(),
                &events,
            )
            .await;
        self.forget(user.id);
        Ok(self.settle(actor, &events, result).await?)
    }

    /// Disables (ending every session at once) or enables the user.
    pub async fn set_user_disabled(
        &self,
        actor: &Actor,
        name: &str,
        version: i64,
        disabled: bool,
    ) -> Result<UserRecord, AdminError> {
        let action = if disabled {
            "user.disable"
        } else {
            "user.enable"
        };
        self.admit(actor, action, name).await?;
        let user = self.user(actor, name).await?;
        let event = success(actor, action, name);
        let result = self
            .store()
            .set_user_disabled(
                user.id,
                version,
                disabled,
                OffsetDateTime::now_utc(),
                &event,
            )
            .await;
        self.forget(user.id);
        Ok(self.settle(actor, &[event], result).await?)
    }

    /// Sets a new password that must be changed at next sign-in, and ends the user's
    /// sessions. Returns the generated password to show once.
    pub async fn reset_password(
        &self,
        actor: &Actor,
        name: &str,
        password: PasswordChoice,
    ) -> Result<Option<String>, AdminError> {
        self.admit(actor, "user.password-set", name).await?;
        let user = self.user(actor, name).await?;
        let (password, shown) = choose_password(password)?;
        let phc = self
            .hasher()
            .hash(&password)
            .await
            .map_err(IdentityError::from)?;
        let event = success(actor, "user.password-set", name);
        let result = self
            .store()
            .set_password(user.id, &phc, true, OffsetDateTime::now_utc(), &event)
            .await;
        self.forget(user.id);
        self.settle(actor, &[event], result).await?;
        Ok(shown)
    }

    /// Ends every session and refresh token of the user.
    pub async fn revoke_user_sessions(&self, actor: &Actor, name: &str) -> Result<(), AdminError> {
        self.admit(actor, "user.sessions-revoke", name).await?;
        let user = self.user(actor, name).await?;
        let event = success(actor, "user.sessions-revoke", name);
        let result = self
            .store()
            .revoke_user_sessions(user.id, OffsetDateTime::now_utc(), &event)
            .await;
        self.forget(user.id);
        Ok(self.settle(actor, &[event], result).await?)
    }

    /// Deletes the user, if still at `version`.
    pub async fn delete_user(
        &self,
        actor: &Actor,
        name: &str,
        version: i64,
    ) -> Result<(), AdminError> {
        self.admit(actor, "user.delete", name).await?;
        let user = self.user(actor, name).await?;
        let event = success(actor, "user.delete", name);
        let result = self.store().delete_user(user.id, version, &event).await;
        self.forget(user.id);
        Ok(self.settle(actor, &[event], result).await?)
    }

    /// One page (0-based, [`AUDIT_PER_PAGE`] events) of the audit log, newest first.
    pub async fn audit_log(
        &self,
        actor: &Actor,
        query: &AuditQuery,
        page: u32,
    ) -> Result<AuditPage, AdminError> {
        require_admin(actor)?;
        Ok(self
            .store()
            .query_audit(query, i64::from(page) * AUDIT_PER_PAGE, AUDIT_PER_PAGE)
            .await?)
    }

    /// Ends one of the signed-in user's own sessions ("My sessions"). `false` when the
    /// handle is not one of theirs.
    pub async fn end_own_session(
        &self,
        user: &UserRecord,
        handle: &str,
        source: IpAddr,
    ) -> Result<bool, AdminError> {
        let ended = self.store().delete_user_session(user.id, handle).await?;
        let result = if ended { "success" } else { "not-found" };
        self.audit_event(
            user.name.as_str(),
            "session.revoke",
            user.name.as_str(),
            source,
            result,
            "",
        )
        .await;
        Ok(ended)
    }

    /// "Sign out everywhere": ends every session and token of the signed-in user,
    /// this browser's included.
    pub async fn sign_out_everywhere(
        &self,
        user: &UserRecord,
        source: IpAddr,
    ) -> Result<(), AdminError> {
        let name = user.name.as_str();
        let event = AuditEvent::now(name, "session.revoke-all", name, source, "success", "");
        let result = self
            .store()
            .revoke_user_sessions(user.id, OffsetDateTime::now_utc(), &event)
            .await;
        self.forget(user.id);
        match &result {
            Ok(()) => self.audited(&event),
            Err(_) => {
                self.audit_event(name, "session.revoke-all", name, source, "error", "")
                    .await
            }
        }
        Ok(result?)
    }

    /// Refuses anyone but an admin with [`AdminError::Forbidden`], recording the refused
    /// `action` on `target` in the audit log (a forged request from someone who is not an
    /// admin; `target` as typed, cut to a name's length and without control characters).
    /// Every user action calls it first; a caller that checks something of its own
    /// before the action (a typed confirmation) calls it before that.
    pub async fn admit(&self, actor: &Actor, action: &str, target: &str) -> Result<(), AdminError> {
        let admitted = require_admin(actor);
        if admitted.is_err() {
            self.audit_detail(actor, action, &audit_safe(target), "forbidden", "")
                .await;
        }
        admitted
    }

    /// [`grantable_roles`], with a refused grant recorded in the audit log.
    async fn audited_grant(
        &self,
        actor: &Actor,
        action: &str,
        target: &str,
        requested: &[String],
        current: &Roles,
    ) -> Result<Roles, AdminError> {
        let granted = grantable_roles(actor, requested, current);
        if let Err(AdminError::RoleNotHeld(role)) = &granted {
            self.audit_detail(actor, action, target, "role-not-held", role)
                .await;
        }
        granted
    }

    /// After a write that carried `events` in its transaction: counts them, or, when it
    /// failed, audits the failure of the first one's action on its own.
    async fn settle<T>(
        &self,
        actor: &Actor,
        events: &[AuditEvent],
        result: Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        match &result {
            Ok(_) => events.iter().for_each(|event| self.audited(event)),
            Err(_) => {
                if let Some(event) = events.first() {
                    self.audit_result(actor, &event.action, &event.target, &result)
                        .await;
                }
            }
        }
        result
    }

    async fn audit_result<T>(
        &self,
        actor: &Actor,
        action: &str,
        target: &str,
        result: &Result<T, StoreError>,
    ) {
        let outcome = match result {
            Ok(_) => "success",
            Err(StoreError::AlreadyExists { .. }) => "name-taken",
            Err(StoreError::Conflict { .. }) => "conflict",
            Err(StoreError::NotFound { .. }) => "not-found",
            Err(StoreError::LastAdmin) => "last-admin",
            Err(_) => "error",
        };
        self.audit_detail(actor, action, target, outcome, "").await;
    }

    async fn audit_detail(
        &self,
        actor: &Actor,
        action: &str,
        target: &str,
        result: &str,
        detail: &str,
    ) {
        self.audit_event(actor.name(), action, target, actor.source(), result, detail)
            .await;
    }
}

/// The event of `actor`'s successful `action` on `target`, written with the change.
fn success(actor: &Actor, action: &str, target: &str) -> AuditEvent {
    AuditEvent::now(actor.name(), action, target, actor.source(), "success", "")
}

fn require_admin(actor: &Actor) -> Result<(), AdminError> {
    match actor {
        Actor::User { user, .. }
            if user.roles.contains(BuiltinRole::Admin.as_str()) && !user.disabled =>
        {
            Ok(())
        }
        Actor::User { .. } => Err(AdminError::Forbidden),
        Actor::Operator => Ok(()),
    }
}

/// Validates `requested` and refuses any role the actor does not hold, unless the target
/// already holds it (keeping a role is not granting it).
fn grantable_roles(
    actor: &Actor,
    requested: &[String],
    current: &Roles,
) -> Result<Roles, AdminError> {
    let parsed = requested
        .iter()
        .map(|r| r.trim())
        .filter(|r| !r.is_empty())
        .map(RoleName::parse)
        .collect::<Result<Vec<_>, _>>()
        .map_err(AdminError::InvalidRoles)?;
    let roles = Roles::new(parsed).map_err(AdminError::InvalidRoles)?;
    for role in roles.iter() {
        if !actor.holds(role) && !current.contains(role.as_str()) {
            return Err(AdminError::RoleNotHeld(role.to_string()));
        }
    }
    Ok(roles)
}

fn check_profile(profile: &UserProfile) -> Result<(), AdminError> {
    // A display name is shown to other people: one that reads as someone else's (`zw1` as
    // "admin") is refused.
    let hides = |text: &str| banlieue_domain::text::disguising_character(text).is_some();
    if hides(&profile.display_name) || hides(&profile.email) {
        return Err(AdminError::HiddenCharacters);
    }
    let too_long = |s: &str| s.trim().chars().count() > MAX_PROFILE_FIELD;
    if too_long(&profile.display_name) || too_long(&profile.email) {
        return Err(AdminError::FieldTooLong {
            max: MAX_PROFILE_FIELD,
        });
    }
    let email = profile.email.trim();
    if !email.is_empty() && !is_email_address(email) {
        return Err(AdminError::InvalidEmail);
    }
    Ok(())
}

/// Whether `email` is a bare addr-spec (RFC 5322 §3.4.1) with a dotted domain: no
/// display name (`Alice <a@example.org>`), no address literal (`a@[192.0.2.1]`).
fn is_email_address(email: &str) -> bool {
    let options = email_address::Options::default()
        .without_display_text()
        .without_domain_literal()
        .with_required_tld();
    email_address::EmailAddress::parse_with_options(email, options).is_ok()
}

fn choose_password(choice: PasswordChoice) -> Result<(Password, Option<String>), AdminError> {
    match choice {
        PasswordChoice::Generate => {
            let generated = generate_password();
            let password = Password::new_secret(&generated).expect("24 characters");
            Ok((password, Some(generated)))
        }
        PasswordChoice::Typed(typed) => Ok((
            Password::new_secret(&typed).map_err(AdminError::InvalidPassword)?,
            None,
        )),
    }
}
