use leptos::prelude::*;

use super::{CARD_CLASS, INPUT_CLASS};
use crate::components::{AppHeader, ErrorAlert, SubmitButton, submit_once};
use crate::{page_state, paths};

/// Change the own password. While the must-change flag is set this is the only page the
/// server serves; the header still offers sign-out.
#[component]
pub fn ChangePassword() -> impl IntoView {
    let state = page_state();
    let locale = state.locale;
    let forced = state.user.as_ref().is_some_and(|u| u.must_change_password);
    let error = state.feedback.map(|f| f.error);
    // Keeps `?next=` (an OIDC sign-in waiting for this change) on the form's action.
    let action = if state.path.starts_with(paths::CHANGE_PASSWORD) {
        state.path.clone()
    } else {
        paths::CHANGE_PASSWORD.to_owned()
    };
    view! {
        <AppHeader />
        <main id="main" tabindex="-1" class="flex justify-center px-4 py-12">
            <section class=CARD_CLASS aria-labelledby="change-password-title">
                <h1 id="change-password-title" class="mb-2 text-xl font-semibold">
                    {locale.t("change-password-title")}
                </h1>
                {forced
                    .then(|| {
                        view! {
                            <p class="mb-4 text-sm text-slate-600 dark:text-slate-300" data-testid="must-change">
                                {locale.t("change-password-required")}
                            </p>
                        }
                    })}
                <form
                    method="post"
                    action=action
                    class="space-y-4"
                    on:submit=submit_once("change-password")
                >
                    {error.map(|error| view! { <ErrorAlert error /> })}
                    <label class="block text-sm font-medium">
                        {locale.t("change-password-current")}
                        <input
                            class=INPUT_CLASS
                            type="password"
                            name="current_password"
                            autocomplete="current-password"
                            required
                        />
                    </label>
                    <label class="block text-sm font-medium">
                        {locale.t("change-password-new")}
                        <input
                            class=INPUT_CLASS
                            type="password"
                            name="new_password"
                            autocomplete="new-password"
                            aria-describedby="password-hint"
                            required
                        />
                    </label>
                    <label class="block text-sm font-medium">
                        {locale.t("change-password-confirm")}
                        <input
                            class=INPUT_CLASS
                            type="password"
                            name="confirm_password"
                            autocomplete="new-password"
                            required
                        />
                    </label>
                    <p id="password-hint" class="text-xs text-slate-500 dark:text-slate-400">
                        {locale.t("change-password-hint")}
                    </p>
                    <SubmitButton
                        label=locale.t("change-password-submit")
                        pending_label=locale.t("change-password-submit")
                        form="change-password"
                    />
                </form>
            </section>
        </main>
    }
}
