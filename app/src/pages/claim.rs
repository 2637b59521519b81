use leptos::prelude::*;

use super::dashboard::{Connect, Countdown, PhaseBadge, ReleaseForm, claim_detail_text, ttl_label};
use crate::components::{AppHeader, Messages, follow_events};
use crate::i18n::Locale;
use crate::{
    ClaimView, EndorsementCertificateView, EndorsementTrust, EndorsementVerdict, PageData,
    page_state, paths,
};

/// One sandbox (SPEC §8 claim detail): phase and why, pool, whom it is for, when it was
/// requested and bound, the countdown, the VM, how to connect, its attestation (the EK
/// certificates with their fingerprints and whether they chain), and Release. Complete
/// without JavaScript; once hydrated it follows the claim live and says when it is gone.
#[component]
pub fn ClaimDetail() -> impl IntoView {
    let state = page_state();
    let locale = state.locale;
    let PageData::Claim(view_data) = state.data else {
        return view! { <AppHeader /> <main id="main" tabindex="-1" class="mx-auto max-w-3xl px-4 py-8"><Messages /></main> }
            .into_any();
    };
    let events = paths::claim_events(&view_data.claim.namespace, &view_data.claim.name);
    let live = RwSignal::new(view_data);
    follow_events(events, live);
    view! {
        <AppHeader />
        <main id="main" tabindex="-1" class="mx-auto max-w-3xl space-y-6 px-4 py-8">
            <a href=paths::DASHBOARD.to_owned() class="text-sm text-indigo-700 hover:underline dark:text-indigo-300">
                {locale.t("claim-back")}
            </a>
            <Messages />
            {move || view! { <ClaimBody view=live.get() locale /> }}
        </main>
    }
    .into_any()
}

#[component]
fn ClaimBody(view: ClaimView, locale: Locale) -> impl IntoView {
    let claim = view.claim;
    let card = "rounded-2xl border border-slate-200 bg-white p-6 shadow-sm dark:border-slate-800 dark:bg-slate-900";
    let detail = claim_detail_text(&claim, locale);
    let not_yet = || locale.t("claim-not-yet");
    let signed_in_through = if view.issued_here {
        locale.t_with("claim-issuer-console", &[("issuer", view.issuer.clone())])
    } else {
        view.issuer.clone()
    };
    let fact = |label: &'static str, value: String, testid: &'static str| {
        view! {
            <div>
                <dt class="text-xs font-medium uppercase tracking-wide text-slate-500 dark:text-slate-400">{locale.t(label)}</dt>
                <dd class="mt-1 break-all" data-testid=testid>{value}</dd>
            </div>
        }
    };
    let title = view! {
        <div class="flex flex-wrap items-center gap-3">
            <h1 class="font-mono text-xl font-semibold" data-testid="claim-name">{claim.name.clone()}</h1>
            {(!view.gone).then(|| view! { <PhaseBadge phase=claim.phase locale /> })}
        </div>
    };
    if view.gone {
        return view! {
            {title}
            <p class="rounded-2xl border border-dashed border-slate-300 p-8 text-center dark:border-slate-700" role="status" data-testid="claim-gone">
                {locale.t("claim-gone")}
            </p>
        }
        .into_any();
    }
    view! {
        {title}
        {(!detail.is_empty()).then(|| view! {
            <p class="rounded-lg bg-amber-50 p-3 text-sm text-amber-900 dark:bg-amber-950 dark:text-amber-100" data-testid="claim-reason">{detail}</p>
        })}
        <section class=card>
            <dl class="grid gap-4 sm:grid-cols-2">
                {fact("claim-pool", format!("{}/{}", claim.namespace, claim.pool), "claim-pool")}
                {fact("claim-subject", claim.subject.clone(), "claim-subject")}
                {fact("claim-issuer", signed_in_through, "claim-issuer")}
                {fact("claim-lifetime", ttl_label(view.ttl_seconds, locale), "claim-lifetime")}
                {fact("claim-created", view.created_at.clone().unwrap_or_else(not_yet), "claim-created")}
                {fact("claim-bound", view.bound_at.clone().unwrap_or_else(not_yet), "claim-bound")}
                <div>
                    <dt class="text-xs font-medium uppercase tracking-wide text-slate-500 dark:text-slate-400">{locale.t("claim-expires")}</dt>
                    <dd class="mt-1">
                        {match claim.expires_at.clone() {
                            Some(at) => view! {
                                <Countdown
                                    expires_at=at
                                    remaining_secs=claim.remaining_secs.unwrap_or_default()
                                    locale
                                    name=claim.name.clone()
                                    announce=true
                                />
                            }
                            .into_any(),
                            None => not_yet().into_any(),
                        }}
                    </dd>
                </div>
                {fact("claim-vm", view.virtual_machine.clone().unwrap_or_else(not_yet), "claim-vm")}
            </dl>
        </section>
        <section class=card aria-labelledby="connect-title">
            <h2 id="connect-title" class="mb-3 text-lg font-semibold">{locale.t("claim-connect-title")}</h2>
            {if claim.addresses.is_empty() {
                view! { <p class="text-sm text-slate-500 dark:text-slate-400">{locale.t("claim-no-address")}</p> }.into_any()
            } else {
                view! { <Connect addresses=claim.addresses.clone() copy_id="connect".to_owned() locale /> }.into_any()
            }}
        </section>
        <Attestation
            verdict=view.endorsement_verified.clone()
            certificates=view.endorsement_certificates.clone()
            locale
        />
        {claim.can_release.then(|| view! {
            <ReleaseForm namespace=claim.namespace.clone() name=claim.name.clone() locale />
        })}
    }
    .into_any()
}

/// What a broker checks before trusting the sandbox's vTPM: the claim controller's verdict
/// and each EK certificate's SHA-256 fingerprint, issuer, identity and chain check.
#[component]
fn Attestation(
    verdict: Option<EndorsementVerdict>,
    certificates: Vec<EndorsementCertificateView>,
    locale: Locale,
) -> impl IntoView {
    let card = "rounded-2xl border border-slate-200 bg-white p-6 shadow-sm dark:border-slate-800 dark:bg-slate-900";
    // Before the bind; once Bound, the verdict says why there is none.
    let none = (certificates.is_empty() && verdict.is_none()).then(|| {
        view! { <p class="text-sm text-slate-500 dark:text-slate-400" data-testid="attestation-none">{locale.t("claim-attestation-none")}</p> }
    });
    let banner = verdict.map(|verdict| {
        let (key, color) = if verdict.verified {
            (
                "claim-attestation-verified",
                "bg-emerald-50 text-emerald-900 dark:bg-emerald-950 dark:text-emerald-100",
            )
        } else {
            (
                "claim-attestation-unverified",
                "bg-red-50 text-red-900 dark:bg-red-950 dark:text-red-100",
            )
        };
        view! {
            <div class=format!("rounded-lg p-3 text-sm {color}") data-testid="attestation-verdict" data-verified=verdict.verified.to_string()>
                <p class="font-medium">{locale.t(key)}</p>
                <p class="mt-1 break-words font-mono text-xs">{format!("{}: {}", verdict.reason, verdict.message)}</p>
            </div>
        }
    });
    let label = "text-xs font-medium uppercase tracking-wide text-slate-500 dark:text-slate-400";
    let items = certificates
        .into_iter()
        .map(|certificate| {
            let (key, color, detail) = match certificate.trust {
                EndorsementTrust::Trusted => (
                    "claim-ek-trusted",
                    "text-emerald-700 dark:text-emerald-300",
                    None,
                ),
                EndorsementTrust::Untrusted { detail } => (
                    "claim-ek-untrusted",
                    "text-red-700 dark:text-red-300",
                    Some(detail),
                ),
                EndorsementTrust::Unchecked { detail } => (
                    "claim-ek-unchecked",
                    "text-amber-700 dark:text-amber-300",
                    Some(detail),
                ),
            };
            view! {
                <li class="space-y-2 rounded-lg border border-slate-200 p-3 dark:border-slate-700" data-testid="ek-certificate">
                    <dl class="grid gap-2">
                        <div>
                            <dt class=label>{locale.t("claim-ek-fingerprint")}</dt>
                            <dd class="mt-1 break-all font-mono text-xs" data-testid="ek-fingerprint">{certificate.fingerprint_sha256}</dd>
                        </div>
                        <div>
                            <dt class=label>{locale.t("claim-ek-issuer")}</dt>
                            <dd class="mt-1 break-all text-sm" data-testid="ek-issuer">{certificate.issuer}</dd>
                        </div>
                        <div>
                            <dt class=label>{locale.t("claim-ek-identity")}</dt>
                            <dd class="mt-1 break-all font-mono text-xs">{certificate.identities.join(", ")}</dd>
                        </div>
                    </dl>
                    <p class=format!("text-sm font-medium {color}") data-testid="ek-trust" data-trust=key>
                        {locale.t(key)}
                        {detail.map(|detail| view! { <span class="ml-2 break-words font-mono text-xs font-normal">{detail}</span> })}
                    </p>
                </li>
            }
        })
        .collect_view();
    view! {
        <section class=format!("{card} space-y-3") aria-labelledby="attestation-title" data-testid="claim-attestation">
            <h2 id="attestation-title" class="text-lg font-semibold">{locale.t("claim-attestation-title")}</h2>
            {banner}
            {none}
            <ul class="space-y-3">{items}</ul>
        </section>
    }
}
