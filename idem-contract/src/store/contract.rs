//! The [`Store`] trait: what every backend implements.

use std::time::Duration;

use super::{Claim, ClaimOutcome, Fence, Retention, StepId, Token};
use crate::error::StoreError;
use crate::key::RecordKey;

/// A place where idempotency records live.
///
/// Each method is one atomic step and, for a networked backend, one round
/// trip. Lease and TTL expiry are judged by the store's own clock. The
/// store sees only hashed keys, tokens and opaque record bytes; encoding
/// lives above it.
///
/// Every implementation must pass the conformance suite, the
/// [`idem-conformance`](https://docs.rs/idem-conformance) crate: one test
/// per protocol rule, run against a store the implementation builds.
///
/// The trait has no `'static` bound, so a store may borrow (e.g. a
/// database transaction, run with `Call::on`);
/// [`Idempotency`](https://docs.rs/idemkit/latest/idem/struct.Idempotency.html) itself holds `'static` stores.
///
/// ```
/// use std::time::Duration;
/// use idem_contract::key::RecordKey;
/// use idem_contract::store::{async_trait, Claim, ClaimOutcome, Fence, Retention, Token};
/// use idem_contract::{Store, StoreError};
///
/// /// A store that is always down: every call fails closed.
/// struct Down;
///
/// #[async_trait]
/// impl Store for Down {
///     async fn claim(&self, _: &RecordKey, _: &Claim) -> Result<ClaimOutcome, StoreError> {
///         Err(StoreError::new("down", "unreachable"))
///     }
///     async fn complete(&self, _: &RecordKey, _: Token, _: &[u8], _: Retention) -> Result<Fence, StoreError> {
///         Err(StoreError::new("down", "unreachable"))
///     }
///     async fn release(&self, _: &RecordKey, _: Token) -> Result<Fence, StoreError> {
///         Err(StoreError::new("down", "unreachable"))
///     }
///     async fn renew(&self, _: &RecordKey, _: Token, _: Duration) -> Result<Fence, StoreError> {
///         Err(StoreError::new("down", "unreachable"))
///     }
///     async fn forget(&self, _: &RecordKey) -> Result<(), StoreError> {
///         Err(StoreError::new("down", "unreachable"))
///     }
/// }
/// ```
#[async_trait::async_trait]
pub trait Store: Send + Sync {
    /// Claims `key` atomically: wins it if free or expired (storing the
    /// claim's token, fingerprint and lease), or reports the holder, the
    /// completed record, or the tombstone of an expired one
    /// ([`ClaimOutcome::Expired`]; a tombstone is not claimed over).
    ///
    /// A claim whose lease lapsed is kept for
    /// [`LAPSED_CLAIM_KEPT`](super::LAPSED_CLAIM_KEPT) and taken over
    /// (`took_over`) only by a claim whose fingerprint
    /// [matches](crate::fingerprint::Fingerprint::matches) it: to one of another
    /// payload the store answers [`ClaimOutcome::InProgress`] with the
    /// lapsed claim's fingerprint and no time left, which the caller
    /// reports as a mismatch. The vanished holder may have had its effect
    /// for its own payload; another one must not run under its key.
    async fn claim(&self, key: &RecordKey, claim: &Claim) -> Result<ClaimOutcome, StoreError>;

    /// Stores `record` for `kept.ttl`, if `token` still holds the claim,
    /// then, if `kept.tombstone` is set, a tombstone of the claim's
    /// fingerprint (without the record) for that long more.
    async fn complete(
        &self,
        key: &RecordKey,
        token: Token,
        record: &[u8],
        kept: Retention,
    ) -> Result<Fence, StoreError>;

    /// [`complete`](Store::complete) sent once more after it failed with a
    /// [transient](crate::StoreErrorKind::is_transient) error: the earlier
    /// one may have landed before its answer was lost. A store that can
    /// tell its own landed completion (`record` stands under `token`)
    /// answers [`Fence::Held`] for it.
    ///
    /// The runtime sends it, with a pause between sendings, for as long as
    /// the claim's lease lasts, so that a body that ran does not lose its
    /// result to a store that is down for a moment (a failover, a restart).
    /// The default sends `complete`, which answers `Lost` for a completion
    /// that landed: the caller is told so, and the record still stands.
    /// A store that cannot send it again (a completion inside a caller's
    /// transaction, which the failure ended) answers an error that is not
    /// transient, and the earlier error stands.
    async fn complete_again(
        &self,
        key: &RecordKey,
        token: Token,
        record: &[u8],
        kept: Retention,
    ) -> Result<Fence, StoreError> {
        self.complete(key, token, record, kept).await
    }

    /// Deletes the in-progress claim, if `token` still holds it, so the next
    /// caller runs the body.
    async fn release(&self, key: &RecordKey, token: Token) -> Result<Fence, StoreError>;

    /// Extends the in-progress claim to `lease` from now, if `token` still
    /// holds it. A `lease` of zero ends the claim now without freeing the
    /// key: the next claim takes it over, as after a crash (a takeover
    /// whose reconcile did not answer leaves its claim so).
    async fn renew(
        &self,
        key: &RecordKey,
        token: Token,
        lease: Duration,
    ) -> Result<Fence, StoreError>;

    /// Saves the value of one finished step of the in-progress call, if
    /// `token` still holds its claim, to live `ttl` from now (or replaces
    /// the step's earlier value). Steps outlive a release of the claim, so
    /// the next claim that wins the key returns them in
    /// [`ClaimOutcome::Won::steps`]; they expire on their own (no later
    /// than a record completed after them) and are never returned with a
    /// completed record. One atomic step and one round trip, like the
    /// others.
    ///
    /// The default refuses; a store that implements it also says so in
    /// [`records_steps`](Store::records_steps).
    async fn save_step(
        &self,
        key: &RecordKey,
        token: Token,
        step: StepId,
        value: &[u8],
        ttl: Duration,
    ) -> Result<Fence, StoreError> {
        let _ = (key, token, step, value, ttl);
        Err(StoreError::new(
            "store",
            "this store does not record steps (`Store::save_step` is not implemented)",
        ))
    }

    /// Whether this store saves steps with [`save_step`](Store::save_step)
    /// and returns them with a won claim. `false` by default: then
    /// `idem::step` in a call on this store is `Error::InvalidStep` before
    /// the step's body runs, rather than an effect whose value cannot be
    /// saved. A transactional store says `false` too: a step saved in the
    /// transaction would roll back with it.
    fn records_steps(&self) -> bool {
        false
    }

    /// Removes the record under `key`, completed or in progress, whoever
    /// holds it, so the next call runs the body; a key with no record is
    /// `Ok`. An operator's step ([`Idempotency::forget`](https://docs.rs/idemkit/latest/idem/struct.Idempotency.html#method.forget),
    /// `idem forget`), not part of a call: a body still running on a
    /// forgotten claim finds its lease lost when it completes.
    async fn forget(&self, key: &RecordKey) -> Result<(), StoreError>;
}
