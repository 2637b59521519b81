use leptos::prelude::*;

use crate::{page_state, paths};

/// Any path without a page. The server sends it with status 404.
#[component]
pub fn NotFound() -> impl IntoView {
    #[cfg(feature = "ssr")]
    if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
        response.set_status(http::StatusCode::NOT_FOUND);
    }
    let locale = page_state().locale;
    view! {
        <main id="main" tabindex="-1" class="flex min-h-screen flex-col items-center justify-center gap-3 px-4 text-center">
            <h1 class="text-2xl font-semibold">{locale.t("not-found-title")}</h1>
            <p class="text-slate-600 dark:text-slate-300">{locale.t("not-found-body")}</p>
            <a href=paths::DASHBOARD class="text-indigo-600 hover:underline dark:text-indigo-400">
                {locale.t("not-found-home")}
            </a>
        </main>
    }
}
