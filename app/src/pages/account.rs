use leptos::prelude::*;

use super::users::{DANGER_BUTTON, SECONDARY_BUTTON};
use crate::components::{AppHeader, Messages};
use crate::{PageData, page_state, paths};

/// My account: change password, my sessions (end one, or all).
#[component]
pub fn Account() -> impl IntoView {
    let state = page_state();
    let locale = state.locale;
    let (sessions, kubeconfig_available, access) = match state.data {
        PageData::Account(view) => (view.sessions, view.kubeconfig_available, view.access),
        _ => (Vec::new(), false, Vec::new()),
    };
    let th = "px-3 py-2 text-left font-medium";
    view! {
        <AppHeader />
        <main id="main" tabindex="-1" class="mx-auto max-w-5xl space-y-8 px-4 py-8">
            <h1 class="text-2xl font-semibold tracking-tight">{locale.t("account-title")}</h1>
            <Messages />
            <p>
                <a href=paths::CHANGE_PASSWORD.to_owned() class=SECONDARY_BUTTON>
                    {locale.t("account-change-password")}
                </a>
            </p>
            <section aria-labelledby="kubernetes-access" class="space-y-3">
                <h2 id="kubernetes-access" class="text-lg font-semibold">{locale.t("account-kubeconfig-title")}</h2>
                <p class="max-w-prose text-sm text-slate-600 dark:text-slate-300">{locale.t("account-kubeconfig-help")}</p>
                {if kubeconfig_available {
                    view! {
                        <a href=paths::KUBECONFIG download="banlieue.kubeconfig" class=SECONDARY_BUTTON data-testid="download-kubeconfig">
                            {locale.t("account-kubeconfig-download")}
                        </a>
                    }.into_any()
                } else {
                    view! { <p class="text-sm text-slate-500 dark:text-slate-400">{locale.t("error-no-cluster-configured")}</p> }.into_any()
                }}
            </section>
            {(!access.is_empty()).then(|| view! { <WhatCanIDo access /> })}
            <section aria-labelledby="my-sessions" class="space-y-4">
                <h2 id="my-sessions" class="text-lg font-semibold">{locale.t("account-sessions-title")}</h2>
                <div class="relative overflow-x-auto rounded-xl border border-slate-200 dark:border-slate-800">
                    <table class="table-stack min-w-full divide-y divide-slate-200 text-sm dark:divide-slate-800" data-testid="sessions-table">
                        <thead class="bg-slate-100 dark:bg-slate-900">
                            <tr>
                                <th class=th scope="col">{locale.t("account-sessions-col-created")}</th>
                                <th class=th scope="col">{locale.t("account-sessions-col-last-seen")}</th>
                                <th class=th scope="col">{locale.t("account-sessions-col-ip")}</th>
                                <th class=th scope="col">{locale.t("account-sessions-col-agent")}</th>
                                <th class=th scope="col"><span class="sr-only">{locale.t("account-session-revoke")}</span></th>
                            </tr>
                        </thead>
                        <tbody class="divide-y divide-slate-200 dark:divide-slate-800">
                            {sessions
                                .into_iter()
                                .map(|session| {
                                    let action = format!("{}/sessions/{}/revoke", paths::ACCOUNT, session.handle);
                                    view! {
                                        <tr data-current=session.current.to_string()>
                                            <td data-label=locale.t("account-sessions-col-created") class="px-3 py-2">{session.created.clone()}</td>
                                            <td data-label=locale.t("account-sessions-col-last-seen") class="px-3 py-2">{session.last_seen.clone()}</td>
                                            <td data-label=locale.t("account-sessions-col-ip") class="px-3 py-2">{session.source_ip.clone()}</td>
                                            <td data-label=locale.t("account-sessions-col-agent") class="max-w-xs truncate px-3 py-2" title=session.user_agent.clone()>
                                                {session.user_agent.clone()}
                                            </td>
                                            <td class="px-3 py-2 text-right">
                                                {if session.current {
                                                    view! { <span class="text-xs text-slate-500 dark:text-slate-400">{locale.t("account-session-current")}</span> }.into_any()
                                                } else {
                                                    view! {
                                                        <form method="post" action=action>
                                                            <button type="submit" class=SECONDARY_BUTTON>{locale.t("account-session-revoke")}</button>
                                                        </form>
                                                    }.into_any()
                                                }}
                                            </td>
                                        </tr>
                                    }
                                })
                                .collect_view()}
                        </tbody>
                    </table>
                </div>
                <form method="post" action=format!("{}/sessions/revoke-all", paths::ACCOUNT)>
                    <button type="submit" class=DANGER_BUTTON>{locale.t("account-sign-out-everywhere")}</button>
                </form>
            </section>
        </main>
    }
}

/// Kubernetes' answers (SelfSubjectAccessReview) for the person's verbs on pools, claims
/// and VMs.
#[component]
fn WhatCanIDo(access: Vec<crate::AccessRow>) -> impl IntoView {
    let locale = crate::page_state().locale;
    let verbs: Vec<String> = access
        .first()
        .map(|row| row.verbs.iter().map(|(verb, _)| verb.clone()).collect())
        .unwrap_or_default();
    let th = "px-3 py-2 text-left font-medium";
    view! {
        <section aria-labelledby="what-can-i-do" class="space-y-3">
            <h2 id="what-can-i-do" class="text-lg font-semibold">{locale.t("account-access-title")}</h2>
            <p class="max-w-prose text-sm text-slate-600 dark:text-slate-300">{locale.t("account-access-help")}</p>
            <div class="relative overflow-x-auto rounded-xl border border-slate-200 dark:border-slate-800">
                <table class="table-stack min-w-full divide-y divide-slate-200 text-sm dark:divide-slate-800" data-testid="access-table">
                    <thead class="bg-slate-100 dark:bg-slate-900">
                        <tr>
                            <th class=th scope="col">{locale.t("account-access-resource")}</th>
                            {verbs.into_iter().map(|verb| view! { <th class=th scope="col">{verb}</th> }).collect_view()}
                        </tr>
                    </thead>
                    <tbody class="divide-y divide-slate-200 dark:divide-slate-800">
                        {access
                            .into_iter()
                            .map(|row| view! {
                                <tr data-resource=row.resource.clone()>
                                    <th class="px-3 py-2 text-left font-mono text-xs" scope="row">{row.resource.clone()}</th>
                                    {row.verbs
                                        .into_iter()
                                        .map(|(verb, allowed)| {
                                            let (mark, label) = if allowed {
                                                ("✓", locale.t("account-access-allowed"))
                                            } else {
                                                ("—", locale.t("account-access-denied"))
                                            };
                                            view! {
                                                <td class="px-3 py-2" data-label=verb.clone() data-verb=verb data-allowed=allowed.to_string()>
                                                    <span aria-hidden="true">{mark}</span>
                                                    <span class="sr-only">{label}</span>
                                                </td>
                                            }
                                        })
                                        .collect_view()}
                                </tr>
                            })
                            .collect_view()}
                    </tbody>
                </table>
            </div>
        </section>
    }
}
