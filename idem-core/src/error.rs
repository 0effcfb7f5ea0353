//! The errors of idem.

use std::time::Duration;

use crate::StoreError;
use crate::key::ShortKey;

/// Why an idempotent call did not produce its own or a replayed value.
///
/// Every variant says which scope it concerns; keys appear only as a short
/// hash, never raw. [`Error::status`] gives the HTTP status that answers
/// it:
///
/// | variant | when | HTTP status |
/// | --- | --- | --- |
/// | `InProgress { scope, key, retry_after }` | another call holds the key and `wait` ran out or is zero | 409 |
/// | `FingerprintMismatch { scope, key }` | the key was used before with another payload | 422 |
/// | `LeaseLost { scope, key, taken_over }` | our claim's lease ran out before the body ended: another call took the key over (`taken_over`), or the claim merely expired; our result was not stored | 409 |
/// | `Expired { scope, key, expired_ago }` | the key's record has expired, but the call kept a tombstone (`tombstone = "30d"`, [`Call::tombstone`](crate::Call::tombstone)) that says it completed with this payload: the body does not run again | 410 |
/// | `Store(StoreError)` | the store failed or is unreachable; the body did not run if the claim was not won | 503 when its [kind](StoreError::kind) may pass by itself, else 500 (a misconfigured or unsupported store: retrying cannot help) |
/// | `Codec(CodecError)` | a stored value cannot be decoded as the return type (changed between deploys, corrupt), or a value cannot be encoded or exceeds `max_record_bytes` (1 MiB by default): `NotStored` for a whole call's result, `StepNotStored` for a step's value | 500 |
/// | `InvalidKey(..)` | the key is not acceptable (empty) | 400 |
/// | `InvalidOption(..)` | the call's settings cannot work: a zero `ttl` or `lease`, a `lease` longer than the `ttl` (given as expressions or through the builder; literals in the attribute are compile errors) | 500 |
/// | `InvalidStep { step, reason }` | `idem::step` outside an idempotent body, inside another step of the same call, under a name a finished step of the same run used, for a value type whose smallest record exceeds `max_record_bytes`, or where the store cannot keep steps (`Call::on`, a transaction's handle) | 500 |
/// | `NotConfigured` | an `#[idempotent]` fn without `store = …` ran and no handle was given to `idem::install` (an HTTP layer's handle is not installed by the layer) | 500 |
///
/// `Error` is `Send + Sync + 'static`. The runtime emits `tracing` events
/// (`claimed`, `replayed`, `in progress elsewhere`, `fingerprint
/// mismatch`, `lease lost`, `step saved`, `step replayed`) with the scope
/// and the key's short hash.
///
/// ```
/// use idem::Error;
///
/// let err = Error::NotConfigured;
/// assert_eq!(err.status(), 500);
/// assert!(err.to_string().contains("install"));
/// assert!(format!("{err:?}").contains("idem::install"));
/// ```
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Another caller holds the key and `wait` ran out or is zero.
    #[error(
        "key {key} in scope `{scope}` is being processed by another call; retry after {retry_after:?}"
    )]
    InProgress {
        /// The scope of the key.
        scope: String,
        /// A short hash of the key.
        key: ShortKey,
        /// How long the holder's lease still runs, as the store judged it.
        retry_after: Duration,
    },
    /// The key was used before with a different payload.
    #[error("key {key} in scope `{scope}` was already used with a different payload")]
    FingerprintMismatch {
        /// The scope of the key.
        scope: String,
        /// A short hash of the key.
        key: ShortKey,
    },
    /// Our claim's lease ran out before the body ended; our result was not
    /// stored. `taken_over` tells whether another caller holds or has
    /// completed the key since, or whether the claim merely expired
    /// (then the next call runs the body again).
    #[error(
        "the claim on key {key} in scope `{scope}` was no longer ours at completion: its lease ran out before the body ended (the process stalled, or could not reach the store to renew it), {}; the result was not stored",
        lost_how(*.taken_over)
    )]
    LeaseLost {
        /// The scope of the key.
        scope: String,
        /// A short hash of the key.
        key: ShortKey,
        /// Whether another caller took the key over (true), or our claim
        /// expired with nobody holding the key (false).
        taken_over: bool,
    },
    /// The key's record has expired, but its tombstone says the call
    /// completed with this payload (`tombstone = "30d"`): the body did not
    /// run again, and the result is gone. (Another payload under the key
    /// is `FingerprintMismatch`; once the tombstone has passed, the key is
    /// free.)
    #[error(
        "key {key} in scope `{scope}` was completed and its record expired {expired_ago:?} ago; its tombstone keeps the call from running again"
    )]
    Expired {
        /// The scope of the key.
        scope: String,
        /// A short hash of the key.
        key: ShortKey,
        /// How long ago the record's TTL ran out, by the store's clock.
        expired_ago: Duration,
    },
    /// The store failed or could not be reached.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A value could not be encoded, or a stored one decoded.
    #[error(transparent)]
    Codec(#[from] CodecError),
    /// The key itself is not acceptable (for instance empty).
    #[error("invalid idempotency key: {0}")]
    InvalidKey(String),
    /// A call's settings cannot work: a zero `ttl` or `lease`, or a
    /// `lease` longer than the `ttl`. Checked before any claim, for
    /// settings given as expressions or through the builder (literals in
    /// the attribute are checked at compile time).
    #[error("invalid setting: {0}")]
    InvalidOption(String),
    /// `idem::step` was used where it cannot work: outside a running
    /// idempotent body, inside another step of the same call, under a name
    /// a finished or running step of the same call already used, for a
    /// value type whose smallest record exceeds `max_record_bytes`, or in a
    /// call whose store cannot keep steps (a borrowed one, `Call::on`,
    /// or a transaction's handle). Refused before the step's body runs.
    #[error("idem::step `{step}` refused: {reason}")]
    InvalidStep {
        /// The step's name, as written.
        step: String,
        /// Why it was refused.
        reason: &'static str,
    },
    /// An `#[idempotent]` fn without `store =` ran, and no handle was
    /// installed with [`idem::install`](crate::install). (An HTTP layer's
    /// own handle does not count: the fns behind it need one installed.)
    #[error(
        "no idempotency store configured for an #[idempotent] fn: pass `store = …` to the attribute or call `idem::install(handle)` at startup (an `IdempotencyLayer`'s handle is not installed by the layer)"
    )]
    NotConfigured,
}

/// As derived, but `NotConfigured` carries its hint, so an `unwrap()` or a
/// `{:?}` in a log says what to do.
impl std::fmt::Debug for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::InProgress {
                scope,
                key,
                retry_after,
            } => f
                .debug_struct("InProgress")
                .field("scope", scope)
                .field("key", key)
                .field("retry_after", retry_after)
                .finish(),
            Error::FingerprintMismatch { scope, key } => f
                .debug_struct("FingerprintMismatch")
                .field("scope", scope)
                .field("key", key)
                .finish(),
            Error::LeaseLost {
                scope,
                key,
                taken_over,
            } => f
                .debug_struct("LeaseLost")
                .field("scope", scope)
                .field("key", key)
                .field("taken_over", taken_over)
                .finish(),
            Error::Expired {
                scope,
                key,
                expired_ago,
            } => f
                .debug_struct("Expired")
                .field("scope", scope)
                .field("key", key)
                .field("expired_ago", expired_ago)
                .finish(),
            Error::Store(err) => f.debug_tuple("Store").field(err).finish(),
            Error::Codec(err) => f.debug_tuple("Codec").field(err).finish(),
            Error::InvalidKey(why) => f.debug_tuple("InvalidKey").field(why).finish(),
            Error::InvalidOption(why) => f.debug_tuple("InvalidOption").field(why).finish(),
            Error::InvalidStep { step, reason } => f
                .debug_struct("InvalidStep")
                .field("step", step)
                .field("reason", reason)
                .finish(),
            Error::NotConfigured => write!(f, "NotConfigured({:?})", self.to_string()),
        }
    }
}

impl Error {
    /// The HTTP status that best answers this error: the client may retry a
    /// 409 or 503, must change its request on a 400 or 422, must not
    /// retry a 410 (the request was done; its result is gone), and a 500
    /// is the service's own fault.
    pub fn status(&self) -> u16 {
        match self {
            Error::InProgress { .. } | Error::LeaseLost { .. } => 409,
            Error::FingerprintMismatch { .. } => 422,
            Error::Expired { .. } => 410,
            Error::InvalidKey(_) => 400,
            Error::Store(err) if err.kind().is_transient() => 503,
            Error::Store(_)
            | Error::Codec(_)
            | Error::InvalidOption(_)
            | Error::InvalidStep { .. }
            | Error::NotConfigured => 500,
        }
    }
}

/// A value could not be encoded, or a stored record could not be decoded
/// as the function's return type.
///
/// ```
/// use idem::CodecError;
///
/// let err = CodecError::VersionChanged { stored: 1, expected: 2, type_name: "app::Receipt".into() };
/// assert!(err.to_string().contains("version 1"));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    /// The stored value does not decode as this function's return type:
    /// its shape changed between deploys (a field's type, a required field
    /// added). A type that moved or was renamed but keeps its shape still
    /// decodes.
    #[error(
        "the stored record holds a `{stored}`, which does not decode as `{expected}` (its shape changed?): {source}"
    )]
    ShapeChanged {
        /// The type name recorded with the value, for this message.
        stored: String,
        /// The type this call expects.
        expected: &'static str,
        /// The decoder's verdict.
        #[source]
        source: serde_json::Error,
    },
    /// The record was written under another `version` of the function's
    /// values (bumped by its author when a change keeps the shape but not
    /// the meaning).
    #[error(
        "the stored `{type_name}` was written as version {stored}, but this function reads version {expected}"
    )]
    VersionChanged {
        /// The version in the record.
        stored: u32,
        /// The version this call expects.
        expected: u32,
        /// The type name recorded with the value.
        type_name: String,
    },
    /// The record's format version is not the one this build reads:
    /// format 3 is the only one (1 and 2 were written by builds before
    /// 0.1 and are not read).
    #[error("the stored record has format version {0}; this build of idem reads only format 3")]
    Format(u8),
    /// The record was cut short or is otherwise malformed.
    #[error("the stored record is corrupt: {0}")]
    Corrupt(&'static str),
    /// The record holds an `Err`, but this function releases errors instead
    /// of storing them (its `errors` policy changed between deploys).
    #[error("the stored record holds an error of `{0}`, but this function does not replay errors")]
    ErrorNotReplayable(String),
    /// The encoded value is larger than the handle allows.
    #[error("the encoded value is {size} bytes, more than the limit of {limit} bytes")]
    TooLarge {
        /// The encoded size.
        size: usize,
        /// The configured limit.
        limit: usize,
    },
    /// The value nests deeper than a record can be read back with (arrays
    /// and objects inside each other, as its JSON is written, escapes
    /// included): it is refused before it is stored.
    #[error(
        "the encoded value nests {depth} levels deep, more than the {limit} a record can be read back with"
    )]
    TooDeep {
        /// How deeply the value's JSON nests.
        depth: usize,
        /// The deepest a record may nest.
        limit: usize,
    },
    /// The value encodes but would not decode as its own type, so it is
    /// refused before it is stored: a `u128` or `i128` inside
    /// `#[serde(flatten)]` or an untagged or internally tagged enum, which
    /// serde reads through a buffer without 128-bit integers.
    #[error(
        "a `{type_name}` encodes but would not replay ({source}): serde reads `#[serde(flatten)]` fields and untagged or internally tagged enums through a buffer without 128-bit integers, so a u128 or i128 cannot be inside them"
    )]
    Unreplayable {
        /// The value's type.
        type_name: &'static str,
        /// The decoder's verdict.
        #[source]
        source: serde_json::Error,
    },
    /// The first call ran its body, but its result could not be stored (too
    /// large for the record limit, or not encodable); the key answers this
    /// to every duplicate until the record expires, instead of running the
    /// body again.
    #[error(
        "the first call ran, but its result could not be stored ({0}); it cannot be replayed, and the body will not run again for this key until the record expires"
    )]
    NotStored(String),
    /// A step of the call ran, but its `Ok` value could not be saved (too
    /// large for `max_record_bytes`, or its `Serialize` failed). The step
    /// was settled with a not-stored marker instead, as a whole call is:
    /// the attempt that ran it and every retry of the call get this error
    /// at that step, and its body does not run again for the call's key
    /// until the call's steps expire with its `ttl` (or the key is
    /// forgotten).
    #[error(
        "step `{step}` ran, but its value could not be saved ({reason}); it cannot be replayed, and it will not run again for this call's key until the call's steps expire"
    )]
    StepNotStored {
        /// The step's name, as written.
        step: String,
        /// Why its value could not be saved.
        reason: String,
    },
    /// serde_json failed to encode or decode the value.
    #[error("cannot {action} `{type_name}`: {source}")]
    Json {
        /// `"encode"` or `"decode"`.
        action: &'static str,
        /// The type involved.
        type_name: &'static str,
        /// The underlying error.
        #[source]
        source: serde_json::Error,
    },
    /// The payload's `Serialize` failed while it was fingerprinted.
    #[error(transparent)]
    Fingerprint(#[from] crate::fingerprint::FingerprintError),
}

fn lost_how(taken_over: bool) -> &'static str {
    if taken_over {
        "and another call took the key over"
    } else {
        "and the claim expired (no other call holds the key)"
    }
}
