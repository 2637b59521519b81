use banlieue_domain::claim::{ClaimPhase, ClaimReason, ReleaseReason, WaitReason};
use leptos::prelude::*;

use super::{DANGER_BUTTON, PRIMARY_BUTTON, SECONDARY_BUTTON};
use crate::components::{
    AppHeader, CopyButton, Messages, SubmitButton, follow_events, submit_once,
};
use crate::i18n::Locale;
use crate::{ClaimRow, DashboardView, Notice, PageData, PoolRow, page_state, paths};

/// The self-service heart of the console (SPEC §6): the pools this person may see, each
/// with a claim form when Kubernetes allows it, and their own sandboxes with phase,
/// countdown, addresses and release. Server-rendered and complete without JavaScript;
/// once hydrated, the sandboxes update live from `/events/dashboard` and the countdowns
/// tick.
#[component]
pub fn Dashboard() -> impl IntoView {
    let state = page_state();
    let locale = state.locale;
    let name = state
        .user
        .as_ref()
        .map(|u| u.label().to_owned())
        .unwrap_or_default();
    let view_data = match state.data {
        PageData::Dashboard(view) => view,
        _ => DashboardView::default(),
    };
    // The lifetime the claim forms show, kept here: a live update renders them anew.
    let ttl = RwSignal::new(view_data.ttl_chosen);
    let live = RwSignal::new(view_data);
    follow_events(paths::DASHBOARD_EVENTS.to_owned(), live);
    let request_notice = state.notice;
    let notice = Signal::derive(move || {
        request_notice
            .clone()
            .map(|notice| live.with(|view| settled(notice, view)))
    });
    view! {
        <AppHeader />
        <main id="main" tabindex="-1" class="mx-auto max-w-5xl space-y-8 px-4 py-8">
            <div>
                <h1 class="text-2xl font-semibold tracking-tight">{locale.t("dashboard-title")}</h1>
                <p class="mt-1 text-slate-600 dark:text-slate-300" data-testid="welcome">
                    {locale.t_with("dashboard-welcome", &[("name", name)])}
                </p>
            </div>
            <Messages notice />
            {move || {
                let view = live.get();
                if view.cluster {
                    let all = (!view.all_claims.is_empty()).then(|| view! {
                        <Claims claims=view.all_claims.clone() everyone=true locale />
                    });
                    view! {
                        <Pools pools=view.pools.clone() ttl_choices=view.ttl_choices.clone() ttl locale />
                        <Claims claims=view.claims everyone=false locale />
                        {all}
                    }
                    .into_any()
                } else {
                    view! {
                        <p class="rounded-2xl border border-dashed border-slate-300 p-10 text-center dark:border-slate-700">
                            {locale.t("dashboard-no-cluster")}
                        </p>
                    }
                    .into_any()
                }
            }}
        </main>
    }
}

/// `notice` as it holds for `view`: "created: it is bound as soon as a sandbox is
/// ready" becomes "created" once the claim is past Pending.
fn settled(notice: Notice, view: &DashboardView) -> Notice {
    match notice {
        Notice::ClaimCreated {
            name,
            waiting: true,
        } if view.claims.iter().any(|claim| {
            claim.name == name && claim.phase.is_some_and(|p| p != ClaimPhase::Pending)
        }) =>
        {
            Notice::ClaimCreated {
                name,
                waiting: false,
            }
        }
        other => other,
    }
}

/// The pools with their claim forms; `ttl` is the lifetime the forms show (the last one
/// chosen in any of them).
#[component]
fn Pools(
    pools: Vec<PoolRow>,
    ttl_choices: Vec<u32>,
    ttl: RwSignal<Option<u32>>,
    locale: Locale,
) -> impl IntoView {
    let card = "rounded-2xl border border-slate-200 bg-white p-5 shadow-sm dark:border-slate-800 dark:bg-slate-900";
    let empty = pools.is_empty();
    view! {
        <section aria-labelledby="pools-title" class="space-y-3">
            <h2 id="pools-title" class="text-lg font-semibold">{locale.t("dashboard-pools-title")}</h2>
            {empty.then(|| view! { <p class="text-sm text-slate-500 dark:text-slate-400">{locale.t("dashboard-no-pools")}</p> })}
            <ul class="grid gap-4 sm:grid-cols-2">
                {pools
                    .into_iter()
                    .map(|pool| {
                        let counts = locale.t_with(
                            "dashboard-pool-counts",
                            &[
                                ("ready", pool.ready.to_string()),
                                ("claimed", pool.claimed.to_string()),
                                ("max", pool.max.to_string()),
                            ],
                        );
                        let form = if pool.can_claim {
                            let choices = ttl_choices.clone();
                            let claim_form = format!("claim {}/{}", pool.namespace, pool.name);
                            let on_submit = submit_once(claim_form.clone());
                            view! {
                                <form
                                    method="post"
                                    action=paths::CLAIMS
                                    class="mt-4 flex flex-wrap items-end gap-3"
                                    on:submit=on_submit
                                >
                                    <input type="hidden" name="namespace" value=pool.namespace.clone() />
                                    <input type="hidden" name="pool" value=pool.name.clone() />
                                    <label class="text-sm font-medium">
                                        {locale.t("dashboard-claim-ttl")}
                                        <select
                                            name="ttl_seconds"
                                            class="mt-1 block rounded-lg border border-slate-300 bg-white px-3 py-2 dark:border-slate-700 dark:bg-slate-950"
                                            on:change=move |event| ttl.set(event_target_value(&event).parse().ok())
                                        >
                                            {choices
                                                .into_iter()
                                                .map(|secs| {
                                                    // Untracked: choosing does not render the forms anew.
                                                    let selected = ttl.get_untracked() == Some(secs);
                                                    view! { <option value=secs.to_string() selected=selected>{ttl_label(secs, locale)}</option> }
                                                })
                                                .collect_view()}
                                        </select>
                                    </label>
                                    <SubmitButton
                                        label=locale.t("dashboard-claim-submit")
                                        pending_label=locale.t("dashboard-claim-submitting")
                                        form=claim_form
                                        class=PRIMARY_BUTTON
                                    />
                                </form>
                            }
                            .into_any()
                        } else {
                            view! { <p class="mt-4 text-sm text-slate-500 dark:text-slate-400">{locale.t("dashboard-claim-forbidden")}</p> }.into_any()
                        };
                        view! {
                            <li class=card data-testid="pool" data-pool=pool.name.clone()>
                                <p class="font-semibold">{pool.name.clone()}</p>
                                <p class="text-xs text-slate-500 dark:text-slate-400">{pool.namespace.clone()}</p>
                                <p class="mt-2 text-sm" data-testid="pool-counts">{counts}</p>
                                {form}
                            </li>
                        }
                    })
                    .collect_view()}
            </ul>
        </section>
    }
}

/// A table of claims: the person's own, or (`everyone`, for operators and admins) every
/// claim with its subject.
#[component]
fn Claims(claims: Vec<ClaimRow>, everyone: bool, locale: Locale) -> impl IntoView {
    let th = "px-3 py-2 text-left font-medium";
    let empty = claims.is_empty();
    let (id, title, table) = if everyone {
        (
            "all-claims-title",
            "dashboard-all-claims-title",
            "all-claims-table",
        )
    } else {
        ("claims-title", "dashboard-claims-title", "claims-table")
    };
    view! {
        <section aria-labelledby=id class="space-y-3">
            <h2 id=id class="text-lg font-semibold">{locale.t(title)}</h2>
            {(!everyone).then(|| view! { <p class="text-xs text-slate-500 dark:text-slate-400">{locale.t("dashboard-refresh-hint")}</p> })}
            {(empty && !everyone).then(|| view! { <p class="text-sm text-slate-500 dark:text-slate-400" data-testid="no-claims">{locale.t("dashboard-no-claims")}</p> })}
            // No table without rows: the sentence above says there is nothing.
            {(!empty).then(|| view! {
                <div class="relative overflow-x-auto rounded-xl border border-slate-200 dark:border-slate-800">
                    <table class="table-stack min-w-full divide-y divide-slate-200 text-sm dark:divide-slate-800" data-testid=table>
                        <thead class="bg-slate-100 dark:bg-slate-900">
                            <tr>
                                <th class=th scope="col">{locale.t("dashboard-col-name")}</th>
                                {everyone.then(|| view! { <th class=th scope="col">{locale.t("dashboard-col-subject")}</th> })}
                                <th class=th scope="col">{locale.t("dashboard-col-pool")}</th>
                                <th class=th scope="col">{locale.t("dashboard-col-phase")}</th>
                                <th class=th scope="col">{locale.t("dashboard-col-expires")}</th>
                                <th class=th scope="col">{locale.t("dashboard-col-addresses")}</th>
                                <th class=th scope="col"><span class="sr-only">{locale.t("dashboard-release-submit")}</span></th>
                            </tr>
                        </thead>
                        <tbody class="divide-y divide-slate-200 dark:divide-slate-800">
                            {claims.into_iter().map(|claim| view! { <ClaimLine claim everyone locale /> }).collect_view()}
                        </tbody>
                    </table>
                </div>
            })}
        </section>
    }
}

#[component]
fn ClaimLine(claim: ClaimRow, everyone: bool, locale: Locale) -> impl IntoView {
    let detail = claim_detail_text(&claim, locale);
    view! {
        <tr
            data-testid=if everyone { "any-claim" } else { "claim" }
            data-claim=claim.name.clone()
            data-phase=claim.phase.map(ClaimPhase::as_str).unwrap_or_default()
        >
            <td class="px-3 py-2 font-mono text-xs" data-label=locale.t("dashboard-col-name")>
                <a href=paths::claim(&claim.namespace, &claim.name) class="text-indigo-700 hover:underline dark:text-indigo-300">
                    {claim.name.clone()}
                </a>
            </td>
            {everyone.then(|| view! {
                <td class="px-3 py-2" data-label=locale.t("dashboard-col-subject")>{claim.subject.clone()}</td>
            })}
            <td class="px-3 py-2" data-label=locale.t("dashboard-col-pool")>{claim.pool.clone()}</td>
            <td class="px-3 py-2" data-label=locale.t("dashboard-col-phase")>
                <PhaseBadge phase=claim.phase locale />
                {(!detail.is_empty()).then(|| view! { <p class="mt-1 text-xs text-slate-500 dark:text-slate-400" data-testid="claim-reason">{detail}</p> })}
            </td>
            <td class="px-3 py-2" data-label=locale.t("dashboard-col-expires")>
                {claim.expires_at.clone().map(|at| view! {
                    <Countdown
                        expires_at=at
                        remaining_secs=claim.remaining_secs.unwrap_or_default()
                        locale
                        name=claim.name.clone()
                        announce=!everyone
                    />
                })}
            </td>
            <td class="px-3 py-2" data-label=locale.t("dashboard-col-addresses")>
                <Connect
                    addresses=claim.addresses.clone()
                    copy_id=format!("{}:{}/{}", if everyone { "all" } else { "mine" }, claim.namespace, claim.name)
                    locale
                />
            </td>
            <td class="px-3 py-2 text-right">
                {claim.can_release.then(|| view! { <ReleaseForm namespace=claim.namespace.clone() name=claim.name.clone() locale /> })}
            </td>
        </tr>
    }
}

/// Why a claim is in its phase, in the person's language for the reasons the claim
/// controller writes (crates/cluster/src/claim.rs); otherwise "reason: message" as
/// Kubernetes has them (another controller's words), or empty.
pub(super) fn claim_detail_text(claim: &ClaimRow, locale: Locale) -> String {
    let key = match &claim.reason {
        Some(ClaimReason::Waiting(WaitReason::NoReadyMember)) => "claim-reason-no-ready-member",
        Some(ClaimReason::Waiting(WaitReason::PoolNotFound)) => "claim-reason-pool-not-found",
        Some(ClaimReason::Waiting(WaitReason::PoolNotProgressing)) => {
            return locale.t_with(
                "claim-reason-pool-not-progressing",
                &[
                    ("pool", claim.pool.clone()),
                    ("message", claim.message.clone()),
                ],
            );
        }
        Some(ClaimReason::VirtualMachineGone) => "claim-reason-vm-gone",
        Some(ClaimReason::Released(ReleaseReason::Released)) => "claim-reason-released",
        Some(ClaimReason::Released(ReleaseReason::Expired)) => "claim-reason-expired",
        Some(ClaimReason::Other(reason)) => {
            return [reason.as_str(), claim.message.as_str()]
                .into_iter()
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join(": ");
        }
        None => return claim.message.clone(),
    };
    locale.t_with(key, &[("pool", claim.pool.clone())])
}

/// The sandbox's addresses and a ready-to-paste connect command with a copy button
/// (`copy_id` names it, see [`CopyButton`]).
#[component]
pub(super) fn Connect(addresses: Vec<String>, copy_id: String, locale: Locale) -> impl IntoView {
    let connect = addresses
        .first()
        .map(|address| format!("ssh sandbox@{address}"));
    view! {
        <ul class="space-y-1">
            {addresses.iter().map(|a| view! { <li class="font-mono text-xs">{a.clone()}</li> }).collect_view()}
        </ul>
        {connect.map(|command| view! {
            <div class="mt-2 flex flex-wrap items-center gap-2">
                <code class="break-all rounded bg-slate-100 px-2 py-1 text-xs dark:bg-slate-800" data-testid="connect">{command.clone()}</code>
                <CopyButton text=command label=locale.t("dashboard-copy") id=copy_id />
            </div>
        })}
    }
}

/// Release behind a confirmation (a `<details>`, so it works without JavaScript).
#[component]
pub(super) fn ReleaseForm(namespace: String, name: String, locale: Locale) -> impl IntoView {
    let question = locale.t_with("dashboard-release-confirm", &[("name", name.clone())]);
    let release_form = format!("release {namespace}/{name}");
    let on_submit = submit_once(release_form.clone());
    view! {
        <details>
            <summary class=SECONDARY_BUTTON>{locale.t("dashboard-release")}</summary>
            <form
                method="post"
                action=paths::release(&namespace, &name)
                class="mt-2 space-y-2"
                on:submit=on_submit
            >
                <p class="text-xs">{question}</p>
                <SubmitButton
                    label=locale.t("dashboard-release-submit")
                    pending_label=locale.t("dashboard-release-submitting")
                    form=release_form
                    class=DANGER_BUTTON
                />
            </form>
        </details>
    }
}

#[component]
pub(super) fn PhaseBadge(phase: Option<ClaimPhase>, locale: Locale) -> impl IntoView {
    let (key, color) = match phase {
        Some(ClaimPhase::Bound) => (
            "phase-bound",
            "bg-emerald-100 text-emerald-800 dark:bg-emerald-950 dark:text-emerald-200",
        ),
        // None: the controller has not seen the claim yet; to the person it is waiting.
        Some(ClaimPhase::Pending) | None => (
            "phase-pending",
            "bg-amber-100 text-amber-800 dark:bg-amber-950 dark:text-amber-200",
        ),
        Some(ClaimPhase::Releasing) => (
            "phase-releasing",
            "bg-slate-200 text-slate-800 dark:bg-slate-800 dark:text-slate-200",
        ),
        Some(ClaimPhase::Failed) => (
            "phase-failed",
            "bg-red-100 text-red-800 dark:bg-red-950 dark:text-red-200",
        ),
    };
    view! {
        <span class=format!("inline-block whitespace-nowrap rounded-full px-2 py-0.5 text-xs font-medium {color}") data-testid="phase">
            {locale.t(key)}
        </span>
    }
}

/// "in 59 minutes (59:58)", "in 3 h 59 min (3:59:58)", with the instant as its title;
/// once hydrated it counts down every second, until the session ends. The clock is no
/// live region (it would speak every second); with `announce` (once per claim on a page)
/// a polite one beside it says when claim `name` passes [`MILESTONES`] while the page is
/// open, and says nothing in between.
#[component]
pub(super) fn Countdown(
    expires_at: String,
    remaining_secs: i64,
    locale: Locale,
    name: String,
    announce: bool,
) -> impl IntoView {
    let remaining = RwSignal::new(remaining_secs);
    let passed = Memo::new(move |_| milestone(remaining_secs, remaining.get()));
    let announcement = move || passed.get().map(|secs| milestone_text(&name, secs, locale));
    #[cfg(feature = "hydrate")]
    {
        // Once the session ended the page is no longer followed: the clock stops with it.
        let ended = crate::components::Browser::get().session_ended;
        let handle = set_interval_with_handle(
            move || {
                if !ended.get_untracked() {
                    remaining.update(|r| *r = (*r - 1).max(0));
                }
            },
            std::time::Duration::from_secs(1),
        );
        if let Ok(handle) = handle {
            on_cleanup(move || handle.clear());
        }
    }
    let text = move || countdown_text(remaining.get(), locale);
    view! {
        <time datetime=expires_at.clone() title=expires_at data-testid="countdown">{text}</time>
        {announce.then(|| view! {
            <span class="sr-only" aria-live="polite" data-testid="countdown-announcement">{announcement}</span>
        })}
    }
}

/// The times left (seconds) a countdown announces when it reaches them: ten, five and one
/// minute, and the end.
pub(super) const MILESTONES: [i64; 4] = [600, 300, 60, 0];

/// The last of [`MILESTONES`] reached counting down from `start` to `now` seconds left,
/// if any (one reached before the page opened is not announced).
fn milestone(start: i64, now: i64) -> Option<i64> {
    MILESTONES
        .into_iter()
        .rev()
        .find(|&m| now <= m && m < start)
}

/// What the live region says as claim `name` reaches `secs` left.
fn milestone_text(name: &str, secs: i64, locale: Locale) -> String {
    let name = ("name", name.to_owned());
    if secs == 0 {
        locale.t_with("countdown-expired", &[name])
    } else {
        locale.t_with(
            "countdown-milestone",
            &[name, ("minutes", (secs / 60).to_string())],
        )
    }
}

/// What a countdown says with `secs` left: words, then the clock.
fn countdown_text(secs: i64, locale: Locale) -> String {
    let (hours, minutes, seconds) = (secs / 3600, secs % 3600 / 60, secs % 60);
    if hours > 0 {
        let words = locale.t_with(
            "dashboard-expires-in-hours",
            &[
                ("hours", hours.to_string()),
                ("minutes", minutes.to_string()),
            ],
        );
        format!("{words} ({hours}:{minutes:02}:{seconds:02})")
    } else if minutes > 0 {
        let words = locale.t_with("dashboard-expires-in", &[("minutes", minutes.to_string())]);
        format!("{words} ({minutes}:{seconds:02})")
    } else {
        format!("{} (0:{seconds:02})", locale.t("dashboard-expires-soon"))
    }
}

pub(super) fn ttl_label(secs: u32, locale: Locale) -> String {
    if secs.is_multiple_of(3600) {
        locale.t_with("ttl-hours", &[("hours", (secs / 3600).to_string())])
    } else if secs.is_multiple_of(60) {
        locale.t_with("ttl-minutes", &[("minutes", (secs / 60).to_string())])
    } else {
        locale.t_with("ttl-seconds", &[("seconds", secs.to_string())])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_countdown_announces_the_milestones_it_reaches_on_the_page_only() {
        let cases = [
            // (seconds left when the page opened, now, announced)
            (900, 900, None),
            (900, 601, None),
            (900, 600, Some(600)),
            (900, 301, Some(600)),
            (900, 300, Some(300)),
            (900, 59, Some(60)),
            (900, 0, Some(0)),
            // Reached before the page opened: not announced again.
            (600, 600, None),
            (600, 599, None),
            (45, 30, None),
            (45, 0, Some(0)),
            (0, 0, None),
        ];
        for (start, now, announced) in cases {
            assert_eq!(milestone(start, now), announced, "{start} → {now}");
        }
        assert_eq!(
            milestone_text("sandbox-x", 300, Locale::En),
            "sandbox-x expires in 5 minutes"
        );
        assert_eq!(
            milestone_text("sandbox-x", 60, Locale::En),
            "sandbox-x expires in 1 minute"
        );
        assert_eq!(
            milestone_text("sandbox-x", 0, Locale::En),
            "sandbox-x has expired"
        );
        assert_eq!(
            milestone_text("sandbox-x", 600, Locale::Ja),
            "sandbox-x はあと 10 分で期限切れになります"
        );
    }

    #[test]
    fn countdowns_read_in_hours_minutes_or_seconds() {
        let en = |secs| countdown_text(secs, Locale::En);
        assert_eq!(en(14_398), "in 3 h 59 min (3:59:58)");
        assert_eq!(en(3_600), "in 1 h 0 min (1:00:00)");
        assert_eq!(en(3_599), "in 59 minutes (59:59)");
        assert_eq!(en(61), "in 1 minute (1:01)");
        assert_eq!(en(59), "in less than a minute (0:59)");
        assert_eq!(en(0), "in less than a minute (0:00)");
        assert_eq!(
            countdown_text(14_398, Locale::Ja),
            "あと 3 時間 59 分 (3:59:58)"
        );
    }
}
