//! The call's settings: set by the builder, checked before any claim.

use std::time::Duration;

use serde::Serialize;

use super::{Call, DEFAULT_LEASE, MAX_DURATION};
use crate::store::Retention;
use crate::{CallSite, Claim, Error, Fingerprint, Token};

impl<P, R, W> Call<P, R, W> {
    /// How long a completed result is replayed. A zero TTL, or one longer
    /// than [`MAX_DURATION`] (100 years), is `Error::InvalidOption` when
    /// the call runs, before any claim: every store can keep a record that
    /// long, and none can keep one for `Duration::MAX`.
    ///
    /// ```
    /// # let idem = idem::Idempotency::new(idem::MemoryStore::new());
    /// let call = idem.call("payments", "order-1").ttl(std::time::Duration::from_secs(3600));
    /// # let _ = call;
    /// ```
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// Keeps a tombstone for `tombstone` after the TTL: a marker of the
    /// completed call's fingerprint, without its value, so a very late
    /// duplicate gets `Error::Expired` (HTTP 410, queue `Ack`) instead of
    /// running the body again; another payload under the key is still
    /// `Error::FingerprintMismatch`, and once the tombstone has passed the
    /// key is free. None by default: after the TTL a duplicate runs as new.
    /// A zero tombstone, or one longer than [`MAX_DURATION`], is
    /// `Error::InvalidOption` when the call runs.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use std::time::Duration;
    /// let idem = idem::Idempotency::new(idem::MemoryStore::new());
    /// let charge = || idem.call("payments", "order-1")
    ///     .ttl(Duration::from_millis(20))
    ///     .tombstone(Duration::from_secs(30 * 24 * 3600));
    /// let first: Result<u32, idem::Error> = charge().run(|| async { Ok(1200) }).await;
    /// assert_eq!(first.unwrap(), 1200);
    /// tokio::time::sleep(Duration::from_millis(50)).await;
    /// let late: Result<u32, idem::Error> = charge().run(|| async { Ok(1200) }).await;
    /// assert_eq!(late.unwrap_err().status(), 410);
    /// # }
    /// ```
    pub fn tombstone(mut self, tombstone: Duration) -> Self {
        self.tombstone = Some(tombstone);
        self
    }

    /// How long our claim is held before another caller may take over; it
    /// is renewed in the background while the body runs. Default:
    /// [`DEFAULT_LEASE`] (30 s), or the TTL if that is shorter. A zero
    /// lease, or one longer than the TTL, is `Error::InvalidOption` when
    /// the call runs.
    ///
    /// Renewal runs every third of the lease, from a task the handle
    /// keeps on the runtime the call runs on (one per runtime, shared by
    /// its calls), so a body that blocks its thread keeps its lease on a
    /// multi-thread runtime with a worker free; on a current-thread
    /// runtime a body must yield for renewal to run. A handle used from
    /// several runtimes (a `static` handle across `#[tokio::test]`s, a CLI
    /// or per-tenant runtimes, one shut down with `shutdown_background`)
    /// renews on each: a task its runtime dropped, or one overdue by a
    /// second, is replaced by the next claim on that runtime. A call on
    /// a borrowed store ([`on`](Call::on)) renews in its own task.
    ///
    /// A renewal the store refuses or fails is reported as it happens,
    /// while the body still runs: a `WARN` event in the call's
    /// `idem.call` span and `idem_renewal_failures_total{scope}`. A failed
    /// renewal is retried at the next third; once the lease has run out
    /// without one, a duplicate may take the key over, and the body's
    /// result ends in `Error::LeaseLost` instead of being stored.
    ///
    /// ```
    /// # let idem = idem::Idempotency::new(idem::MemoryStore::new());
    /// let call = idem.call("payments", "order-1").lease(std::time::Duration::from_secs(10));
    /// # let _ = call;
    /// ```
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = Some(lease);
        self
    }

    /// How long to wait for another caller's in-flight result before
    /// answering `Error::InProgress`.
    ///
    /// ```
    /// # let idem = idem::Idempotency::new(idem::MemoryStore::new());
    /// let call = idem.call("payments", "order-1").wait(std::time::Duration::from_secs(5));
    /// # let _ = call;
    /// ```
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// What must match when the key is reused: a different payload is
    /// `Error::FingerprintMismatch`. Without it, any payload matches.
    ///
    /// ```
    /// # let idem = idem::Idempotency::new(idem::MemoryStore::new());
    /// let call = idem.call("payments", "order-1").fingerprint(&("alice", 1200u32));
    /// # let _ = call;
    /// ```
    pub fn fingerprint<T: Serialize + ?Sized>(mut self, payload: &T) -> Self {
        match Fingerprint::of(payload) {
            Ok(fingerprint) => self.fingerprint = fingerprint,
            Err(err) => self.refused = Some(Box::new(Error::Codec(err.into()))),
        }
        self
    }

    /// Sets an already computed fingerprint ([`Fingerprint::NONE`] matches
    /// every payload).
    ///
    /// ```
    /// # let idem = idem::Idempotency::new(idem::MemoryStore::new());
    /// let payload = idem::fingerprint::Fingerprint::of(&1200u32).unwrap();
    /// let call = idem.call("payments", "order-1").fingerprint_digest(payload);
    /// # let _ = call;
    /// ```
    pub fn fingerprint_digest(mut self, fingerprint: Fingerprint) -> Self {
        self.fingerprint = fingerprint;
        self
    }

    /// The version of this call's values, written into its records (0 by
    /// default). Bump it when a change to the return type keeps its shape
    /// but not its meaning: a record of another version is then
    /// `Error::Codec(CodecError::VersionChanged)` instead of a misreading.
    /// (A change of shape needs no bump: the decoder refuses it.)
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let idem = idem::Idempotency::new(idem::MemoryStore::new());
    /// let _: Result<u32, idem::Error> = idem.call("s", "k").run(|| async { Ok(100) }).await;
    /// // Same shape, new meaning (cents, not euros): version 2.
    /// let out: Result<u32, idem::Error> = idem.call("s", "k").version(2).run(|| async { Ok(1) }).await;
    /// assert!(matches!(out, Err(idem::Error::Codec(idem::CodecError::VersionChanged { stored: 0, expected: 2, .. }))));
    /// # }
    /// ```
    pub fn version(mut self, version: u32) -> Self {
        self.version = version;
        self
    }

    /// What happens to an `Err`: [`ReleaseErrors`](crate::ReleaseErrors)
    /// (default), [`replay_errors`](crate::replay_errors) or
    /// [`replay_errors_if`](crate::replay_errors_if).
    ///
    /// ```
    /// # let idem = idem::Idempotency::new(idem::MemoryStore::new());
    /// let call = idem.call("payments", "order-1").errors(idem::replay_errors::<String>());
    /// # let _ = call;
    /// ```
    pub fn errors<Q>(self, policy: Q) -> Call<Q, R, W> {
        self.map(|_, reconcile, place| (policy, reconcile, place))
    }

    /// The call site this call's metrics are counted under (its `scope`
    /// label), instead of [`CallSite::UNNAMED`]. `#[idempotent]` sets the
    /// function's own. See [`call_site!`](crate::call_site).
    ///
    /// ```
    /// # let idem = idem::Idempotency::new(idem::MemoryStore::new());
    /// let call = idem.call("payments", "order-1").site(idem::call_site!("payments::charge"));
    /// # let _ = call;
    /// ```
    pub fn site(mut self, site: &'static CallSite) -> Self {
        self.site = site;
        self
    }

    /// Settings that cannot work are refused before any claim: a zero
    /// `ttl` would store nothing, a zero `lease` would let a second caller
    /// take over at once, and a `lease` longer than the `ttl` would let a
    /// claim outlive the record it guards.
    pub(super) fn checked_settings(&self) -> Result<(), Error> {
        let refuse = |reason: String| Err(Error::InvalidOption(reason));
        if self.ttl.is_zero() {
            return refuse(format!(
                "`ttl` must be longer than zero (scope `{}`)",
                self.scope
            ));
        }
        for (name, set) in [("ttl", Some(self.ttl)), ("tombstone", self.tombstone)] {
            if set.is_some_and(|set| set > MAX_DURATION) {
                return refuse(format!(
                    "`{name}` ({:?}) is longer than 100 years (`idem::MAX_DURATION`) (scope `{}`)",
                    set.unwrap_or_default(),
                    self.scope
                ));
            }
        }
        if self.tombstone.is_some_and(|tombstone| tombstone.is_zero()) {
            return refuse(format!(
                "`tombstone` must be longer than zero (scope `{}`); leave it out for none",
                self.scope
            ));
        }
        let Some(lease) = self.lease else {
            return Ok(());
        };
        if lease.is_zero() {
            return refuse(format!(
                "`lease` must be longer than zero (scope `{}`)",
                self.scope
            ));
        }
        if lease > self.ttl {
            return refuse(format!(
                "`lease` ({lease:?}) is longer than `ttl` ({:?}) (scope `{}`): a claim may not outlive the record it guards",
                self.ttl, self.scope
            ));
        }
        Ok(())
    }

    /// The claim this call makes, with a fresh token.
    pub(super) fn claim(&self) -> Claim {
        let claim = Claim::new(
            Token::random(),
            self.fingerprint,
            self.effective_lease(),
            self.site.name(),
        );
        let claim = match self.reruns {
            true => claim.with_rerun(),
            false => claim,
        };
        match self.tombstone {
            Some(_) => claim.with_tombstone(),
            None => claim,
        }
    }

    /// How long the store keeps the completed record, and its tombstone.
    pub(super) fn retention(&self) -> Retention {
        let kept = Retention::new(self.ttl);
        match self.tombstone {
            Some(tombstone) => kept.with_tombstone(tombstone),
            None => kept,
        }
    }

    /// The lease given, or the default shortened to a shorter TTL.
    pub(super) fn effective_lease(&self) -> Duration {
        self.lease.unwrap_or(DEFAULT_LEASE.min(self.ttl))
    }
}
