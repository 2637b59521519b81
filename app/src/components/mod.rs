//! Building blocks shared by the pages.

use leptos::prelude::*;

use crate::{AppError, Locale, Notice, Theme, page_state, paths};

/// Classes of the notice, the success message of the last action.
const NOTICE: &str = "rounded-lg border border-emerald-200 bg-emerald-50 px-3 py-2 text-sm text-emerald-800 dark:border-emerald-900 dark:bg-emerald-950 dark:text-emerald-200";

/// The feedback and notice of this render, if any. A page whose notice can stop holding
/// while it is open gives `notice`, which then replaces the request's. The notice's
/// polite live region (`role="status"`) is on the page from the start, empty and out of
/// sight without a notice, so a screen reader announces a notice that comes or changes
/// while the page is open (one inserted with its region may be missed).
#[component]
pub fn Messages(#[prop(optional, into)] notice: Option<Signal<Option<Notice>>>) -> impl IntoView {
    let state = page_state();
    let locale = state.locale;
    let notice = notice.unwrap_or_else(|| Signal::stored(state.notice));
    view! {
        <p
            role="status"
            class=move || if notice.with(Option::is_some) { NOTICE } else { "sr-only" }
            data-testid="notice"
        >
            {move || notice.get().map(|notice| notice.message(locale))}
        </p>
        {state.feedback.map(|f| view! { <ErrorAlert error=f.error /> })}
    }
}

/// Previous / next links keeping the other query parameters (`base` ends in `?…&` or `?`).
#[component]
pub fn Pager(base: String, page: u32, per_page: i64, total: i64) -> impl IntoView {
    let locale = page_state().locale;
    let pages = ((total + per_page - 1) / per_page).max(1);
    let page = i64::from(page);
    let previous = (page > 0).then(|| format!("{base}page={}", (page - 1).min(pages - 1)));
    let next = (page + 1 < pages).then(|| format!("{base}page={}", page + 1));
    let link = "rounded-lg border border-slate-300 px-3 py-1.5 text-sm hover:bg-slate-100 dark:border-slate-700 dark:hover:bg-slate-800";
    view! {
        <nav class="mt-4 flex items-center gap-3" aria-label="pagination">
            {previous.map(|href| view! { <a href=href class=link>{locale.t("pager-previous")}</a> })}
            <span class="text-sm text-slate-500 dark:text-slate-400">
                {locale.t_with(
                    "pager-position",
                    &[("page", (page + 1).to_string()), ("pages", pages.to_string())],
                )}
            </span>
            {next.map(|href| view! { <a href=href class=link>{locale.t("pager-next")}</a> })}
        </nav>
    }
}

/// The two-language switch: a plain form posting the chosen tag to the server, which
/// remembers it in a cookie and sends the browser back to this page.
#[component]
pub fn LanguageSwitch() -> impl IntoView {
    let state = page_state();
    let locale = state.locale;
    let here = state.path;
    view! {
        <form method="post" action=paths::LOCALE class="flex items-center gap-1 text-sm">
            <input type="hidden" name="next" value=here />
            <span class="sr-only">{locale.t("language-label")}</span>
            {Locale::ALL
                .into_iter()
                .map(|option| {
                    let current = option == locale;
                    view! {
                        <button
                            type="submit"
                            name="lang"
                            value=option.tag()
                            lang=option.tag()
                            aria-pressed=if current { "true" } else { "false" }
                            class=if current {
                                "whitespace-nowrap rounded-md px-2 py-1 font-semibold text-indigo-700 dark:text-indigo-300"
                            } else {
                                "whitespace-nowrap rounded-md px-2 py-1 text-slate-500 hover:text-slate-900 focus-visible:outline-2 focus-visible:outline-indigo-500 dark:text-slate-400 dark:hover:text-white"
                            }
                        >
                            {locale.t(&format!("language-{}", option.tag()))}
                        </button>
                    }
                })
                .collect_view()}
        </form>
    }
}

/// The theme switch (system, light, dark): a plain form like the language switch, the
/// server remembering the choice in a cookie and sending the browser back to this page.
/// Each button shows a symbol, its name for screen readers and as its tooltip: three
/// words would take the room the header needs to stay on one line (in Japanese at
/// 1280 px it wrapped).
#[component]
pub fn ThemeSwitch() -> impl IntoView {
    let state = page_state();
    let locale = state.locale;
    let chosen = state.theme;
    view! {
        <form method="post" action=paths::THEME class="flex items-center gap-1 text-sm">
            <input type="hidden" name="next" value=state.path />
            <span class="sr-only">{locale.t("theme-label")}</span>
            {Theme::ALL
                .into_iter()
                .map(|option| {
                    let current = option == chosen;
                    view! {
                        <button
                            type="submit"
                            name="theme"
                            value=option.tag()
                            title=locale.t(&format!("theme-{}", option.tag()))
                            aria-pressed=if current { "true" } else { "false" }
                            class=if current {
                                "whitespace-nowrap rounded-md px-2 py-1 font-semibold text-indigo-700 dark:text-indigo-300"
                            } else {
                                "whitespace-nowrap rounded-md px-2 py-1 text-slate-500 hover:text-slate-900 dark:text-slate-400 dark:hover:text-white"
                            }
                        >
                            <span aria-hidden="true">{option.symbol()}</span>
                            <span class="sr-only">{locale.t(&format!("theme-{}", option.tag()))}</span>
                        </button>
                    }
                })
                .collect_view()}
        </form>
    }
}

/// A form's error, announced to screen readers.
#[component]
pub fn ErrorAlert(error: AppError) -> impl IntoView {
    let locale = page_state().locale;
    view! {
        <p
            role="alert"
            class="rounded-lg border border-red-200 bg-red-50 px-3 py-2 text-sm text-red-800 dark:border-red-900 dark:bg-red-950 dark:text-red-200"
        >
            {error.message(locale)}
        </p>
    }
}

/// What the page knows once it runs in the browser, shared by its controls (provided by
/// [`crate::App`]; on the server nothing happens to it). Kept at the page, not in the
/// controls: a live update renders the dashboard's pools and rows anew, and what a button
/// shows must survive that.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Browser {
    /// The page is hydrated: controls that need JavaScript (copy buttons) may show.
    pub hydrated: RwSignal<bool>,
    /// The form of the page that has been sent (the name given to [`submit_once`]): the
    /// browser is on its way to the server's answer, and a second submit would run the
    /// action twice (a double click on "Claim a sandbox" made two claims). Cleared when
    /// the page comes back from the back-forward cache.
    pub sent: RwSignal<Option<String>>,
    /// The last copy to the clipboard, shown beside the copy button that made it for
    /// about two seconds.
    pub copied: RwSignal<Option<Copied>>,
    /// The live stream ended because the session did ([`crate::SESSION_ENDED_EVENT`]):
    /// the header says so instead of who is signed in, and countdowns stop.
    pub session_ended: RwSignal<bool>,
}

/// A copy to the clipboard and how it went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Copied {
    /// The `id` of the [`CopyButton`] pressed. Not the text: the same claim's connect
    /// command sits in "My sandboxes" and in "All sandboxes", and only the button pressed
    /// says it copied.
    pub button: String,
    pub ok: bool,
    /// Tells this copy from a later one by the same button, so only its own timer clears it.
    pub serial: u64,
}

impl Browser {
    /// Provides the signals and, in the browser, marks the page hydrated once it is. A
    /// page showing a notice then shows its own address ([`crate::PageState::path`],
    /// which the server gives without the notice's `?claimed=…`), so a reload or a
    /// bookmark does not announce the action again.
    pub(crate) fn provide() {
        let browser = Self::fresh();
        provide_context(browser);
        let address = use_context::<crate::PageState>()
            .filter(|state| state.notice.is_some())
            .map(|state| state.path);
        // Effects run only in the browser, after hydration.
        Effect::new(move |_| {
            browser.hydrated.set(true);
            #[cfg(feature = "hydrate")]
            if let Some(address) = &address {
                show_address(address);
            }
            #[cfg(not(feature = "hydrate"))]
            let _ = &address;
        });
        #[cfg(feature = "hydrate")]
        {
            let _listener = window_event_listener(
                leptos::ev::pageshow,
                move |event: web_sys::PageTransitionEvent| {
                    if event.persisted() {
                        browser.sent.set(None);
                    }
                },
            );
        }
    }

    /// The page's signals; outside [`crate::App`] (unit tests), fresh ones.
    pub(crate) fn get() -> Self {
        use_context::<Self>().unwrap_or_else(Self::fresh)
    }

    fn fresh() -> Self {
        Self {
            hydrated: RwSignal::new(false),
            sent: RwSignal::new(None),
            copied: RwSignal::new(None),
            session_ended: RwSignal::new(false),
        }
    }
}

/// Puts `address` (a path and query of this site) in the address bar in place of this
/// page's, without a navigation or a new history entry.
#[cfg(feature = "hydrate")]
fn show_address(address: &str) {
    let Some(window) = web_sys::window() else {
        return;
    };
    let location = window.location();
    let here = format!(
        "{}{}",
        location.pathname().unwrap_or_default(),
        location.search().unwrap_or_default()
    );
    if here != address
        && let Ok(history) = window.history()
    {
        let _ = history.replace_state_with_url(&wasm_bindgen::JsValue::NULL, "", Some(address));
    }
}

/// The `submit` handler of the form named `form` (any name unique on the page, the same
/// its [`SubmitButton`] is given): the first submit goes and marks its button busy; once
/// hydrated, every later submit on the page, of this form or another, is held back until
/// the answer arrives. Without JavaScript the form posts as usual.
pub fn submit_once(form: impl Into<String>) -> impl Fn(leptos::ev::SubmitEvent) + Clone + 'static {
    let sent = Browser::get().sent;
    let form = form.into();
    move |event| {
        if sent.with_untracked(Option::is_some) {
            event.prevent_default();
            return;
        }
        sent.set(Some(form.clone()));
    }
}

/// Classes of the full-width primary button of the sign-in style cards.
const CARD_SUBMIT: &str = "w-full rounded-lg bg-indigo-600 px-4 py-2.5 font-semibold text-white shadow-sm hover:bg-indigo-500 focus-visible:outline-2 focus-visible:outline-offset-2 focus-visible:outline-indigo-600";

/// A submit button that, once hydrated, shows it is working while the browser waits
/// (SPEC §8: progress indication on every action that waits) and is disabled, as is every
/// other one on the page, so no action is sent twice. `form` names its form, whose
/// `on:submit` must be [`submit_once`] with the same name. `class` defaults to the
/// sign-in cards' full-width button.
#[component]
pub fn SubmitButton(
    label: String,
    pending_label: String,
    #[prop(into)] form: String,
    #[prop(optional)] class: Option<&'static str>,
) -> impl IntoView {
    let sent = Browser::get().sent;
    let busy = Memo::new(move |_| sent.with(|sent| sent.as_deref() == Some(form.as_str())));
    let class = format!(
        "{} whitespace-nowrap aria-busy:opacity-70 disabled:cursor-wait disabled:opacity-70",
        class.unwrap_or(CARD_SUBMIT)
    );
    view! {
        <button
            type="submit"
            class=class
            disabled=move || sent.with(Option::is_some)
            aria-busy=move || if busy.get() { "true" } else { "false" }
        >
            {move || if busy.get() { pending_label.clone() } else { label.clone() }}
        </button>
    }
}

/// The top bar of signed-in pages: product name, who is signed in, language, sign-out.
#[component]
pub fn AppHeader() -> impl IntoView {
    let state = page_state();
    let locale = state.locale;
    let is_admin = state.user.as_ref().is_some_and(|u| u.is_admin());
    let pools = state.nav.pools;
    // While the password must change, every other page redirects back: offer none.
    let navigable = state.user.as_ref().is_some_and(|u| !u.must_change_password);
    let who = state
        .user
        .as_ref()
        .map(|u| locale.t_with("signed-in-as", &[("name", u.label().to_owned())]));
    let ended = Browser::get().session_ended;
    let sign_in_again = format!(
        "{}?next={}",
        paths::SIGN_IN,
        crate::pages::encode(&state.path)
    );
    view! {
        <SkipLink />
        <header class="border-b border-slate-200 bg-white/80 dark:border-slate-800 dark:bg-slate-900/80">
            <div class="mx-auto flex max-w-7xl flex-wrap items-center gap-x-6 gap-y-2 px-4 py-3">
                <a href=paths::DASHBOARD.to_owned() class="font-semibold tracking-tight">
                    {locale.t("app-name")}
                </a>
                {navigable
                    .then(|| {
                        view! {
                        <nav class="flex flex-wrap gap-x-4 gap-y-1 text-sm">
                            <a href=paths::DASHBOARD.to_owned() class="whitespace-nowrap hover:underline">
                                {locale.t("nav-dashboard")}
                            </a>
                            {pools
                                .then(|| {
                                    view! {
                                        <a href=paths::POOLS.to_owned() class="whitespace-nowrap hover:underline">
                                            {locale.t("nav-pools")}
                                        </a>
                                    }
                                })}
                            {is_admin
                                .then(|| {
                                    view! {
                                        <a href=paths::USERS.to_owned() class="whitespace-nowrap hover:underline">
                                            {locale.t("nav-users")}
                                        </a>
                                        <a href=paths::ROLES.to_owned() class="whitespace-nowrap hover:underline">
                                            {locale.t("nav-roles")}
                                        </a>
                                        <a href=paths::AUDIT.to_owned() class="whitespace-nowrap hover:underline">
                                            {locale.t("nav-audit")}
                                        </a>
                                    }
                                })}
                            <a href=paths::ACCOUNT.to_owned() class="whitespace-nowrap hover:underline">
                                {locale.t("nav-account")}
                            </a>
                        </nav>
                        }
                    })}
                <div class="ms-auto flex flex-wrap items-center justify-end gap-x-4 gap-y-2">
                    {move || {
                        if ended.get() {
                            view! {
                                <p role="alert" class="text-sm font-medium text-red-700 dark:text-red-300" data-testid="session-ended">
                                    {locale.t("session-ended")}
                                    " "
                                    <a href=sign_in_again.clone() class="underline">{locale.t("session-ended-sign-in")}</a>
                                </p>
                            }
                            .into_any()
                        } else {
                            view! {
                                <span class="text-sm text-slate-600 dark:text-slate-300" data-testid="signed-in-as">
                                    {who.clone()}
                                </span>
                            }
                            .into_any()
                        }
                    }}
                    <LanguageSwitch />
                    <ThemeSwitch />
                    <SignOutButton />
                </div>
            </div>
        </header>
    }
}

/// The first stop of the keyboard on a page with the header: a link past it to the page's
/// `<main id="main">`, hidden until focused (WCAG 2.4.1, bypass blocks).
#[component]
pub fn SkipLink() -> impl IntoView {
    let locale = page_state().locale;
    view! {
        <a
            href="#main"
            class="sr-only focus:not-sr-only focus:fixed focus:start-2 focus:top-2 focus:z-50 focus:rounded-lg focus:bg-white focus:px-4 focus:py-2 focus:font-semibold focus:text-indigo-800 focus:shadow-lg focus:outline-2 focus:outline-indigo-600 dark:focus:bg-slate-900 dark:focus:text-indigo-200"
            data-testid="skip-link"
        >
            {locale.t("skip-to-content")}
        </a>
    }
}

/// Signs out with a POST (never a GET link: sign-out changes state).
#[component]
pub fn SignOutButton() -> impl IntoView {
    let locale = page_state().locale;
    view! {
        <form method="post" action=paths::SIGN_OUT>
            <button
                type="submit"
                class="whitespace-nowrap rounded-lg border border-slate-300 px-3 py-1.5 text-sm hover:bg-slate-100 dark:border-slate-700 dark:hover:bg-slate-800"
            >
                {locale.t("sign-out")}
            </button>
        </form>
    }
}

/// Copies `text` to the clipboard, then says "Copied" for about two seconds (or that it
/// could not), politely announced to screen readers. It exists only once hydrated and
/// where the browser has a clipboard (secure contexts): without JavaScript a button would
/// do nothing, and the text beside it can be selected and copied by hand. `id` names the
/// button among the page's copy buttons, the same on every render (a live update renders
/// the dashboard's rows anew, and the button must still say it copied).
#[component]
pub fn CopyButton(text: String, label: String, #[prop(into)] id: String) -> impl IntoView {
    let locale = page_state().locale;
    let Browser {
        hydrated, copied, ..
    } = Browser::get();
    let said = {
        let id = id.clone();
        move || {
            copied.with(|last| {
                last.as_ref()
                    .filter(|c| c.button == id)
                    .map(|c| locale.t(if c.ok { "copy-done" } else { "copy-failed" }))
            })
        }
    };
    let copy = move |_| {
        #[cfg(feature = "hydrate")]
        {
            use std::sync::atomic::{AtomicU64, Ordering};
            let Some(window) = web_sys::window() else {
                return;
            };
            let written = window.navigator().clipboard().write_text(&text);
            let button = id.clone();
            leptos::task::spawn_local(async move {
                let ok = wasm_bindgen_futures::JsFuture::from(written).await.is_ok();
                static SERIAL: AtomicU64 = AtomicU64::new(0);
                let serial = SERIAL.fetch_add(1, Ordering::Relaxed);
                copied.set(Some(Copied { button, ok, serial }));
                set_timeout(
                    move || {
                        if copied.with_untracked(|c| c.as_ref().is_some_and(|c| c.serial == serial))
                        {
                            copied.set(None);
                        }
                    },
                    std::time::Duration::from_secs(2),
                );
            });
        }
        #[cfg(not(feature = "hydrate"))]
        let _ = (&text, &id);
    };
    move || {
        (hydrated.get() && clipboard_available()).then(|| {
            let label = label.clone();
            let copy = copy.clone();
            let said = said.clone();
            view! {
                <span class="inline-flex items-center gap-2">
                    <button type="button" class=crate::pages::SECONDARY_BUTTON on:click=copy>{label}</button>
                    <span aria-live="polite" class="text-xs text-slate-600 dark:text-slate-300" data-testid="copy-status">
                        {said}
                    </span>
                </span>
            }
        })
    }
}

/// Whether `navigator.clipboard` exists: only in secure contexts (HTTPS, loopback).
fn clipboard_available() -> bool {
    #[cfg(feature = "hydrate")]
    {
        web_sys::window().is_some_and(|w| w.is_secure_context())
    }
    #[cfg(not(feature = "hydrate"))]
    {
        false
    }
}

/// Once hydrated: sets `live` to each JSON snapshot the server pushes on `url`
/// (server-sent events; the browser reconnects by itself after an error), and marks the
/// session ended ([`Browser::session_ended`]) when the server says so. Without
/// JavaScript the page stays as rendered and a reload shows the news.
pub fn follow_events<T>(url: String, live: RwSignal<T>)
where
    T: serde::de::DeserializeOwned + Send + Sync + 'static,
{
    #[cfg(feature = "hydrate")]
    {
        use wasm_bindgen::JsCast;
        use wasm_bindgen::closure::Closure;
        let Ok(source) = web_sys::EventSource::new(&url) else {
            return;
        };
        let on_message = Closure::<dyn FnMut(web_sys::MessageEvent)>::new(
            move |event: web_sys::MessageEvent| {
                if let Some(text) = event.data().as_string()
                    && let Ok(snapshot) = serde_json::from_str::<T>(&text)
                {
                    live.set(snapshot);
                }
            },
        );
        source.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        // The session ended: no reconnecting (it would only be sent to the sign-in page).
        let session_ended = Browser::get().session_ended;
        let ended_source = source.clone();
        let on_ended = Closure::<dyn FnMut(web_sys::Event)>::new(move |_: web_sys::Event| {
            ended_source.close();
            session_ended.set(true);
        });
        let _ = source.add_event_listener_with_callback(
            crate::SESSION_ENDED_EVENT,
            on_ended.as_ref().unchecked_ref(),
        );
        // The page lives as long as the document (there is no client-side router), so the
        // handlers and the connection live as long too.
        on_message.forget();
        on_ended.forget();
    }
    #[cfg(not(feature = "hydrate"))]
    let _ = (url, live);
}
