use leptos::prelude::*;

use crate::components::AppHeader;
use crate::page_state;

/// The signed-in home page. Pools and claims arrive with the cluster features; until
/// then it says so instead of showing an empty frame.
#[component]
pub fn Dashboard() -> impl IntoView {
    let state = page_state();
    let locale = state.locale;
    let name = state
        .user
        .as_ref()
        .map(|u| u.label().to_owned())
        .unwrap_or_default();
    view! {
        <AppHeader />
        <main class="mx-auto max-w-5xl px-4 py-10">
            <h1 class="text-2xl font-semibold tracking-tight">{locale.t("dashboard-title")}</h1>
            <p class="mt-1 text-slate-600 dark:text-slate-300" data-testid="welcome">
                {locale.t_with("dashboard-welcome", &[("name", name)])}
            </p>
            <div class="mt-8 rounded-2xl border border-dashed border-slate-300 p-10 text-center dark:border-slate-700">
                <p class="font-medium">{locale.t("dashboard-empty-title")}</p>
                <p class="mt-1 text-sm text-slate-500 dark:text-slate-400">
                    {locale.t("dashboard-empty-body")}
                </p>
            </div>
        </main>
    }
}
