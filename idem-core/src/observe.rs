//! Metrics (through the `metrics` facade) and the per-call `tracing` span.
//!
//! Every metric carries the call site's static name as its `site` label,
//! never the scope a call was given (which may name a tenant) nor its key,
//! so the number of series is bounded by the number of call sites. The
//! metric keys of a site are built at compile time ([`CallSite`] in a
//! `static`), so recording costs no allocation, no formatting and no
//! hashing per call: with no recorder installed, a metric is one call into
//! the facade's no-op recorder.

use metrics::{IntoF64, Key, Label, Level, Metadata};
use tokio::time::Instant;

/// The outcome of one call, as counted in `idem_calls_total{outcome}` and
/// recorded in the call's span.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Ran,
    Replayed,
    InProgress,
    Mismatch,
    LeaseLost,
    StoreError,
    CodecError,
    Invalid,
    Expired,
}

const OUTCOMES: [&str; 9] = [
    "ran",
    "replayed",
    "in_progress",
    "mismatch",
    "lease_lost",
    "store_error",
    "codec_error",
    "invalid",
    "expired",
];

impl Outcome {
    pub(crate) const fn as_str(self) -> &'static str {
        OUTCOMES[self as usize]
    }
}

/// A store operation, timed in `idem_store_seconds{op}`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Op {
    Claim,
    Complete,
    Release,
    Renew,
}

const OPS: [&str; 4] = ["claim", "complete", "release", "renew"];

/// The metric names, as listed in README.md.
pub(crate) const CALLS: &str = "idem_calls_total";
pub(crate) const STORE_SECONDS: &str = "idem_store_seconds";
pub(crate) const TAKEOVERS: &str = "idem_takeovers_total";
pub(crate) const RECONCILED: &str = "idem_reconciled_total";
pub(crate) const RENEWALS: &str = "idem_renewals_total";
pub(crate) const RENEWAL_FAILURES: &str = "idem_renewal_failures_total";
pub(crate) const WAITS: &str = "idem_waits_total";

/// The labels of one call site: what [`CallSite`]'s keys point into. Made
/// by [`call_site!`](crate::call_site), which puts it in a `static`.
#[doc(hidden)]
pub struct SiteLabels {
    by_outcome: [[Label; 2]; 9],
    by_op: [[Label; 2]; 4],
    site: [Label; 1],
}

impl std::fmt::Debug for SiteLabels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("SiteLabels")
            .field(&self.site[0].value())
            .finish()
    }
}

impl SiteLabels {
    #[doc(hidden)]
    pub const fn new(name: &'static str) -> Self {
        const fn pair(name: &'static str, what: &'static str, value: &'static str) -> [Label; 2] {
            [
                Label::from_static_parts("site", name),
                Label::from_static_parts(what, value),
            ]
        }
        const fn outcome(name: &'static str, i: usize) -> [Label; 2] {
            pair(name, "outcome", OUTCOMES[i])
        }
        const fn op(name: &'static str, i: usize) -> [Label; 2] {
            pair(name, "op", OPS[i])
        }
        Self {
            by_outcome: [
                outcome(name, 0),
                outcome(name, 1),
                outcome(name, 2),
                outcome(name, 3),
                outcome(name, 4),
                outcome(name, 5),
                outcome(name, 6),
                outcome(name, 7),
                outcome(name, 8),
            ],
            by_op: [op(name, 0), op(name, 1), op(name, 2), op(name, 3)],
            site: [Label::from_static_parts("site", name)],
        }
    }
}

/// The static identity of a call site: its name, the bounded `site` label
/// of its metrics. `#[idempotent]` makes one per function, named
/// `module::path::fn_name`; a call made with the builder names its own
/// with [`call_site!`](crate::call_site) and [`Call::site`](crate::Call::site),
/// or is counted under [`CallSite::UNNAMED`] (`site="unnamed"`).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let idem = idem::Idempotency::new(idem::MemoryStore::new());
/// let tenant = "acme";
/// let out: Result<u8, idem::Error> = idem
///     .call(&("payments", tenant), "order-1") // tenant in the scope: not a label
///     .site(idem::call_site!("payments"))      // the label: site="payments"
///     .run(|| async { Ok(1) })
///     .await;
/// assert_eq!(out.unwrap(), 1);
/// # }
/// ```
pub struct CallSite {
    name: &'static str,
    calls: [Key; 9],
    store_seconds: [Key; 4],
    takeovers: Key,
    reconciled: Key,
    renewals: Key,
    renewal_failures: Key,
    waits: Key,
}

impl CallSite {
    /// The site of builder calls that name none: `site="unnamed"`.
    pub const UNNAMED: &'static CallSite = crate::call_site!("unnamed");

    /// A site named at run time, for integrations whose sites are known
    /// only then (an HTTP layer's routes). Its metrics keys must live for
    /// the whole program, so it is leaked: make one per name and keep it.
    ///
    /// ```
    /// let site: &'static idem::CallSite = idem::CallSite::leak("POST /orders");
    /// assert_eq!(site.name(), "POST /orders");
    /// ```
    pub fn leak(name: impl Into<String>) -> &'static CallSite {
        let name: &'static str = Box::leak(name.into().into_boxed_str());
        let labels: &'static SiteLabels = Box::leak(Box::new(SiteLabels::new(name)));
        Box::leak(Box::new(CallSite::new(name, labels)))
    }

    #[doc(hidden)]
    pub const fn new(name: &'static str, labels: &'static SiteLabels) -> Self {
        let calls = &labels.by_outcome;
        let ops = &labels.by_op;
        Self {
            name,
            calls: [
                Key::from_static_parts(CALLS, &calls[0]),
                Key::from_static_parts(CALLS, &calls[1]),
                Key::from_static_parts(CALLS, &calls[2]),
                Key::from_static_parts(CALLS, &calls[3]),
                Key::from_static_parts(CALLS, &calls[4]),
                Key::from_static_parts(CALLS, &calls[5]),
                Key::from_static_parts(CALLS, &calls[6]),
                Key::from_static_parts(CALLS, &calls[7]),
                Key::from_static_parts(CALLS, &calls[8]),
            ],
            store_seconds: [
                Key::from_static_parts(STORE_SECONDS, &ops[0]),
                Key::from_static_parts(STORE_SECONDS, &ops[1]),
                Key::from_static_parts(STORE_SECONDS, &ops[2]),
                Key::from_static_parts(STORE_SECONDS, &ops[3]),
            ],
            takeovers: Key::from_static_parts(TAKEOVERS, &labels.site),
            reconciled: Key::from_static_parts(RECONCILED, &labels.site),
            renewals: Key::from_static_parts(RENEWALS, &labels.site),
            renewal_failures: Key::from_static_parts(RENEWAL_FAILURES, &labels.site),
            waits: Key::from_static_parts(WAITS, &labels.site),
        }
    }

    /// The site's name: the `site` label of its metrics.
    pub const fn name(&self) -> &'static str {
        self.name
    }

    pub(crate) fn call(&self, outcome: Outcome) {
        increment(&self.calls[outcome as usize]);
    }

    /// Times a store operation sent at `sent`, as it ends.
    pub(crate) fn store_op(&self, op: Op, sent: Instant) {
        metrics::with_recorder(|recorder| {
            recorder
                .register_histogram(&self.store_seconds[op as usize], &METADATA)
                .record(Since(sent))
        });
    }

    pub(crate) fn takeover(&self) {
        increment(&self.takeovers);
    }

    pub(crate) fn reconciled(&self) {
        increment(&self.reconciled);
    }

    pub(crate) fn renewal(&self) {
        increment(&self.renewals);
    }

    /// A renewal that did not extend the lease: the store failed, or
    /// answered that the claim is lost. Counted as it happens, while the
    /// body still runs.
    pub(crate) fn renewal_failed(&self) {
        increment(&self.renewal_failures);
    }

    pub(crate) fn wait(&self) {
        increment(&self.waits);
    }
}

impl std::fmt::Debug for CallSite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("CallSite").field(&self.name).finish()
    }
}

/// The time since an instant, read off the clock only when a histogram
/// takes it: the facade's no-op histogram (no recorder installed) never
/// does, so a store operation then costs no clock read at its end.
struct Since(Instant);

impl IntoF64 for Since {
    fn into_f64(self) -> f64 {
        self.0.elapsed().as_secs_f64()
    }
}

static METADATA: Metadata<'static> =
    Metadata::new(module_path!(), Level::INFO, Some(module_path!()));

fn increment(key: &Key) {
    metrics::with_recorder(|recorder| recorder.register_counter(key, &METADATA).increment(1));
}

/// A `&'static` [`CallSite`] named `name` (a string literal or a
/// `&'static str` constant), built at compile time: its metric keys cost
/// nothing per call.
///
/// ```
/// let site: &'static idem::CallSite = idem::call_site!("payments");
/// assert_eq!(site.name(), "payments");
/// ```
#[macro_export]
macro_rules! call_site {
    ($name:expr) => {{
        static __IDEM_LABELS: $crate::__private::SiteLabels =
            $crate::__private::SiteLabels::new($name);
        static __IDEM_SITE: $crate::CallSite = $crate::CallSite::new($name, &__IDEM_LABELS);
        &__IDEM_SITE
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site_of(key: &Key) -> String {
        let label = key.labels().find(|label| label.key() == "site").unwrap();
        label.value().to_owned()
    }

    #[test]
    fn each_site_labels_its_own_keys() {
        let named = crate::call_site!(concat!(module_path!(), "::", "charge"));
        assert_eq!(named.name(), "idem_core::observe::tests::charge");
        for key in named.calls.iter().chain(&named.store_seconds) {
            assert_eq!(site_of(key), named.name());
        }
        assert_eq!(
            site_of(&named.calls[Outcome::Mismatch as usize]),
            named.name()
        );
        assert_eq!(site_of(&CallSite::UNNAMED.calls[0]), "unnamed");
        assert_ne!(named.calls[0], CallSite::UNNAMED.calls[0]);
        let runtime = metrics::Key::from_parts(
            CALLS,
            vec![
                Label::new("site", named.name()),
                Label::new("outcome", "ran"),
            ],
        );
        assert_eq!(
            runtime.get_hash(),
            named.calls[0].get_hash(),
            "hash as at run time"
        );
        assert_ne!(
            named.calls[0].get_hash(),
            CallSite::UNNAMED.calls[0].get_hash()
        );
    }
}
