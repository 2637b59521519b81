use leptos::prelude::*;

use super::{CARD_CLASS, INPUT_CLASS};
use crate::components::{ErrorAlert, LanguageSwitch, SubmitButton, ThemeSwitch, submit_once};
use crate::{page_state, paths};

/// The sign-in card. Posts to the server, which redirects on success and answers a
/// refusal with this page and its error (the typed user name kept). The form posts to
/// this page's own address, so a `?next=` (where to return after signing in) is kept.
#[component]
pub fn SignIn() -> impl IntoView {
    let state = page_state();
    let locale = state.locale;
    let action = if state.path.starts_with(&format!("{}?", paths::SIGN_IN)) {
        state.path.clone()
    } else {
        paths::SIGN_IN.to_owned()
    };
    let user_name = state
        .feedback
        .as_ref()
        .map(|f| f.value("user_name"))
        .unwrap_or_default();
    let error = state.feedback.map(|f| f.error);
    view! {
        <main id="main" tabindex="-1" class="flex min-h-screen flex-col items-center justify-center gap-6 px-4">
            <div class="text-center">
                <p class="text-2xl font-semibold tracking-tight">{locale.t("app-name")}</p>
                <p class="text-sm text-slate-500 dark:text-slate-400">{locale.t("app-tagline")}</p>
            </div>
            <section class=CARD_CLASS aria-labelledby="sign-in-title">
                <h1 id="sign-in-title" class="mb-6 text-xl font-semibold">
                    {locale.t("sign-in-title")}
                </h1>
                <form
                    method="post"
                    action=action
                    class="space-y-4"
                    on:submit=submit_once("sign-in")
                >
                    {error.map(|error| view! { <ErrorAlert error /> })}
                    <CredentialFields user_name />
                    <SubmitButton
                        label=locale.t("sign-in-submit")
                        pending_label=locale.t("sign-in-submitting")
                        form="sign-in"
                    />
                </form>
            </section>
            <div class="flex flex-wrap items-center justify-center gap-x-4 gap-y-2">
                <LanguageSwitch />
                <ThemeSwitch />
            </div>
        </main>
    }
}

/// The user name and password inputs of a sign-in form; the password gets the focus when
/// a user name is already typed, else the user name.
#[component]
pub(crate) fn CredentialFields(user_name: String) -> impl IntoView {
    let locale = page_state().locale;
    let focus_password = !user_name.is_empty();
    view! {
        <label class="block text-sm font-medium">
            {locale.t("sign-in-user-name")}
            <input
                class=INPUT_CLASS
                type="text"
                name="user_name"
                value=user_name
                autocomplete="username"
                autocapitalize="none"
                spellcheck="false"
                required
                autofocus=!focus_password
            />
        </label>
        <label class="block text-sm font-medium">
            {locale.t("sign-in-password")}
            <input
                class=INPUT_CLASS
                type="password"
                name="password"
                autocomplete="current-password"
                autofocus=focus_password
            />
        </label>
    }
}
