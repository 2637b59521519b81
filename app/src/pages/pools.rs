use leptos::prelude::*;

use super::{DANGER_BUTTON, INPUT_CLASS, PRIMARY_BUTTON, SECONDARY_BUTTON};
use crate::components::{AppHeader, Messages, SubmitButton, submit_once};
use crate::{PageData, PoolStall, page_state, paths};

/// Pools (operators, SPEC §5): every pool with its counts, and a form to create or change
/// one (warm, max, image revision, template, provider); delete. Written as the person, so
/// Kubernetes RBAC decides.
#[component]
pub fn Pools() -> impl IntoView {
    let state = page_state();
    let locale = state.locale;
    let view = match state.data {
        PageData::Pools(view) => view,
        _ => Default::default(),
    };
    let form = view.form;
    let can_manage = view.can_manage;
    let typed = |field: &str, stored: String| {
        state
            .feedback
            .as_ref()
            .and_then(|f| f.values.get(field).cloned())
            .unwrap_or(stored)
    };
    let th = "px-3 py-2 text-left font-medium";
    let card = "rounded-2xl border border-slate-200 bg-white p-6 shadow-sm dark:border-slate-800 dark:bg-slate-900";
    let field = move |name: &'static str, label: String, value: String, kind: &'static str| {
        view! {
            <label class="block text-sm font-medium">
                {label}
                <input class=INPUT_CLASS type=kind name=name value=value required />
            </label>
        }
    };
    let provider = typed("provider", form.provider.clone());
    // A choice of the providers that exist; a name to type when the person may not list
    // them, or when none exists yet (said under the field).
    let provider_field = match view.providers {
        Some(names) if !names.is_empty() => {
            let unknown =
                (!provider.is_empty() && !names.contains(&provider)).then(|| provider.clone());
            // Labelled by `for`, not by wrapping: a wrapping label's text would take in
            // the options' text too.
            view! {
                <div>
                    <label class="block text-sm font-medium" for="pool-provider">
                        {locale.t("pools-provider")}
                    </label>
                    <select id="pool-provider" class=INPUT_CLASS name="provider" required>
                        {names.into_iter().map(|name| {
                            let selected = name == provider;
                            let label = name.clone();
                            view! { <option value=name selected=selected>{label}</option> }
                        }).collect_view()}
                        {unknown.map(|name| {
                            let label = locale.t_with("pools-provider-unknown", &[("provider", name.clone())]);
                            view! { <option value=name selected=true>{label}</option> }
                        })}
                    </select>
                </div>
            }
            .into_any()
        }
        providers => {
            let none_yet = providers.is_some();
            view! {
                <div>
                    {field("provider", locale.t("pools-provider"), provider, "text")}
                    {none_yet.then(|| view! {
                        <p class="mt-1 text-xs text-amber-700 dark:text-amber-300" data-testid="no-providers">{locale.t("pools-no-providers")}</p>
                    })}
                </div>
            }
            .into_any()
        }
    };
    let empty = view.pools.is_empty();
    view! {
        <AppHeader />
        <main id="main" tabindex="-1" class="mx-auto max-w-5xl space-y-8 px-4 py-8">
            <h1 class="text-2xl font-semibold tracking-tight">{locale.t("pools-title")}</h1>
            <Messages />
            {(!can_manage).then(|| view! {
                <p class="text-sm text-slate-600 dark:text-slate-300" data-testid="pools-read-only">{locale.t("pools-read-only")}</p>
            })}
            {empty.then(|| view! { <p class="text-sm text-slate-500 dark:text-slate-400" data-testid="no-pools">{locale.t("pools-none")}</p> })}
            {(!empty).then(|| view! {
                <div class="relative overflow-x-auto rounded-xl border border-slate-200 dark:border-slate-800">
                    <table class="table-stack min-w-full divide-y divide-slate-200 text-sm dark:divide-slate-800" data-testid="pools-table">
                        <thead class="bg-slate-100 dark:bg-slate-900">
                            <tr>
                                <th class=th scope="col">{locale.t("pools-name")}</th>
                                <th class=th scope="col">{locale.t("pools-sizes")}</th>
                                <th class=th scope="col">{locale.t("pools-image")}</th>
                                {can_manage.then(|| view! {
                                    <th class=th scope="col"><span class="sr-only">{locale.t("roles-actions")}</span></th>
                                })}
                            </tr>
                        </thead>
                        <tbody class="divide-y divide-slate-200 dark:divide-slate-800">
                            {view.pools.into_iter().map(|pool| {
                                let sizes = locale.t_with("pools-size-line", &[
                                    ("warm", pool.warm_replicas.to_string()),
                                    ("max", pool.max_replicas.to_string()),
                                    ("ready", pool.ready.to_string()),
                                    ("claimed", pool.claimed.to_string()),
                                    ("total", pool.total.to_string()),
                                ]);
                                let stalled = pool.stalled.as_ref().map(|stall| {
                                    if stall.reason == PoolStall::PROVIDER_NOT_FOUND {
                                        locale.t_with("pools-provider-missing", &[("provider", pool.provider.clone())])
                                    } else {
                                        locale.t_with("pools-not-progressing", &[("message", stall.message.clone())])
                                    }
                                });
                                let actions = can_manage.then(|| {
                                    let edit = format!("{}?edit={}/{}", paths::POOLS, pool.namespace, pool.name);
                                    let delete = format!("{}/{}/{}/delete", paths::POOLS, pool.namespace, pool.name);
                                    view! {
                                        <td class="px-3 py-2 text-right">
                                            <a href=edit class=SECONDARY_BUTTON>{locale.t("roles-edit")}</a>
                                            <details class="mt-2">
                                                <summary class="cursor-pointer text-xs">{locale.t("roles-delete")}</summary>
                                                <form method="post" action=delete class="mt-2">
                                                    <button type="submit" class=DANGER_BUTTON>{locale.t("pools-delete-confirm")}</button>
                                                </form>
                                            </details>
                                        </td>
                                    }
                                });
                                view! {
                                    <tr data-pool=pool.name.clone()>
                                        <td class="px-3 py-2" data-label=locale.t("pools-name")><span class="font-medium">{pool.name.clone()}</span><br /><span class="text-xs text-slate-500 dark:text-slate-400">{pool.namespace.clone()}</span></td>
                                        <td class="px-3 py-2" data-label=locale.t("pools-sizes")>
                                            {sizes}
                                            {stalled.map(|text| view! {
                                                <p class="mt-1 text-xs text-amber-700 dark:text-amber-300" data-testid="pool-stalled">{text}</p>
                                            })}
                                        </td>
                                        <td class="break-all px-3 py-2 text-xs" data-label=locale.t("pools-image")>{format!("{} · {} · {} CPU · {}", pool.image, pool.image_revision, pool.cpu, pool.memory)}</td>
                                        {actions}
                                    </tr>
                                }
                            }).collect_view()}
                        </tbody>
                    </table>
                </div>
            })}
            // Only for people Kubernetes lets create pools; the others may only look.
            {can_manage.then(|| view! {
                <section class=card aria-labelledby="pool-form">
                    <h2 id="pool-form" class="mb-4 text-lg font-semibold">{locale.t("pools-form-title")}</h2>
                    <form method="post" action=paths::POOLS class="grid gap-4 sm:grid-cols-2" on:submit=submit_once("pool")>
                        {field("namespace", locale.t("pools-namespace"), typed("namespace", form.namespace), "text")}
                        {field("name", locale.t("pools-name"), typed("name", form.name), "text")}
                        {field("warm_replicas", locale.t("pools-warm"), typed("warm_replicas", form.warm_replicas.to_string()), "number")}
                        {field("max_replicas", locale.t("pools-max"), typed("max_replicas", form.max_replicas.to_string()), "number")}
                        {field("image_revision", locale.t("pools-revision"), typed("image_revision", form.image_revision), "text")}
                        {field("image", locale.t("pools-image"), typed("image", form.image), "text")}
                        {field("cpu", locale.t("pools-cpu"), typed("cpu", form.cpu.to_string()), "number")}
                        {field("memory", locale.t("pools-memory"), typed("memory", form.memory), "text")}
                        {provider_field}
                        <div class="sm:col-span-2">
                            <SubmitButton
                                label=locale.t("pools-save")
                                pending_label=locale.t("form-saving")
                                form="pool"
                                class=PRIMARY_BUTTON
                            />
                        </div>
                    </form>
                </section>
            })}
        </main>
    }
}
