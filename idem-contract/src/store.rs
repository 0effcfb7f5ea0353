//! What a store author needs beyond [`Store`](crate::Store) itself: the
//! claim a caller asks for, the store's answers, the fencing token, a
//! step's identity, and the `async_trait` attribute the trait is written
//! with.
//!
//! A store speaks keys, tokens and bytes: the record and step values are
//! opaque to it, and keys arrive hashed ([`RecordKey`]).
//! Every implementation must pass the conformance suite, the
//! [`idem-conformance`](https://docs.rs/idem-conformance) crate.

use std::time::Duration;

use bytes::Bytes;

use crate::fingerprint::Fingerprint;
use crate::key::{self, KeyPart, RecordKey};

pub(crate) mod contract;

pub use async_trait::async_trait;

/// How long a store keeps a claim whose lease ran out without a result
/// (its holder crashed or was cut off): a day. The lapsed claim is the
/// evidence that a body may have had its effect, so the next call takes it
/// over (and asks its reconcile, SPEC §13) instead of running as if the
/// key were new, and a call with another payload is refused as a
/// mismatch. A purge or a sweep keeps it this long; after that the key is
/// free.
///
/// ```
/// assert_eq!(idem_contract::store::LAPSED_CLAIM_KEPT.as_secs(), 24 * 60 * 60);
/// ```
pub const LAPSED_CLAIM_KEPT: Duration = Duration::from_secs(24 * 60 * 60);

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

/// The identity of one step within its call, hashed from its name.
///
/// ```
/// use idem_contract::store::StepId;
///
/// assert_eq!(StepId::new(&("line", 3u32)), StepId::new(&("line", 3u64)));
/// assert_ne!(StepId::new(&"reserve"), StepId::new(&"charge"));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StepId([u8; 16]);

impl StepId {
    /// Hashes a step's name.
    pub fn new<N: KeyPart + ?Sized>(name: &N) -> Self {
        Self(RecordKey::step_id(name))
    }

    /// Rebuilds a step id from the 16 bytes a store kept.
    pub const fn from_bytes(bytes: [u8; 16]) -> Self {
        Self(bytes)
    }

    /// The 16 bytes of the id.
    pub const fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }
}

impl std::fmt::Debug for StepId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StepId({})", key::hex(&self.0[..4]))
    }
}

/// What a caller asks for when it claims a key.
///
/// ```
/// use std::time::Duration;
/// use idem_contract::store::{Claim, Token};
/// let claim = Claim::new(Token::random(), idem_contract::fingerprint::Fingerprint::of(&"payload").unwrap(),
///                        Duration::from_secs(30), "app::charge");
/// assert_eq!(claim.lease, Duration::from_secs(30));
/// ```
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Claim {
    /// The token the claim will hold if won.
    pub token: Token,
    /// The payload's fingerprint, kept with the record.
    pub fingerprint: Fingerprint,
    /// How long the claim is held before another caller may take over.
    pub lease: Duration,
    /// The call site's static name ([`CallSite::name`](https://docs.rs/idemkit/latest/idem/struct.CallSite.html#method.name):
    /// the function's path for `#[idempotent]`), for stores that keep it
    /// with the record so operators can list records (`idem list`) without
    /// the raw key, which is never stored. Bounded, never a tenant or key.
    pub site: &'static str,
    /// Whether the call keeps tombstones ([`Retention::tombstone`]): a
    /// store that keeps them apart from the record (Redis) looks for one
    /// only then; a store that keeps them in the record's row answers
    /// [`ClaimOutcome::Expired`] either way. Set with
    /// [`with_tombstone`](Claim::with_tombstone).
    pub tombstone: bool,
    /// Whether the caller keeps a completed record for its
    /// [`expires_in`](ClaimOutcome::Completed::expires_in) (a local
    /// cache): a store that pays for the record's lifetime with more work
    /// (Redis: one more command per claim) reads it only then. Set with
    /// [`with_expiry`](Claim::with_expiry).
    pub expiry: bool,
    /// Whether the call reruns on another payload (`mismatch = "rerun"`,
    /// a key that names a resource): a completed record whose fingerprint
    /// differs from the claim's is replaced by the claim (won, in the same
    /// atomic step that read it, with the steps of the replaced call
    /// dropped), where otherwise the store answers it
    /// [`ClaimOutcome::Completed`] and the caller refuses it as a
    /// mismatch. A tombstone of another payload is replaced the same way.
    /// A record of the same fingerprint is answered as ever (a replay),
    /// and a held or lapsed claim of another payload too: the claim is
    /// the lock, so calls for one key run one at a time. A store that
    /// ignores the flag fails closed: the caller refuses the record it
    /// answers. Set with [`with_rerun`](Claim::with_rerun).
    pub rerun: bool,
}

impl Claim {
    /// A claim of `lease` with `token`, for a payload of `fingerprint`,
    /// made at the call site named `site`.
    pub const fn new(
        token: Token,
        fingerprint: Fingerprint,
        lease: Duration,
        site: &'static str,
    ) -> Self {
        Self {
            token,
            fingerprint,
            lease,
            site,
            tombstone: false,
            expiry: false,
            rerun: false,
        }
    }

    /// The same claim, made by a call that keeps tombstones, so the store
    /// looks for one when the key's record has expired.
    ///
    /// ```
    /// use std::time::Duration;
    /// use idem_contract::store::{Claim, Token};
    /// let claim = Claim::new(Token::random(), idem_contract::fingerprint::Fingerprint::NONE,
    ///                        Duration::from_secs(30), "app::charge").with_tombstone();
    /// assert!(claim.tombstone);
    /// ```
    pub const fn with_tombstone(mut self) -> Self {
        self.tombstone = true;
        self
    }

    /// The same claim, made by a caller that keeps a completed record as
    /// long as it lives (a local cache), so the store answers the record's
    /// [`expires_in`](ClaimOutcome::Completed::expires_in) even where that
    /// costs more.
    ///
    /// ```
    /// use std::time::Duration;
    /// use idem_contract::store::{Claim, Token};
    /// let claim = Claim::new(Token::random(), idem_contract::fingerprint::Fingerprint::NONE,
    ///                        Duration::from_secs(30), "app::charge").with_expiry();
    /// assert!(claim.expiry);
    /// ```
    pub const fn with_expiry(mut self) -> Self {
        self.expiry = true;
        self
    }

    /// The same claim, made by a call that reruns on another payload
    /// (`mismatch = "rerun"`): it replaces a completed record (or a
    /// tombstone) of another fingerprint instead of being answered it.
    ///
    /// ```
    /// use std::time::Duration;
    /// use idem_contract::store::{Claim, Token};
    /// let claim = Claim::new(Token::random(), idem_contract::fingerprint::Fingerprint::NONE,
    ///                        Duration::from_secs(30), "app::set_status").with_rerun();
    /// assert!(claim.rerun);
    /// ```
    pub const fn with_rerun(mut self) -> Self {
        self.rerun = true;
        self
    }
}

/// How long a store keeps a completed record: its `ttl`, then, when the
/// call asks for one, a tombstone for `tombstone` more: a marker of the
/// fingerprint without the value, so a late duplicate is answered
/// [`ClaimOutcome::Expired`] instead of running again. A store keeps the
/// tombstone compact (the built-in ones: 136 to 313 bytes each, whatever
/// the record was; BENCHMARKS.md, "Bytes per tombstone").
///
/// ```
/// use std::time::Duration;
/// use idem_contract::store::Retention;
/// let kept = Retention::new(Duration::from_secs(60)).with_tombstone(Duration::from_secs(600));
/// assert_eq!(kept.kept_for(), Duration::from_secs(660));
/// assert_eq!(Retention::new(Duration::from_secs(60)).tombstone, None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Retention {
    /// How long the record is replayed.
    pub ttl: Duration,
    /// How long a tombstone stays after the TTL; `None`: no tombstone, the
    /// key is free once the TTL has passed.
    pub tombstone: Option<Duration>,
}

impl Retention {
    /// A record kept `ttl`, with no tombstone.
    pub const fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            tombstone: None,
        }
    }

    /// The same, followed by a tombstone kept `tombstone` more.
    pub const fn with_tombstone(mut self, tombstone: Duration) -> Self {
        self.tombstone = Some(tombstone);
        self
    }

    /// How long the key stays taken from the completion on: the TTL plus
    /// the tombstone, if any.
    pub fn kept_for(&self) -> Duration {
        self.ttl.saturating_add(self.tombstone.unwrap_or_default())
    }
}

/// The store's answer to a claim. Stores build it with
/// [`won`](ClaimOutcome::won), [`in_progress`](ClaimOutcome::in_progress),
/// [`completed`](ClaimOutcome::completed) and
/// [`expired`](ClaimOutcome::expired), so that a later release can
/// add a field.
///
/// ```
/// use std::time::Duration;
/// use idem_contract::store::ClaimOutcome;
/// let answer = ClaimOutcome::won(false, Vec::new());
/// assert!(matches!(answer, ClaimOutcome::Won { took_over: false, .. }));
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ClaimOutcome {
    /// The claim is ours: the key was free, expired, or its holder's lease
    /// ran out (`took_over`).
    #[non_exhaustive]
    Won {
        /// Whether an expired in-progress claim of another caller was taken
        /// over.
        took_over: bool,
        /// The steps ([`idem::step`](https://docs.rs/idemkit/latest/idem/fn.step.html)) an earlier attempt of
        /// this call finished and saved with [`Store::save_step`](crate::Store::save_step), and that
        /// have not expired: the resumed body replays them. Empty for a
        /// fresh call, and for a store that does not record steps.
        steps: Vec<(StepId, Bytes)>,
    },
    /// Another caller holds the key.
    #[non_exhaustive]
    InProgress {
        /// The holder's fingerprint.
        fingerprint: Fingerprint,
        /// How long the holder's lease still runs, by the store's clock.
        retry_after: Duration,
    },
    /// The key was completed; here is its record.
    #[non_exhaustive]
    Completed {
        /// The fingerprint the record was made with.
        fingerprint: Fingerprint,
        /// The record's bytes, as given to [`Store::complete`](crate::Store::complete).
        record: Bytes,
        /// How long the record still lives, by the store's clock. A local
        /// cache may keep the record this long and no longer. Zero where
        /// the claim did not ask for it ([`Claim::with_expiry`]) and the
        /// store would pay to read it (Redis).
        expires_in: Duration,
    },
    /// The key's record has expired, but its tombstone
    /// ([`Retention::tombstone`]) says the call completed: the key is not
    /// claimed, and the call's answer is `Error::Expired` (or
    /// `Error::FingerprintMismatch` for another payload).
    #[non_exhaustive]
    Expired {
        /// The fingerprint the record was made with.
        fingerprint: Fingerprint,
        /// How long ago the record's TTL ran out, by the store's clock.
        expired_ago: Duration,
    },
}

impl ClaimOutcome {
    /// The claim is ours; `took_over` when an expired claim of another
    /// caller was taken over, with the `steps` an earlier attempt saved.
    pub fn won(took_over: bool, steps: Vec<(StepId, Bytes)>) -> Self {
        ClaimOutcome::Won { took_over, steps }
    }

    /// Another caller holds the key with a payload of `fingerprint`, for
    /// `retry_after` more by the store's clock.
    pub fn in_progress(fingerprint: Fingerprint, retry_after: Duration) -> Self {
        ClaimOutcome::InProgress {
            fingerprint,
            retry_after,
        }
    }

    /// The key was completed with `record`, which lives `expires_in` more.
    pub fn completed(fingerprint: Fingerprint, record: Bytes, expires_in: Duration) -> Self {
        ClaimOutcome::Completed {
            fingerprint,
            record,
            expires_in,
        }
    }

    /// The key's record, made with `fingerprint`, expired `expired_ago`
    /// and its tombstone still stands.
    pub fn expired(fingerprint: Fingerprint, expired_ago: Duration) -> Self {
        ClaimOutcome::Expired {
            fingerprint,
            expired_ago,
        }
    }
}

/// Whether a fenced operation (complete, release, renew) found our claim.
///
/// The two ways of losing a claim are told apart so that the caller's
/// [`Error::LeaseLost`](https://docs.rs/idemkit/latest/idem/enum.Error.html#variant.LeaseLost) can say which happened; a store
/// answers [`Fence::Expired`] only when it knows that nobody holds the
/// key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fence {
    /// The claim was still ours; the operation took effect.
    Held,
    /// Another caller holds the key (it took over after our lease ran
    /// out) or has completed it; nothing changed.
    Lost,
    /// Our claim's lease ran out and nobody holds the key now; nothing
    /// changed.
    Expired,
}

impl Fence {
    /// Whether the operation took effect.
    ///
    /// ```
    /// assert!(idem_contract::store::Fence::Held.is_held());
    /// assert!(!idem_contract::store::Fence::Expired.is_held());
    /// ```
    pub const fn is_held(self) -> bool {
        matches!(self, Fence::Held)
    }
}
