app-name = banlieue console
app-tagline = Sandbox virtual machines on demand

## Language switch
language-label = Language
language-en = English
language-ja = 日本語

## Theme switch
theme-label = Theme
theme-system = System
theme-light = Light
theme-dark = Dark

## Sign-in card
sign-in-title = Sign in
sign-in-user-name = User name
sign-in-password = Password
sign-in-submit = Sign in
sign-in-submitting = Signing in…

## Forced and voluntary password change
change-password-title = Change your password
change-password-required = This password was meant for one sign-in only. Choose your own before you continue.
change-password-current = Current password
change-password-new = New password
change-password-confirm = Repeat the new password
change-password-hint = 12 to 128 bytes (a Latin letter is one byte, a Japanese character three). A long passphrase beats a complex word.
change-password-submit = Change password

## Header and dashboard
skip-to-content = Skip to content
nav-dashboard = Dashboard
nav-change-password = Change password
sign-out = Sign out
signed-in-as = Signed in as { $name }
session-ended = Your session has ended.
session-ended-sign-in = Sign in again
dashboard-title = Dashboard
dashboard-welcome = Welcome, { $name }.
dashboard-empty-title = No sandboxes yet
dashboard-empty-body = Pools and your claimed sandboxes will appear here.
not-found-title = Page not found
not-found-body = There is nothing at this address.
not-found-home = Go to the dashboard

## Errors
error-invalid-credentials = The user name or password is wrong.
error-throttled = Too many failed attempts. Try again in { $seconds ->
    [one] one second
   *[other] { $seconds } seconds
}.
error-busy = The console is checking many passwords right now. Try again in { $seconds ->
    [one] one second
   *[other] { $seconds } seconds
}.
error-password-too-long = Passwords are at most 128 bytes long.
error-password-too-short = The new password must be at least 12 bytes long.
error-missing-user-name = Enter your user name.
error-passwords-differ = The two new passwords are not the same.
error-wrong-current-password = The current password is wrong.
error-invalid-form = The form could not be read. Reload the page and try again.
error-request-too-large = The form was too large to accept.
error-cross-site = This request came from another site and was refused.
error-not-signed-in = Sign in to continue.
error-page-sign-in = Sign in
error-page-change-password = Change your password
error-must-change-password = Change your password before doing anything else.
error-internal = Something went wrong on our side. Reference: { $reference }
error-cluster-unavailable = The Kubernetes cluster did not answer in time. Try again in a moment. Reference: { $reference }
error-forbidden = You do not have the right to do this.
error-not-found = There is no such user.
error-invalid-user-name = User names are 1 to 63 lower-case letters, digits or '-', starting with a letter and not ending with '-'.
error-invalid-roles = Role names are lower-case letters, digits or '-', starting with a letter, at most 31 characters; at most 16 roles.
error-role-not-held = You cannot grant the role { $role }, which you do not hold.
error-field-too-long = The display name and the e-mail are at most 200 characters.
error-name-taken = A user with this name already exists.
error-conflict = Someone else changed this user meanwhile. The page now shows their version; make your change again.
error-role-exists = A role with this name exists. Choose another name, or edit that role from the list.
error-role-changed = Someone else changed this role meanwhile. The form now shows their version; make your change again.
error-last-admin = The last enabled admin cannot be disabled, deleted or lose the admin role.
error-confirmation-mismatch = Type the user's name exactly to confirm.
error-invalid-date = Dates are written YYYY-MM-DD.

error-password-unchanged = The new password must differ from the current one.
error-hidden-characters = The display name and the e-mail may not contain characters that would let them pass for other text: invisible or reordering characters (control characters, zero-width spaces, right-to-left overrides, line separators, blank letters), variation selectors after plain letters, or accents on nothing.
error-invalid-email = The e-mail is not an address such as name@example.org.
error-method-not-allowed = This address only takes a form submission. Go back and use the page's buttons.

## Notices
notice-user-created = User created.
notice-user-saved = Changes saved.
notice-user-disabled = User disabled; their sessions have ended.
notice-user-enabled = User enabled.
notice-password-reset = Password reset. The user must change it at the next sign-in; their sessions have ended.
notice-sessions-revoked = All sessions of this user have ended.
notice-user-deleted = User { $name } deleted.
notice-session-revoked = Session ended.

## Navigation
nav-users = Users
nav-account = My account
nav-audit = Audit log

## Users
users-title = Users
users-search = Search
users-search-placeholder = Name, display name or e-mail
users-search-submit = Search
users-empty = No user matches.
users-count = { $total ->
    [one] one user
   *[other] { $total } users
}
users-col-name = Name
users-col-display-name = Display name
users-col-email = E-mail
users-col-roles = Roles
users-col-tenant = Tenant
users-col-state = State
users-col-last-sign-in = Last sign-in
users-never = never
state-active = active
state-disabled = disabled
state-must-change = must change password
pager-previous = Previous
pager-next = Next
pager-position = Page { $page } of { $pages }
user-create-title = Create a user
user-field-name = User name
user-field-display-name = Display name
user-field-email = E-mail
user-field-roles = Roles
user-field-roles-hint = Each built-in role includes the ones before it: viewer, developer, operator, admin. You may give only roles you hold.
user-password-generate = Generate a password (shown once)
user-password-typed = Set this password:
user-create-submit = Create user
user-shown-password-title = The new password, shown once
user-shown-password-body = Give it to { $name } over a safe channel. They must change it at their first sign-in. It is not stored and will not be shown again.
user-copy = Copy
user-edit-title = Profile and roles
user-save = Save changes
user-actions-title = Actions
user-disable = Disable user
user-enable = Enable user
user-reset-password = Reset password
user-reset-password-open = Reset password…
user-reset-password-hint = { $name }'s sessions end at once, and { $name } must choose a new password at the next sign-in.
user-revoke-sessions = End all sessions
user-delete-title = Delete user
user-delete-hint = Type { $name } to confirm. This cannot be undone.
user-delete-confirm = User name to confirm
user-delete-submit = Delete user
user-back = Back to users

## My account
account-title = My account
account-change-password = Change password
account-sessions-title = My sessions
account-sessions-col-created = Signed in
account-sessions-col-last-seen = Last seen
account-sessions-col-ip = Address
account-sessions-col-agent = Browser
account-session-current = this browser
account-session-revoke = End
account-sign-out-everywhere = Sign out everywhere

## Audit log
audit-title = Audit log
audit-filter-actor = Actor
audit-filter-action = Action
audit-filter-target = Target
audit-filter-result = Result
audit-filter-since = From (UTC)
audit-filter-until = To (UTC)
audit-filter-submit = Filter
audit-empty = No event matches.
audit-col-at = When (UTC)
audit-col-ip = Address

# The audit log's action and result codes, shown beside their code.
audit-action-session-sign-in = Sign-in
audit-action-session-sign-out = Sign-out
audit-action-session-revoke = Session ended
audit-action-session-revoke-all = Signed out everywhere
audit-action-user-create = User created
audit-action-user-update = Profile changed
audit-action-user-roles = Roles changed
audit-action-user-disable = User disabled
audit-action-user-enable = User enabled
audit-action-user-delete = User deleted
audit-action-user-password-set = Password set by an administrator
audit-action-user-password-change = Password changed
audit-action-user-sessions-revoke = Sessions ended by an administrator
audit-action-role-create = Role created
audit-action-role-update = Role changed
audit-action-role-save = Role saved
audit-action-role-delete = Role deleted
audit-action-pool-save = Pool saved
audit-action-pool-delete = Pool deleted
audit-action-claim-create = Sandbox claimed
audit-action-claim-release = Sandbox released
audit-action-oidc-token-issue = Token issued
audit-action-oidc-token-refresh = Token refreshed
audit-action-oidc-token-revoke = Token revoked
audit-action-oidc-code-replay = Authorization code reused
audit-action-oidc-refresh-reuse = Refresh token reused
audit-action-request-cross-site = Cross-site request
audit-result-success = Success
audit-result-forbidden = Forbidden
audit-result-not-found = Not found
audit-result-conflict = Conflict
audit-result-invalid = Invalid
audit-result-no-cluster = No cluster
audit-result-unavailable = Unavailable
audit-result-error = Error
audit-result-throttled = Throttled
audit-result-busy = Busy
audit-result-invalid-credentials = Wrong name or password
audit-result-wrong-password = Wrong password
audit-result-refused = Refused
audit-result-revoked = Revoked
audit-result-name-taken = Name taken
audit-result-last-admin = Last admin
audit-result-role-not-held = Role not held
audit-result-untrusted = Untrusted

## OIDC authorization and kubeconfig
authorize-client-cli = the command-line tool
authorize-sign-in-title = Sign in to continue to { $client }
authorize-confirm = Continue as { $name } to { $client }?
authorize-confirm-detail = It receives short-lived tokens that carry your user name and roles, so Kubernetes treats it as you.
authorize-continue = Continue
authorize-cancel = Cancel
error-invalid-authorization-request = This sign-in link cannot be used: { $reason }. Start again from the tool that opened it.
error-no-cluster-configured = The console has no Kubernetes cluster configured, so there is no kubeconfig to download.
account-kubeconfig-title = Kubernetes access
account-kubeconfig-help = A kubeconfig for kubectl that signs you in through the banlieue command-line tool. It contains no password or token.
account-kubeconfig-download = Download kubeconfig
authorize-switch-account = Use another account
error-authorize-unknown-client = the application that sent you here is not registered with this console
error-authorize-redirect = the address to return to is not registered for this application
error-authorize-malformed-state = the request carries a malformed state or nonce

## Dashboard: pools and claims
dashboard-no-cluster = The console is not connected to a Kubernetes cluster.
dashboard-pools-title = Pools
dashboard-no-pools = No pool is visible to you.
dashboard-pool-counts = { $ready } ready · { $claimed } claimed · max { $max }
dashboard-claim-ttl = Lifetime
dashboard-claim-submit = Claim a sandbox
dashboard-claim-submitting = Claiming…
dashboard-claim-forbidden = Your roles do not allow claiming here.
dashboard-claims-title = My sandboxes
dashboard-no-claims = You have no sandbox. Claim one from a pool.
dashboard-col-name = Name
dashboard-col-pool = Pool
dashboard-col-phase = State
dashboard-col-expires = Expires
dashboard-col-addresses = Addresses
dashboard-expires-in = { $minutes ->
    [one] in 1 minute
   *[other] in { $minutes } minutes
}
dashboard-expires-soon = in less than a minute
countdown-milestone = { $name } expires in { $minutes ->
    [one] 1 minute
   *[other] { $minutes } minutes
}
countdown-expired = { $name } has expired
dashboard-expires-in-hours = in { $hours } h { $minutes } min
dashboard-connect = Connect command
dashboard-copy = Copy
copy-done = Copied
copy-failed = Could not copy. Select the text and copy it by hand.
dashboard-release = Release…
dashboard-release-confirm = Release { $name } now? The VM is deleted.
dashboard-release-submit = Release
dashboard-release-submitting = Releasing…
dashboard-refresh-hint = This page updates by itself with JavaScript; without it, reload to see changes.
ttl-minutes = { $minutes ->
    [one] 1 minute
   *[other] { $minutes } minutes
}
ttl-hours = { $hours ->
    [one] 1 hour
   *[other] { $hours } hours
}
phase-pending = Pending
phase-bound = Bound
phase-releasing = Releasing
phase-failed = Failed
notice-claim-created = Claim { $name } created: it is bound as soon as a sandbox is ready.
notice-claim-created-settled = Claim { $name } created.
notice-claim-released = { $name } is being released.
error-kubernetes = Kubernetes refused: { $message }
error-invalid-claim = Choose one of the pools and lifetimes offered.
dashboard-all-claims-title = All sandboxes
dashboard-col-subject = For
account-access-title = What can I do?
account-access-help = What Kubernetes allows you in every namespace, asked as you (SelfSubjectAccessReview). Your roles decide it.
account-access-resource = Resource
account-access-allowed = allowed
account-access-denied = not allowed

## Roles
nav-roles = Roles
roles-title = Roles
roles-builtin-title = Built-in roles
roles-custom-title = Custom roles
roles-custom-none = No custom role yet.
roles-builtin-none = The cluster has no built-in role.
roles-name = Name
roles-rules = What it allows in Kubernetes
roles-holders = Held by
roles-actions = Actions
roles-edit = Edit
roles-delete = Delete…
roles-delete-confirm = Delete this role
roles-form-title = Create a custom role
roles-form-edit-title = Change the custom role { $name }
roles-form-new = Create a new role instead
roles-form-help = The role becomes a ClusterRole bound to the group console:<name>; give it to users on their page. Kubernetes decides whether you may grant what you tick.
roles-save = Save role
form-saving = Saving…
notice-role-saved = Role { $name } saved.
notice-role-deleted = Role { $name } deleted.
error-invalid-role = Tick at least one permission for the role.
error-invalid-role-name = A role's name is a lower-case letter followed by at most 30 lower-case letters, digits or '-' (such as ci-runner), and not a built-in role's name (viewer, developer, operator, admin).
roles-name-hint = A lower-case letter, then at most 30 lower-case letters, digits or '-'; not viewer, developer, operator or admin.
ttl-seconds = { $seconds ->
    [one] 1 second
   *[other] { $seconds } seconds
}

## Pools
nav-pools = Pools
pools-title = Pools
pools-name = Name
pools-namespace = Namespace
pools-sizes = Size
pools-size-line = warm { $warm }, max { $max } — { $ready } ready, { $claimed } claimed, { $total } in all
pools-image = Image
pools-revision = Image revision
pools-warm = Warm (Ready, unclaimed)
pools-max = Maximum
pools-cpu = CPUs
pools-memory = Memory (e.g. 4Gi)
pools-provider = Provider
pools-provider-unknown = { $provider } (no such provider)
pools-no-providers = No VirtualMachineProvider exists yet: a pool makes no sandbox until the provider it names is installed.
pools-provider-missing = Waiting for provider “{ $provider }”: no VirtualMachineProvider has that name. Install it, or choose one that exists.
pools-not-progressing = Not filling up: { $message }
pools-save = Save pool
pools-form-title = Create or change a pool
pools-none = No pool yet.
pools-read-only = You may look at the pools; Kubernetes does not let your roles create or change them.
pools-delete-confirm = Delete this pool
notice-pool-saved = Pool { $name } saved.
notice-pool-deleted = Pool { $name } deleted; claimed sandboxes stay until released.
error-invalid-pool = Check the pool: a namespace, a name and a provider (lowercase letters, digits, -), warm ≤ maximum, maximum between 1 and 10,000, 1 to 1,024 CPUs, memory as a quantity such as 512Mi or 4Gi, an image (up to 512 characters) and a revision (up to 128).

## Claim detail
claim-back = ← Dashboard
claim-pool = Pool
claim-subject = For
claim-issuer = Signed in through
claim-issuer-console = this console ({ $issuer })
claim-lifetime = Lifetime
claim-created = Requested
claim-bound = Bound at
claim-expires = Expires
claim-vm = Virtual machine
claim-connect-title = Connect
claim-no-address = Addresses appear once the sandbox is bound.
claim-gone = This sandbox does not exist (any more): it was released or it expired.
claim-not-yet = not yet
claim-reason-no-ready-member = Waiting: no sandbox of pool { $pool } is free yet; it is bound as soon as one is ready.
claim-reason-pool-not-found = Waiting: the pool { $pool } does not exist.
claim-reason-pool-not-progressing = Waiting: pool { $pool } has no free sandbox and is not making any. Kubernetes says: { $message }
claim-reason-vm-gone = Its virtual machine is gone; a claim is never given another one. Release it and claim a new sandbox.
claim-reason-released = Released: the virtual machine is being destroyed.
claim-reason-expired = Expired: the lifetime is over and the virtual machine is being destroyed.
claim-attestation-title = Attestation
claim-attestation-verified = Its EK certificates chain to the provider's trust bundle: a broker may open an attested channel to this sandbox.
claim-attestation-unverified = Not verified: do not trust this sandbox's vTPM.
claim-attestation-none = EK certificates appear once the sandbox is bound.
claim-ek-fingerprint = SHA-256 fingerprint
claim-ek-issuer = Issuer
claim-ek-identity = Identity
claim-ek-trusted = Chains to the provider's trust bundle
claim-ek-untrusted = Does not chain to the provider's trust bundle
claim-ek-unchecked = Not checked
