app-name = banlieue console
app-tagline = Sandbox virtual machines on demand

## Language switch
language-label = Language
language-en = English
language-ja = 日本語

## Sign-in card
sign-in-title = Sign in
sign-in-user-name = User name
sign-in-password = Password
sign-in-submit = Sign in
sign-in-submitting = Signing in…

## Forced and voluntary password change
change-password-title = Change your password
change-password-required = Your password was set by an administrator. Choose a new one before you continue.
change-password-current = Current password
change-password-new = New password
change-password-confirm = Repeat the new password
change-password-hint = 12 to 128 bytes (a Latin letter is one byte, a Japanese character three). A long passphrase beats a complex word.
change-password-submit = Change password

## Header and dashboard
nav-dashboard = Dashboard
nav-change-password = Change password
sign-out = Sign out
signed-in-as = Signed in as { $name }
dashboard-title = Dashboard
dashboard-welcome = Welcome, { $name }.
dashboard-empty-title = No sandboxes yet
dashboard-empty-body = Pools and your claimed sandboxes will appear here.
not-found-title = Page not found
not-found-body = There is nothing at this address.
not-found-home = Go to the dashboard

## Errors
error-invalid-credentials = The user name or password is wrong.
error-throttled = Too many failed attempts. Try again in { $seconds } seconds.
error-password-too-long = Passwords are at most 128 bytes long.
error-password-too-short = The new password must be at least 12 bytes long.
error-missing-user-name = Enter your user name.
error-passwords-differ = The two new passwords are not the same.
error-wrong-current-password = The current password is wrong.
error-invalid-form = The form could not be read. Reload the page and try again.
error-request-too-large = The form was too large to accept.
error-cross-site = This request came from another site and was refused.
error-not-signed-in = Sign in to continue.
error-must-change-password = Change your password before doing anything else.
error-internal = Something went wrong on our side. Reference: { $reference }
