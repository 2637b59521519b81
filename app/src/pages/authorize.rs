use leptos::prelude::*;

use super::CARD_CLASS;
use super::sign_in::CredentialFields;
use super::users::SECONDARY_BUTTON;
use crate::components::{ErrorAlert, LanguageSwitch, SubmitButton, ThemeSwitch, submit_once};
use crate::{PageData, page_state, paths};

/// The OIDC authorization page (SPEC §4): the console's sign-in card for a person who is
/// not signed in, or a one-click confirmation for one who is. Both forms post the
/// authorization request back as hidden fields.
#[component]
pub fn Authorize() -> impl IntoView {
    let state = page_state();
    let locale = state.locale;
    let PageData::Authorize(view) = state.data else {
        return view! { <main id="main" tabindex="-1" /> }.into_any();
    };
    // The command-line tool is the one client with a redirect URI (the console has none).
    let (client, detail) = (locale.t("authorize-client-cli"), "authorize-confirm-detail");
    let hidden = view
        .fields
        .iter()
        .map(
            |(name, value)| view! { <input type="hidden" name=name.clone() value=value.clone() /> },
        )
        .collect_view();
    let error = state.feedback.as_ref().map(|f| f.error.clone());
    let user_name = state
        .feedback
        .as_ref()
        .map(|f| f.value("user_name"))
        .unwrap_or_default();
    let confirming = state.user.filter(|_| !view.sign_in);
    let card = match confirming {
        Some(user) => {
            let question = locale.t_with(
                "authorize-confirm",
                &[("name", user.name.to_string()), ("client", client.clone())],
            );
            view! {
                <section class=CARD_CLASS aria-labelledby="authorize-title">
                    <h1 id="authorize-title" class="mb-2 text-xl font-semibold" data-testid="authorize-question">
                        {question}
                    </h1>
                    <p class="mb-6 text-sm text-slate-600 dark:text-slate-300">
                        {locale.t(detail)}
                    </p>
                    <form method="post" action=paths::AUTHORIZE class="flex gap-3">
                        {hidden}
                        <button
                            type="submit"
                            name="decision"
                            value="allow"
                            class="flex-1 rounded-lg bg-indigo-600 px-4 py-2 font-medium text-white shadow-sm hover:bg-indigo-500 focus:outline-none focus:ring-2 focus:ring-indigo-500/50"
                        >
                            {locale.t("authorize-continue")}
                        </button>
                        <button type="submit" name="decision" value="deny" class=SECONDARY_BUTTON>
                            {locale.t("authorize-cancel")}
                        </button>
                    </form>
                    <p class="mt-4 text-center text-sm">
                        <a href=view.switch_account.clone() class="text-indigo-600 hover:underline dark:text-indigo-400">
                            {locale.t("authorize-switch-account")}
                        </a>
                    </p>
                </section>
            }
            .into_any()
        }
        None => view! {
            <section class=CARD_CLASS aria-labelledby="authorize-title">
                <h1 id="authorize-title" class="mb-6 text-xl font-semibold">
                    {locale.t_with("authorize-sign-in-title", &[("client", client.clone())])}
                </h1>
                <form
                    method="post"
                    action=paths::AUTHORIZE
                    class="space-y-4"
                    on:submit=submit_once("authorize")
                >
                    {hidden}
                    {error.map(|error| view! { <ErrorAlert error /> })}
                    <CredentialFields user_name />
                    <SubmitButton
                        label=locale.t("sign-in-submit")
                        pending_label=locale.t("sign-in-submitting")
                        form="authorize"
                    />
                </form>
            </section>
        }
        .into_any(),
    };
    view! {
        <main id="main" tabindex="-1" class="flex min-h-screen flex-col items-center justify-center gap-6 px-4">
            <div class="text-center">
                <p class="text-2xl font-semibold tracking-tight">{locale.t("app-name")}</p>
                <p class="text-sm text-slate-500 dark:text-slate-400">{locale.t("app-tagline")}</p>
            </div>
            {card}
            <div class="flex flex-wrap items-center justify-center gap-x-4 gap-y-2">
                <LanguageSwitch />
                <ThemeSwitch />
            </div>
        </main>
    }
    .into_any()
}
