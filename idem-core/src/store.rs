//! The backend trait: keys, tokens and bytes in, outcomes out.

use std::time::Duration;

use bytes::Bytes;

use crate::{Fingerprint, RecordKey, StepId, StoreError};

/// The fencing token of one claim. A fresh token is drawn for every claim
/// attempt, so a takeover after lease expiry always holds a new token and a
/// late holder's completion is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Token(u128);

impl Token {
    /// Draws a new random token.
    pub fn random() -> Self {
        Self(rand::random())
    }

    /// Rebuilds a token from the value a store kept.
    pub const fn from_u128(value: u128) -> Self {
        Self(value)
    }

    /// The token's value.
    pub const fn to_u128(self) -> u128 {
        self.0
    }

    /// The token as 16 big-endian bytes.
    pub const fn to_bytes(self) -> [u8; 16] {
        self.0.to_be_bytes()
    }
}

/// What a caller asks for when it claims a key.
#[derive(Debug, Clone, Copy)]
pub struct Claim {
    /// The token the claim will hold if won.
    pub token: Token,
    /// The payload's fingerprint, kept with the record.
    pub fingerprint: Fingerprint,
    /// How long the claim is held before another caller may take over.
    pub lease: Duration,
    /// The call site's static name ([`CallSite::name`](crate::CallSite::name):
    /// the function's path for `#[idempotent]`), for stores that keep it
    /// with the record so operators can list records (`idem list`) without
    /// the raw key, which is never stored. Bounded, never a tenant or key.
    pub site: &'static str,
}

/// The store's answer to a claim.
#[derive(Debug, Clone)]
pub enum ClaimOutcome {
    /// The claim is ours: the key was free, expired, or its holder's lease
    /// ran out (`took_over`).
    Won {
        /// Whether an expired in-progress claim of another caller was taken
        /// over.
        took_over: bool,
        /// The steps ([`idem::step`](crate::step)) an earlier attempt of
        /// this call finished and saved with [`Store::save_step`], and that
        /// have not expired: the resumed body replays them. Empty for a
        /// fresh call, and for a store that does not record steps.
        steps: Vec<(StepId, Bytes)>,
    },
    /// Another caller holds the key.
    InProgress {
        /// The holder's fingerprint.
        fingerprint: Fingerprint,
        /// How long the holder's lease still runs, by the store's clock.
        retry_after: Duration,
    },
    /// The key was completed; here is its record.
    Completed {
        /// The fingerprint the record was made with.
        fingerprint: Fingerprint,
        /// The record's bytes, as given to [`Store::complete`].
        record: Bytes,
        /// How long the record still lives, by the store's clock. A local
        /// cache may keep the record this long and no longer.
        expires_in: Duration,
    },
}

/// Whether a fenced step (complete, release, renew) found our claim.
///
/// The two ways of losing a claim are told apart so that the caller's
/// [`Error::LeaseLost`](crate::Error) can say which happened; a store
/// answers [`Fence::Expired`] only when it knows that nobody holds the
/// key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fence {
    /// The claim was still ours; the step took effect.
    Held,
    /// Another caller holds the key (it took over after our lease ran
    /// out) or has completed it; nothing changed.
    Lost,
    /// Our claim's lease ran out and nobody holds the key now; nothing
    /// changed.
    Expired,
}

impl Fence {
    /// Whether the step took effect.
    ///
    /// ```
    /// assert!(idem::Fence::Held.is_held());
    /// assert!(!idem::Fence::Expired.is_held());
    /// ```
    pub const fn is_held(self) -> bool {
        matches!(self, Fence::Held)
    }
}

/// A place where idempotency records live.
///
/// Each method is one atomic step and, for a networked backend, one round
/// trip. Lease and TTL expiry are judged by the store's own clock. The
/// store sees only hashed keys, tokens and opaque record bytes; encoding
/// lives above it.
///
/// Every implementation must pass the conformance suite in `tests/`.
///
/// The trait has no `'static` bound, so a store may borrow (e.g. a
/// database transaction, run with [`Call::run_on`](crate::Call::run_on));
/// [`Idempotency`](crate::Idempotency) itself holds `'static` stores.
///
/// ```
/// use std::time::Duration;
/// use idem::{async_trait, Claim, ClaimOutcome, Fence, RecordKey, Store, StoreError, Token};
///
/// /// A store that is always down: every call fails closed.
/// struct Down;
///
/// #[async_trait]
/// impl Store for Down {
///     async fn claim(&self, _: &RecordKey, _: &Claim) -> Result<ClaimOutcome, StoreError> {
///         Err(StoreError::new("down", "unreachable"))
///     }
///     async fn complete(&self, _: &RecordKey, _: Token, _: &[u8], _: Duration) -> Result<Fence, StoreError> {
///         Err(StoreError::new("down", "unreachable"))
///     }
///     async fn release(&self, _: &RecordKey, _: Token) -> Result<Fence, StoreError> {
///         Err(StoreError::new("down", "unreachable"))
///     }
///     async fn renew(&self, _: &RecordKey, _: Token, _: Duration) -> Result<Fence, StoreError> {
///         Err(StoreError::new("down", "unreachable"))
///     }
/// }
/// ```
#[async_trait::async_trait]
pub trait Store: Send + Sync {
    /// Claims `key` atomically: wins it if free or expired (storing the
    /// claim's token, fingerprint and lease), or reports the holder or the
    /// completed record.
    async fn claim(&self, key: &RecordKey, claim: &Claim) -> Result<ClaimOutcome, StoreError>;

    /// Stores `record` for `ttl`, if `token` still holds the claim.
    async fn complete(
        &self,
        key: &RecordKey,
        token: Token,
        record: &[u8],
        ttl: Duration,
    ) -> Result<Fence, StoreError>;

    /// Deletes the in-progress claim, if `token` still holds it, so the next
    /// caller runs the body.
    async fn release(&self, key: &RecordKey, token: Token) -> Result<Fence, StoreError>;

    /// Extends the in-progress claim to `lease` from now, if `token` still
    /// holds it.
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
    /// `Ok`. An operator's step ([`Idempotency::forget`](crate::Idempotency::forget),
    /// `idem forget`), not part of a call: a body still running on a
    /// forgotten claim finds its lease lost when it completes.
    ///
    /// Every built-in store implements it. The default, for stores written
    /// before it existed, refuses with a [`StoreError`] saying the store
    /// does not support it.
    async fn forget(&self, key: &RecordKey) -> Result<(), StoreError> {
        let _ = key;
        Err(StoreError::new(
            "store",
            "this store does not implement `Store::forget`",
        ))
    }
}
