//! What the controllers count, for `/metrics` (SPEC §9) and for the tests and benchmark:
//! reconciles and reconcile errors per controller, API writes, binds, bind conflicts, bind
//! latency, and (computed at scrape time) claims by phase.

use std::sync::{Arc, RwLock};

use banlieue_domain::claim::ClaimPhase;
use kube::runtime::reflector::Store;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};
use time::OffsetDateTime;

use crate::crd::VirtualMachineClaim;

/// Upper bounds (seconds) of the bind-latency buckets: a claim bound from a warm member
/// takes well under a second, one that waits for a VM to boot takes minutes.
pub const BIND_LATENCY_BUCKETS: [f64; 12] = [
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0,
];

/// Label set `{controller="claim"|"pool"|"provider"}`.
type ControllerLabel = [(&'static str, &'static str); 1];

/// One counter per controller, exported as one family labelled `controller` (`claim`,
/// `pool`, `provider`). The fields and the family share their atomics.
#[derive(Debug, Clone)]
pub struct PerController {
    /// The claim controller's count.
    pub claim: Counter,
    /// The pool controller's count.
    pub pool: Counter,
    /// The simulated provider's count.
    pub provider: Counter,
    family: Family<ControllerLabel, Counter>,
}

impl Default for PerController {
    fn default() -> Self {
        let family = Family::<ControllerLabel, Counter>::default();
        let of = |name| family.get_or_create_owned(&[("controller", name)]);
        Self {
            claim: of("claim"),
            pool: of("pool"),
            provider: of("provider"),
            family,
        }
    }
}

impl PerController {
    /// The sum over the three controllers.
    pub fn total(&self) -> u64 {
        self.claim.get() + self.pool.get() + self.provider.get()
    }
}

/// The controllers' metrics. Counters are monotonic since process start and shared by
/// every leadership term of this process; create one per process, pass it to
/// [`run_controllers`](crate::run_controllers), and [`register`](Metrics::register) it to
/// export it.
#[derive(Debug)]
pub struct Metrics {
    /// `banlieue_reconciles_total{controller}`: reconcile passes (the provider counts only
    /// the VMs it provides).
    pub reconciles: PerController,
    /// `banlieue_reconcile_errors_total{controller}`: passes that returned an error, counted
    /// by each controller's error policy, which then retries.
    pub reconcile_errors: PerController,
    /// `banlieue_controller_writes_total{controller}`: API writes (create, patch, delete)
    /// attempted, whether or not they were refused.
    pub writes: PerController,
    /// `banlieue_claim_binds_total`: members taken by a claim (successful member patches).
    pub binds: Counter,
    /// `banlieue_claim_bind_conflicts_total`: member patches refused with 409 or 404
    /// (another claim won the race, or the member went away).
    pub bind_conflicts: Counter,
    /// `banlieue_claim_bind_latency_seconds`: from a claim's `metadata.creationTimestamp`
    /// (whole seconds, set by the API server, so a span reads up to 1 s long) to the moment
    /// the claim controller wrote `phase: Bound`, in seconds; buckets
    /// [`BIND_LATENCY_BUCKETS`]. One observation per claim, at its first Bound.
    pub bind_latency: Histogram,
    claims: ClaimsByPhase,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            reconciles: PerController::default(),
            reconcile_errors: PerController::default(),
            writes: PerController::default(),
            binds: Counter::default(),
            bind_conflicts: Counter::default(),
            bind_latency: Histogram::new(BIND_LATENCY_BUCKETS),
            claims: ClaimsByPhase::default(),
        }
    }
}

impl Metrics {
    /// Registers every metric, and the `banlieue_claims{phase}` gauge, computed at each
    /// scrape from the claim controller's cache while this process leads (absent otherwise,
    /// so summing over replicas counts each claim once).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "banlieue_reconciles",
            "Reconcile passes by controller (claim, pool, provider)",
            self.reconciles.family.clone(),
        );
        registry.register(
            "banlieue_reconcile_errors",
            "Reconcile passes that failed, by controller; each is retried",
            self.reconcile_errors.family.clone(),
        );
        registry.register(
            "banlieue_controller_writes",
            "Kubernetes API writes (create, patch, delete) attempted, by controller",
            self.writes.family.clone(),
        );
        registry.register(
            "banlieue_claim_binds",
            "VirtualMachines taken by a claim",
            self.binds.clone(),
        );
        registry.register(
            "banlieue_claim_bind_conflicts",
            "Member patches refused because another claim took the member first or it was gone",
            self.bind_conflicts.clone(),
        );
        registry.register_with_unit(
            "banlieue_claim_bind_latency",
            "Time from a claim's creationTimestamp to the controller writing phase Bound",
            Unit::Seconds,
            self.bind_latency.clone(),
        );
        registry.register_collector(Box::new(self.claims.clone()));
    }

    /// Records a bind whose `phase: Bound` was just written: `created` is the claim's
    /// `creationTimestamp`. A negative span (clock skew between the API server and this
    /// process) counts as 0.
    pub(crate) fn observe_bind_latency(&self, created: OffsetDateTime, bound: OffsetDateTime) {
        let seconds = (bound - created).as_seconds_f64().max(0.0);
        self.bind_latency.observe(seconds);
    }

    /// From now on, `banlieue_claims` counts the claims of `store` (the claim controller's
    /// cache, once it has listed them).
    pub(crate) fn follow_claims(&self, store: Store<VirtualMachineClaim>) {
        *self.claims.write() = Some(store);
    }

    /// The claim controller stopped (shutdown or lost leadership): `banlieue_claims` is
    /// absent until it runs again.
    pub(crate) fn forget_claims(&self) {
        *self.claims.write() = None;
    }

    /// The claims by phase as `banlieue_claims` would export them now; `None` while the
    /// claim controller does not run here.
    pub fn claims_by_phase(&self) -> Option<Vec<(&'static str, u64)>> {
        self.claims.count()
    }
}

/// The collector behind `banlieue_claims{phase}`: counts, at scrape time, the claims in the
/// claim controller's reflector cache by `status.phase`.
#[derive(Debug, Clone, Default)]
struct ClaimsByPhase(Arc<RwLock<Option<Store<VirtualMachineClaim>>>>);

/// The phases `banlieue_claims` always exports (0 when none).
const PHASES: [ClaimPhase; 4] = [
    ClaimPhase::Pending,
    ClaimPhase::Bound,
    ClaimPhase::Releasing,
    ClaimPhase::Failed,
];

/// The label of a phase the controller never writes (someone else patched the status).
const UNKNOWN_PHASE: &str = "Unknown";

impl ClaimsByPhase {
    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Option<Store<VirtualMachineClaim>>> {
        self.0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Counts by phase label. A claim without `status.phase` is one the controller has not
    /// reconciled yet: `Pending`, as the console shows it. `Unknown` appears only when
    /// some claim carries a phase that is not one of the four.
    fn count(&self) -> Option<Vec<(&'static str, u64)>> {
        let store = self
            .0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()?;
        let mut counts: Vec<(&'static str, u64)> =
            PHASES.iter().map(|phase| (phase.as_str(), 0)).collect();
        let mut unknown = 0;
        for claim in store.state() {
            let phase = claim
                .status
                .as_ref()
                .and_then(|s| s.phase.as_deref())
                .unwrap_or(ClaimPhase::Pending.as_str());
            match counts.iter_mut().find(|(name, _)| *name == phase) {
                Some((_, n)) => *n += 1,
                None => unknown += 1,
            }
        }
        if unknown > 0 {
            counts.push((UNKNOWN_PHASE, unknown));
        }
        Some(counts)
    }
}

impl Collector for ClaimsByPhase {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(counts) = self.count() else {
            return Ok(());
        };
        let mut metric = encoder.encode_descriptor(
            "banlieue_claims",
            "VirtualMachineClaims by status.phase (no phase yet counts as Pending), as the leading claim controller sees them.",
            None,
            MetricType::Gauge,
        )?;
        for (phase, n) in counts {
            let gauge = ConstGauge::new(i64::try_from(n).unwrap_or(i64::MAX));
            gauge.encode(metric.encode_family(&[("phase", phase)])?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exposition(metrics: &Metrics) -> String {
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        text
    }

    #[test]
    fn names_labels_and_units() {
        let m = Metrics::default();
        m.reconciles.claim.inc();
        m.reconciles.claim.inc();
        m.reconcile_errors.pool.inc();
        m.binds.inc();
        let created = OffsetDateTime::UNIX_EPOCH;
        m.observe_bind_latency(created, created + time::Duration::milliseconds(700));
        m.observe_bind_latency(created, created - time::Duration::seconds(1));
        assert_eq!(m.reconciles.total(), 2);
        let text = exposition(&m);
        for line in [
            "banlieue_reconciles_total{controller=\"claim\"} 2",
            "banlieue_reconciles_total{controller=\"provider\"} 0",
            "banlieue_reconcile_errors_total{controller=\"pool\"} 1",
            "banlieue_controller_writes_total{controller=\"claim\"} 0",
            "banlieue_claim_binds_total 1",
            "banlieue_claim_bind_conflicts_total 0",
            "# TYPE banlieue_claim_bind_latency_seconds histogram",
            "# UNIT banlieue_claim_bind_latency_seconds seconds",
            "banlieue_claim_bind_latency_seconds_count 2",
            "banlieue_claim_bind_latency_seconds_bucket{le=\"0.1\"} 1",
            "banlieue_claim_bind_latency_seconds_bucket{le=\"1.0\"} 2",
            "banlieue_claim_bind_latency_seconds_bucket{le=\"+Inf\"} 2",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
        assert!(
            !text.contains("banlieue_claims"),
            "no claims gauge without a running claim controller:\n{text}"
        );
        assert_eq!(m.claims_by_phase(), None);
    }

    fn claim(name: &str, phase: Option<&str>) -> VirtualMachineClaim {
        VirtualMachineClaim {
            metadata: kube::api::ObjectMeta {
                name: Some(name.into()),
                namespace: Some("demo".into()),
                ..Default::default()
            },
            spec: crate::crd::VirtualMachineClaimSpec {
                pool_ref: "sandbox".into(),
                ttl_seconds: 60,
                subject: crate::crd::ClaimSubject {
                    issuer: "https://console.example".into(),
                    id: "1".into(),
                },
            },
            status: phase.map(|phase| crate::crd::VirtualMachineClaimStatus {
                phase: Some(phase.into()),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn claims_are_counted_by_phase_from_the_cache_while_followed() {
        use kube::runtime::{reflector, watcher};
        let m = Metrics::default();
        let (store, mut writer) = reflector::store();
        for (name, phase) in [
            ("new", None),
            ("waiting", Some("Pending")),
            ("a", Some("Bound")),
            ("b", Some("Bound")),
            ("odd", Some("Sideways")),
        ] {
            writer.apply_watcher_event(&watcher::Event::Apply(claim(name, phase)));
        }
        m.follow_claims(store);
        assert_eq!(
            m.claims_by_phase().unwrap(),
            vec![
                ("Pending", 2),
                ("Bound", 2),
                ("Releasing", 0),
                ("Failed", 0),
                ("Unknown", 1)
            ]
        );
        let text = exposition(&m);
        for line in [
            "# TYPE banlieue_claims gauge",
            "banlieue_claims{phase=\"Pending\"} 2",
            "banlieue_claims{phase=\"Bound\"} 2",
            "banlieue_claims{phase=\"Failed\"} 0",
            "banlieue_claims{phase=\"Unknown\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
        m.forget_claims();
        assert!(!exposition(&m).contains("banlieue_claims{"));
    }
}
