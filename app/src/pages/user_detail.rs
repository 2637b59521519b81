use leptos::prelude::*;

use super::INPUT_CLASS;
use super::users::{
    DANGER_BUTTON, PRIMARY_BUTTON, PasswordChoiceFields, ProfileFields, SECONDARY_BUTTON,
    StateBadge,
};
use crate::components::{AppHeader, CopyButton, Messages};
use crate::{PageData, page_state, paths};

/// One user (admins): profile and roles, disable/enable, password reset, ending sessions,
/// deletion with a typed confirmation. A generated password is shown here once.
#[component]
pub fn UserDetail() -> impl IntoView {
    let state = page_state();
    let locale = state.locale;
    let PageData::User(view) = state.data else {
        return view! { <AppHeader /> <main id="main" tabindex="-1" class="mx-auto max-w-6xl px-4 py-8"><Messages /></main> }
            .into_any();
    };
    let user = view.user;
    let base = paths::user(&user.name);
    let typed = |field: &str, stored: String| {
        state
            .feedback
            .as_ref()
            .and_then(|f| f.values.get(field).cloned())
            .unwrap_or(stored)
    };
    let display_name = typed("display_name", user.display_name.clone());
    let email = typed("email", user.email.clone());
    let roles = typed("roles", user.roles.join(" "));
    let version = user.version.to_string();
    let name = user.name.clone();
    let card = "rounded-2xl border border-slate-200 bg-white p-6 shadow-sm dark:border-slate-800 dark:bg-slate-900";
    view! {
        <AppHeader />
        <main id="main" tabindex="-1" class="mx-auto max-w-3xl space-y-6 px-4 py-8">
            <a href=paths::USERS.to_owned() class="text-sm text-indigo-700 hover:underline dark:text-indigo-300">
                {locale.t("user-back")}
            </a>
            <div class="flex flex-wrap items-center gap-3">
                <h1 class="text-2xl font-semibold tracking-tight" data-testid="user-name">{user.name.clone()}</h1>
                <StateBadge row=user.clone() locale />
            </div>
            <Messages />
            {view.shown_password.map(|password| view! {
                <section class="rounded-2xl border border-amber-300 bg-amber-50 p-6 dark:border-amber-800 dark:bg-amber-950" aria-labelledby="shown-password">
                    <h2 id="shown-password" class="font-semibold">{locale.t("user-shown-password-title")}</h2>
                    <p class="mt-1 text-sm">{locale.t_with("user-shown-password-body", &[("name", name.clone())])}</p>
                    <div class="mt-3 flex items-center gap-2">
                        <input class=INPUT_CLASS type="text" readonly value=password.clone() data-testid="shown-password" aria-label=locale.t("user-shown-password-title") />
                        <CopyButton text=password label=locale.t("user-copy") id="shown-password" />
                    </div>
                </section>
            })}
            <section class=card aria-labelledby="edit-user">
                <h2 id="edit-user" class="mb-4 text-lg font-semibold">{locale.t("user-edit-title")}</h2>
                <form method="post" action=base.clone() class="space-y-4">
                    <input type="hidden" name="version" value=version.clone() />
                    <ProfileFields display_name email roles choices=view.role_choices />
                    <button type="submit" class=PRIMARY_BUTTON>{locale.t("user-save")}</button>
                </form>
            </section>
            <section class=card aria-labelledby="user-actions">
                <h2 id="user-actions" class="mb-4 text-lg font-semibold">{locale.t("user-actions-title")}</h2>
                <div class="flex flex-wrap gap-3">
                    {if user.disabled {
                        view! {
                            <form method="post" action=format!("{base}/enable")>
                                <input type="hidden" name="version" value=version.clone() />
                                <button type="submit" class=SECONDARY_BUTTON>{locale.t("user-enable")}</button>
                            </form>
                        }.into_any()
                    } else {
                        view! {
                            <form method="post" action=format!("{base}/disable")>
                                <input type="hidden" name="version" value=version.clone() />
                                <button type="submit" class=SECONDARY_BUTTON>{locale.t("user-disable")}</button>
                            </form>
                        }.into_any()
                    }}
                    <form method="post" action=format!("{base}/revoke-sessions")>
                        <button type="submit" class=SECONDARY_BUTTON>{locale.t("user-revoke-sessions")}</button>
                    </form>
                </div>
                // A second step before the reset, which ends the user's sessions: a
                // disclosure, so it needs no JavaScript.
                <details class="mt-6" data-testid="reset-password">
                    <summary class="cursor-pointer text-sm font-medium">{locale.t("user-reset-password-open")}</summary>
                    <form method="post" action=format!("{base}/password") class="mt-3 space-y-3">
                        <p class="text-sm">{locale.t_with("user-reset-password-hint", &[("name", user.name.clone())])}</p>
                        <PasswordChoiceFields />
                        <button type="submit" class=DANGER_BUTTON>{locale.t("user-reset-password")}</button>
                    </form>
                </details>
            </section>
            <section class="rounded-2xl border border-red-200 p-6 dark:border-red-900" aria-labelledby="delete-user">
                <h2 id="delete-user" class="text-lg font-semibold">{locale.t("user-delete-title")}</h2>
                <p class="mt-1 text-sm">{locale.t_with("user-delete-hint", &[("name", user.name.clone())])}</p>
                <form method="post" action=format!("{base}/delete") class="mt-3 flex flex-wrap items-end gap-3">
                    <input type="hidden" name="version" value=version />
                    <label class="block text-sm font-medium">
                        {locale.t("user-delete-confirm")}
                        <input class=INPUT_CLASS type="text" name="confirm" required autocomplete="off" autocapitalize="none" spellcheck="false" />
                    </label>
                    <button type="submit" class=DANGER_BUTTON>{locale.t("user-delete-submit")}</button>
                </form>
            </section>
        </main>
    }
    .into_any()
}
