use leptos::prelude::*;

use super::INPUT_CLASS;
use super::users::{SECONDARY_BUTTON, encode};
use crate::components::{AppHeader, Messages, Pager};
use crate::i18n::Locale;
use crate::{AuditFilter, PageData, page_state, paths};

/// The audit log (admins): filters as a GET form, newest events first, paged.
#[component]
pub fn Audit() -> impl IntoView {
    let state = page_state();
    let locale = state.locale;
    let PageData::Audit(view) = state.data else {
        return view! { <AppHeader /> <main id="main" tabindex="-1" class="mx-auto max-w-6xl px-4 py-8"><Messages /></main> }
            .into_any();
    };
    let AuditFilter {
        actor,
        action,
        target,
        result,
        since,
        until,
    } = view.filter.clone();
    let base = format!(
        "{}?actor={}&action={}&target={}&result={}&since={}&until={}&",
        paths::AUDIT,
        encode(&actor),
        encode(&action),
        encode(&target),
        encode(&result),
        encode(&since),
        encode(&until)
    );
    let field = move |name: &'static str, key: &'static str, value: String, kind: &'static str| {
        view! {
            <label class="block text-sm font-medium">
                {locale.t(key)}
                <input class=INPUT_CLASS type=kind name=name value=value />
            </label>
        }
    };
    let th = "px-3 py-2 text-left font-medium";
    view! {
        <AppHeader />
        <main id="main" tabindex="-1" class="mx-auto max-w-6xl space-y-6 px-4 py-8">
            <h1 class="text-2xl font-semibold tracking-tight">{locale.t("audit-title")}</h1>
            <Messages />
            <form method="get" action=paths::AUDIT class="grid gap-3 sm:grid-cols-3 lg:grid-cols-7 lg:items-end">
                {field("actor", "audit-filter-actor", actor, "text")}
                {field("action", "audit-filter-action", action, "text")}
                {field("target", "audit-filter-target", target, "text")}
                {field("result", "audit-filter-result", result, "text")}
                {field("since", "audit-filter-since", since, "date")}
                {field("until", "audit-filter-until", until, "date")}
                <button type="submit" class=SECONDARY_BUTTON>{locale.t("audit-filter-submit")}</button>
            </form>
            {if view.rows.is_empty() {
                view! { <p class="rounded-xl border border-dashed border-slate-300 p-8 text-center dark:border-slate-700">{locale.t("audit-empty")}</p> }.into_any()
            } else {
                view! {
                    <div class="relative overflow-x-auto rounded-xl border border-slate-200 dark:border-slate-800">
                        <table class="table-stack min-w-full divide-y divide-slate-200 text-sm dark:divide-slate-800" data-testid="audit-table">
                            <thead class="bg-slate-100 dark:bg-slate-900">
                                <tr>
                                    <th class=th scope="col">{locale.t("audit-col-at")}</th>
                                    <th class=th scope="col">{locale.t("audit-filter-actor")}</th>
                                    <th class=th scope="col">{locale.t("audit-filter-action")}</th>
                                    <th class=th scope="col">{locale.t("audit-filter-target")}</th>
                                    <th class=th scope="col">{locale.t("audit-col-ip")}</th>
                                    <th class=th scope="col">{locale.t("audit-filter-result")}</th>
                                </tr>
                            </thead>
                            <tbody class="divide-y divide-slate-200 dark:divide-slate-800">
                                {view.rows.iter().map(|row| view! {
                                    <tr>
                                        <td data-label=locale.t("audit-col-at") class="whitespace-nowrap px-3 py-2">{row.at.clone()}</td>
                                        <td data-label=locale.t("audit-filter-actor") class="px-3 py-2">{row.actor.clone()}</td>
                                        <td data-label=locale.t("audit-filter-action") class="px-3 py-2"><Code kind="action" code=row.action.clone() locale /></td>
                                        <td data-label=locale.t("audit-filter-target") class="break-all px-3 py-2">{row.target.clone()}</td>
                                        <td data-label=locale.t("audit-col-ip") class="px-3 py-2">{row.source_ip.clone()}</td>
                                        <td data-label=locale.t("audit-filter-result") class="px-3 py-2"><Code kind="result" code=row.result.clone() locale /></td>
                                    </tr>
                                }).collect_view()}
                            </tbody>
                        </table>
                    </div>
                }.into_any()
            }}
            <Pager base page=view.page per_page=view.per_page total=view.total />
        </main>
    }
    .into_any()
}

/// An action or result code of the log (`kind`) in the person's words, with the code
/// beside them: the code is what the filters match and what other tools read. A code the
/// console has no words for shows alone.
#[component]
fn Code(kind: &'static str, code: String, locale: Locale) -> impl IntoView {
    let words = locale.try_t(&format!("audit-{kind}-{}", code.replace('.', "-")));
    view! {
        {words.map(|words| view! { <span class="me-2">{words}</span> })}
        <code class="whitespace-nowrap font-mono text-xs text-slate-500 dark:text-slate-400" data-testid=format!("audit-{kind}")>
            {code}
        </code>
    }
}
