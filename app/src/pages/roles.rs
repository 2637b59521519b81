use leptos::prelude::*;

use super::{DANGER_BUTTON, INPUT_CLASS, PRIMARY_BUTTON, SECONDARY_BUTTON};
use crate::components::{AppHeader, Messages, SubmitButton, submit_once};
use crate::i18n::Locale;
use crate::{PageData, RoleRow, page_state, paths};

/// Roles (admins, SPEC §5): the built-in and custom roles with their Kubernetes rules in
/// a readable form and who holds them; create, edit and delete custom roles. Kubernetes
/// reads and writes the ClusterRoles as the signed-in admin, so its RBAC decides.
#[component]
pub fn Roles() -> impl IntoView {
    let state = page_state();
    let locale = state.locale;
    let view = match state.data {
        PageData::Roles(view) => view,
        _ => Default::default(),
    };
    let card = "rounded-2xl border border-slate-200 bg-white p-6 shadow-sm dark:border-slate-800 dark:bg-slate-900";
    let editing = view.editing.clone();
    // After a refused save, what was typed and ticked; else the role being edited (also
    // after a stale edit, which is answered with the role as it is now).
    let typed = state
        .feedback
        .as_ref()
        .map(|f| f.values.clone())
        .filter(|values| !values.is_empty());
    let (typed_name, version) = match (&typed, &editing) {
        (Some(values), _) => (
            values.get("name").cloned().unwrap_or_default(),
            values.get("version").cloned().unwrap_or_default(),
        ),
        (None, Some(role)) => (role.name.clone(), role.version.clone()),
        (None, None) => (String::new(), String::new()),
    };
    // An edit changes the role it was opened on; a new role is another form.
    let is_edit = !version.is_empty();
    let title = if is_edit {
        locale.t_with("roles-form-edit-title", &[("name", typed_name.clone())])
    } else {
        locale.t("roles-form-title")
    };
    let granted = move |resource: &str, verb: &str| match &typed {
        Some(values) => values
            .get(&format!("grant.{resource}.{verb}"))
            .is_some_and(|v| v == "on"),
        None => editing
            .as_ref()
            .is_some_and(|e| e.grants.iter().any(|(r, v)| r == resource && v == verb)),
    };
    view! {
        <AppHeader />
        <main id="main" tabindex="-1" class="mx-auto max-w-5xl space-y-8 px-4 py-8">
            <h1 class="text-2xl font-semibold tracking-tight">{locale.t("roles-title")}</h1>
            <Messages />
            <RoleList title=locale.t("roles-builtin-title") roles=view.builtin editable=false locale />
            <RoleList title=locale.t("roles-custom-title") roles=view.custom editable=true locale />
            <section class=card aria-labelledby="role-form">
                <h2 id="role-form" class="mb-2 text-lg font-semibold">{title}</h2>
                <p class="mb-4 text-sm text-slate-600 dark:text-slate-300">{locale.t("roles-form-help")}</p>
                {is_edit.then(|| view! {
                    <p class="mb-4 text-sm">
                        <a class="underline" href=paths::ROLES>{locale.t("roles-form-new")}</a>
                    </p>
                })}
                <form method="post" action=paths::ROLES class="space-y-4" on:submit=submit_once("role")>
                    {is_edit.then(|| view! { <input type="hidden" name="version" value=version.clone() /> })}
                    <div>
                        <label class="block text-sm font-medium">
                            {locale.t("roles-name")}
                            <input class=INPUT_CLASS type="text" name="name" value=typed_name required readonly=is_edit autocapitalize="none" spellcheck="false" aria-describedby="role-name-hint" />
                        </label>
                        <p id="role-name-hint" class="mt-1 text-xs text-slate-500 dark:text-slate-400">{locale.t("roles-name-hint")}</p>
                    </div>
                    // One group of checkboxes per resource, each with its verb beside it: it
                    // wraps to a phone's width (a resources × verbs table did not).
                    <div class="grid gap-3 sm:grid-cols-3" data-testid="role-grid">
                        {view.resources.iter().map(|resource| view! {
                            <fieldset class="rounded-lg border border-slate-200 p-3 dark:border-slate-700">
                                <legend class="px-1 font-mono text-xs">{resource.clone()}</legend>
                                <div class="flex flex-wrap gap-x-4 gap-y-2 text-sm">
                                    {view.verbs.iter().map(|verb| {
                                        let field = format!("grant.{resource}.{verb}");
                                        let label = format!("{verb} {resource}");
                                        view! {
                                            <label class="inline-flex items-center gap-1.5">
                                                <input type="checkbox" name=field value="on" aria-label=label checked=granted(resource, verb) />
                                                {verb.clone()}
                                            </label>
                                        }
                                    }).collect_view()}
                                </div>
                            </fieldset>
                        }).collect_view()}
                    </div>
                    <SubmitButton
                        label=locale.t("roles-save")
                        pending_label=locale.t("form-saving")
                        form="role"
                        class=PRIMARY_BUTTON
                    />
                </form>
            </section>
        </main>
    }
}

#[component]
fn RoleList(title: String, roles: Vec<RoleRow>, editable: bool, locale: Locale) -> impl IntoView {
    let th = "px-3 py-2 text-left font-medium";
    let (table, none) = if editable {
        ("custom-roles-table", "roles-custom-none")
    } else {
        ("builtin-roles-table", "roles-builtin-none")
    };
    let empty = roles.is_empty();
    view! {
        <section class="space-y-3">
            <h2 class="text-lg font-semibold">{title}</h2>
            // No table without rows: a sentence says there is none.
            {empty.then(|| view! { <p class="text-sm text-slate-500 dark:text-slate-400" data-testid=format!("{table}-empty")>{locale.t(none)}</p> })}
            {(!empty).then(|| view! {
                <div class="relative overflow-x-auto rounded-xl border border-slate-200 dark:border-slate-800">
                    <table class="table-stack min-w-full divide-y divide-slate-200 text-sm dark:divide-slate-800" data-testid=table>
                        <thead class="bg-slate-100 dark:bg-slate-900">
                            <tr>
                                <th class=th scope="col">{locale.t("roles-name")}</th>
                                <th class=th scope="col">{locale.t("roles-rules")}</th>
                                <th class=th scope="col">{locale.t("roles-holders")}</th>
                                <th class=th scope="col"><span class="sr-only">{locale.t("roles-actions")}</span></th>
                            </tr>
                        </thead>
                        <tbody class="divide-y divide-slate-200 dark:divide-slate-800">
                            {roles.into_iter().map(|role| {
                                let actions = editable.then(|| {
                                    let edit = format!("{}?edit={}", paths::ROLES, role.name);
                                    let delete = format!("{}/{}/delete", paths::ROLES, role.name);
                                    view! {
                                        <a href=edit class=format!("inline-block whitespace-nowrap {SECONDARY_BUTTON}")>{locale.t("roles-edit")}</a>
                                        <details class="mt-2">
                                            <summary class="cursor-pointer text-xs">{locale.t("roles-delete")}</summary>
                                            <form method="post" action=delete class="mt-2">
                                                <button type="submit" class=DANGER_BUTTON>{locale.t("roles-delete-confirm")}</button>
                                            </form>
                                        </details>
                                    }
                                });
                                view! {
                                    <tr data-role=role.name.clone()>
                                        <td class="px-3 py-2 font-medium" data-label=locale.t("roles-name")>{role.name.clone()}</td>
                                        <td class="px-3 py-2" data-label=locale.t("roles-rules")>
                                            <ul class="space-y-1 break-words text-xs">
                                                {role.rules.iter().map(|r| view! { <li>{r.clone()}</li> }).collect_view()}
                                            </ul>
                                        </td>
                                        <td class="px-3 py-2 text-xs" data-label=locale.t("roles-holders") data-testid="holders">{role.holders.join(", ")}</td>
                                        <td class="px-3 py-2 text-right">{actions}</td>
                                    </tr>
                                }
                            }).collect_view()}
                        </tbody>
                    </table>
                </div>
            })}
        </section>
    }
}
