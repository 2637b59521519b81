use leptos::prelude::*;

use super::INPUT_CLASS;
use crate::components::{AppHeader, Messages, Pager};
use crate::{Locale, PageData, UserRow, page_state, paths};

/// Users (admins): search, one page of the table, and the create form.
#[component]
pub fn Users() -> impl IntoView {
    let state = page_state();
    let locale = state.locale;
    let PageData::Users(view) = state.data else {
        return view! { <AppHeader /> <main id="main" tabindex="-1" class="mx-auto max-w-6xl px-4 py-8"><Messages /></main> }
            .into_any();
    };
    let typed = |field: &str| {
        state
            .feedback
            .as_ref()
            .map(|f| f.value(field))
            .unwrap_or_default()
    };
    let (new_name, new_display, new_email, new_roles) = (
        typed("name"),
        typed("display_name"),
        typed("email"),
        typed("roles"),
    );
    let search = view.search.clone();
    let base = format!("{}?q={}&", paths::USERS, encode(&search));
    let rows = view.rows.clone();
    view! {
        <AppHeader />
        <main id="main" tabindex="-1" class="mx-auto max-w-6xl space-y-8 px-4 py-8">
            <div class="flex flex-wrap items-end justify-between gap-4">
                <div>
                    <h1 class="text-2xl font-semibold tracking-tight">{locale.t("users-title")}</h1>
                    <p class="text-sm text-slate-500 dark:text-slate-400" data-testid="users-count">
                        {locale.t_with("users-count", &[("total", view.total.to_string())])}
                    </p>
                </div>
                <form method="get" action=paths::USERS class="flex gap-2" role="search">
                    <label class="sr-only" for="user-search">{locale.t("users-search")}</label>
                    <input
                        id="user-search"
                        class=INPUT_CLASS
                        type="search"
                        name="q"
                        value=search
                        placeholder=locale.t("users-search-placeholder")
                    />
                    <button type="submit" class=SECONDARY_BUTTON>{locale.t("users-search-submit")}</button>
                </form>
            </div>
            <Messages />
            {if rows.is_empty() {
                view! { <p class="rounded-xl border border-dashed border-slate-300 p-8 text-center dark:border-slate-700">{locale.t("users-empty")}</p> }.into_any()
            } else {
                view! { <UserTable rows locale show_tenant=view.show_tenant /> }.into_any()
            }}
            <Pager base page=view.page per_page=view.per_page total=view.total />
            <section class="max-w-xl rounded-2xl border border-slate-200 bg-white p-6 shadow-sm dark:border-slate-800 dark:bg-slate-900" aria-labelledby="create-user">
                <h2 id="create-user" class="mb-4 text-lg font-semibold">{locale.t("user-create-title")}</h2>
                <form method="post" action=paths::USERS class="space-y-4">
                    <label class="block text-sm font-medium">
                        {locale.t("user-field-name")}
                        <input class=INPUT_CLASS type="text" name="name" value=new_name required autocapitalize="none" spellcheck="false" />
                    </label>
                    <ProfileFields display_name=new_display email=new_email roles=new_roles choices=view.role_choices.clone() />
                    <PasswordChoiceFields />
                    <button type="submit" class=PRIMARY_BUTTON>{locale.t("user-create-submit")}</button>
                </form>
            </section>
        </main>
    }
    .into_any()
}

#[component]
fn UserTable(rows: Vec<UserRow>, locale: Locale, show_tenant: bool) -> impl IntoView {
    let th = "px-3 py-2 text-left font-medium";
    view! {
        <div class="relative overflow-x-auto rounded-xl border border-slate-200 dark:border-slate-800">
            <table class="table-stack min-w-full divide-y divide-slate-200 text-sm dark:divide-slate-800" data-testid="users-table">
                <thead class="bg-slate-100 dark:bg-slate-900">
                    <tr>
                        <th class=th scope="col">{locale.t("users-col-name")}</th>
                        <th class=th scope="col">{locale.t("users-col-display-name")}</th>
                        <th class=th scope="col">{locale.t("users-col-email")}</th>
                        <th class=th scope="col">{locale.t("users-col-roles")}</th>
                        {show_tenant.then(|| view! { <th class=th scope="col">{locale.t("users-col-tenant")}</th> })}
                        <th class=th scope="col">{locale.t("users-col-state")}</th>
                        <th class=th scope="col">{locale.t("users-col-last-sign-in")}</th>
                    </tr>
                </thead>
                <tbody class="divide-y divide-slate-200 dark:divide-slate-800">
                    {rows
                        .into_iter()
                        .map(|row| {
                            let href = paths::user(&row.name);
                            let badge = row.clone();
                            view! {
                                <tr>
                                    <td class="px-3 py-2 font-medium" data-label=locale.t("users-col-name")>
                                        <a href=href class="text-indigo-700 hover:underline dark:text-indigo-300">{row.name.clone()}</a>
                                    </td>
                                    <td class="px-3 py-2" data-label=locale.t("users-col-display-name")>{row.display_name.clone()}</td>
                                    <td class="break-all px-3 py-2" data-label=locale.t("users-col-email")>{row.email.clone()}</td>
                                    <td class="px-3 py-2" data-label=locale.t("users-col-roles")>{row.roles.join(", ")}</td>
                                    {show_tenant.then(|| view! { <td class="px-3 py-2" data-label=locale.t("users-col-tenant")>{row.tenant.clone().unwrap_or_default()}</td> })}
                                    <td class="px-3 py-2" data-label=locale.t("users-col-state")><StateBadge row=badge locale /></td>
                                    <td class="px-3 py-2 text-slate-500 dark:text-slate-400" data-label=locale.t("users-col-last-sign-in")>
                                        {row.last_sign_in.clone().unwrap_or_else(|| locale.t("users-never"))}
                                    </td>
                                </tr>
                            }
                        })
                        .collect_view()}
                </tbody>
            </table>
        </div>
    }
}

/// active / disabled / must change password.
#[component]
pub fn StateBadge(row: UserRow, locale: Locale) -> impl IntoView {
    let (key, class) = if row.disabled {
        (
            "state-disabled",
            "bg-slate-200 text-slate-700 dark:bg-slate-800 dark:text-slate-300",
        )
    } else if row.must_change_password {
        (
            "state-must-change",
            "bg-amber-100 text-amber-800 dark:bg-amber-950 dark:text-amber-200",
        )
    } else {
        (
            "state-active",
            "bg-emerald-100 text-emerald-800 dark:bg-emerald-950 dark:text-emerald-200",
        )
    };
    view! { <span class=format!("inline-block whitespace-nowrap rounded-full px-2 py-0.5 text-xs font-medium {class}")>{locale.t(key)}</span> }
}

/// Display name and e-mail inputs, pre-filled, and a checkbox per role of `choices`,
/// ticked for those in `roles` (names separated by spaces).
#[component]
pub fn ProfileFields(
    display_name: String,
    email: String,
    roles: String,
    choices: Vec<String>,
) -> impl IntoView {
    let locale = page_state().locale;
    let held: Vec<&str> = roles.split_whitespace().collect();
    let boxes = choices
        .iter()
        .map(|role| {
            let ticked = held.contains(&role.as_str());
            view! {
                <label class="inline-flex items-center gap-1.5 font-normal">
                    <input type="checkbox" name="roles" value=role.clone() checked=ticked />
                    <span class="font-mono">{role.clone()}</span>
                </label>
            }
        })
        .collect_view();
    view! {
        <label class="block text-sm font-medium">
            {locale.t("user-field-display-name")}
            <input class=INPUT_CLASS type="text" name="display_name" value=display_name maxlength="200" />
        </label>
        <label class="block text-sm font-medium">
            {locale.t("user-field-email")}
            <input class=INPUT_CLASS type="email" name="email" value=email maxlength="200" />
        </label>
        <fieldset class="text-sm" aria-describedby="roles-hint">
            <legend class="font-medium">{locale.t("user-field-roles")}</legend>
            <div class="mt-2 flex flex-wrap gap-x-4 gap-y-2" data-testid="role-choices">{boxes}</div>
            <p id="roles-hint" class="mt-1 text-xs text-slate-500 dark:text-slate-400">
                {locale.t("user-field-roles-hint")}
            </p>
        </fieldset>
    }
}

/// "Generate" or "type" a password.
#[component]
pub fn PasswordChoiceFields() -> impl IntoView {
    let locale = page_state().locale;
    view! {
        <fieldset class="space-y-2 text-sm">
            <label class="flex items-center gap-2">
                <input type="radio" name="password_mode" value="generate" checked />
                {locale.t("user-password-generate")}
            </label>
            <label class="flex flex-wrap items-center gap-2">
                <input type="radio" name="password_mode" value="typed" />
                {locale.t("user-password-typed")}
                <input class=INPUT_CLASS type="password" name="password" autocomplete="new-password" />
            </label>
        </fieldset>
    }
}

pub(crate) const PRIMARY_BUTTON: &str = "rounded-lg bg-indigo-600 px-4 py-2 font-semibold text-white shadow-sm hover:bg-indigo-500 focus-visible:outline-2 focus-visible:outline-offset-2 focus-visible:outline-indigo-600";
pub(crate) const SECONDARY_BUTTON: &str = "rounded-lg border border-slate-300 px-3 py-2 text-sm hover:bg-slate-100 focus-visible:outline-2 focus-visible:outline-indigo-500 dark:border-slate-700 dark:hover:bg-slate-800";
pub(crate) const DANGER_BUTTON: &str = "rounded-lg bg-red-600 px-3 py-2 text-sm font-semibold text-white hover:bg-red-500 focus-visible:outline-2 focus-visible:outline-offset-2 focus-visible:outline-red-600";

/// Percent-encodes a query value.
pub(crate) fn encode(value: &str) -> String {
    percent_encoding::utf8_percent_encode(value, percent_encoding::NON_ALPHANUMERIC).to_string()
}
