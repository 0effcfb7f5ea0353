//! The values under a record's key: their layout, how a claim's is
//! written, and how a read one is decoded.

use std::io::{self, Write};
use std::time::Duration;

use bytes::{Buf, Bytes};
use idem_core::StoreError;
use idem_core::fingerprint::Fingerprint;
use idem_core::store::{Claim, ClaimOutcome};

/// A duration in whole milliseconds, at least 1 (`PX` needs it).
pub(super) fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis())
        .unwrap_or(u64::MAX)
        .max(1)
}

/// A value under an idem key that is none of idem's.
pub(super) fn corrupt(what: &'static str) -> StoreError {
    StoreError::new(
        "redis",
        format!("unexpected value under an idem key: {what}"),
    )
}

/// The 32 fingerprint bytes of a stored value, at `at`.
pub(super) fn fingerprint_at(value: &[u8], at: usize) -> Result<Fingerprint, StoreError> {
    value
        .get(at..at + 32)
        .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
        .map(Fingerprint::from_bytes)
        .ok_or_else(|| corrupt("fingerprint is not 32 bytes"))
}

/// The TTL a completed value was stored with, at `at`.
pub(super) fn ttl_at(value: &[u8], at: usize) -> Result<Duration, StoreError> {
    value
        .get(at..at + 8)
        .and_then(|bytes| <[u8; 8]>::try_from(bytes).ok())
        .map(|ms| Duration::from_millis(u64::from_be_bytes(ms)))
        .ok_or_else(|| corrupt("TTL is not 8 bytes"))
}

/// What a `PTTL` answered, as a duration (none when negative).
pub(super) fn remaining(pttl_ms: i64) -> Duration {
    Duration::from_millis(u64::try_from(pttl_ms).unwrap_or(0))
}

/// How long an in-progress claim's key outlives its lease, in
/// milliseconds: a holder that vanished leaves its claim there, so the
/// next claim is told it took over (`ClaimOutcome::Won::took_over`)
/// instead of finding a free key. The key's `PX` is the lease plus this,
/// so the lease left is its `PTTL` minus this, by Redis's clock. A day,
/// the default TTL: a retry within it reconciles (the scripts hold the
/// same figure, see `scripts.rs`).
pub(super) const KEPT_AFTER_LEASE_MS: u64 = 24 * 60 * 60 * 1000;

/// The `PX` of an in-progress claim of `lease`.
pub(super) fn claim_px(lease: Duration) -> u64 {
    millis(lease).saturating_add(KEPT_AFTER_LEASE_MS)
}

/// The lease left of an in-progress claim whose key's `PTTL` is
/// `pttl_ms`: zero once it lapsed.
pub(super) fn lease_left(pttl_ms: i64) -> Duration {
    remaining(pttl_ms.saturating_sub(KEPT_AFTER_LEASE_MS as i64))
}

/// What a claim's `SET … NX GET` found.
pub(super) enum Claimed {
    /// The claim's outcome: won on a free key, a completed record, or
    /// another caller's live claim.
    Outcome(ClaimOutcome),
    /// Another caller's claim whose lease lapsed, or the marker a release
    /// leaves where steps are kept (`RELEASED`): the value, which a script
    /// replaces after checking it again (`TAKE_OVER`).
    Replace(Vec<u8>),
}

/// What a claim's `SET … NX GET` answered: nothing (the claim is ours), a
/// completed record, another caller's claim, or a lapsed claim.
pub(super) fn claimed(pttl: i64, held: Option<Vec<u8>>) -> Result<Claimed, StoreError> {
    let Some(held) = held else {
        return Ok(Claimed::Outcome(ClaimOutcome::won(false, Vec::new())));
    };
    let outcome = match held.first() {
        Some(b'C') if held.len() >= RECORD_AT => {
            let fingerprint = fingerprint_at(&held, 1)?;
            let expires_in = remaining(pttl).min(ttl_at(&held, 33)?);
            ClaimOutcome::completed(fingerprint, record_of(held), expires_in)
        }
        Some(b'P') if held.len() >= CLAIM_AT => {
            let left = lease_left(pttl);
            if left.is_zero() {
                return Ok(Claimed::Replace(held));
            }
            ClaimOutcome::in_progress(fingerprint_at(&held, 17)?, left)
        }
        Some(&RELEASED) => return Ok(Claimed::Replace(held)),
        // A tombstone's marker (`tombstone.rs`), found by a tombstoned
        // call's claim where the record has expired: `T`, fingerprint, the
        // tombstone's length; it expired that length less the `PTTL` ago.
        Some(b'T') => {
            let tombstone = ttl_at(&held, 33)?;
            let expired_ago = tombstone.saturating_sub(remaining(pttl));
            ClaimOutcome::expired(fingerprint_at(&held, 1)?, expired_ago)
        }
        _ => return Err(corrupt("unknown state")),
    };
    Ok(Claimed::Outcome(outcome))
}

/// The record of a completed value, in the value's own buffer: advancing
/// moves a pointer, where `Bytes::slice` would first share the buffer
/// (one more allocation).
fn record_of(held: Vec<u8>) -> Bytes {
    let mut record = Bytes::from(held);
    record.advance(RECORD_AT);
    record
}

/// The value a release leaves where the call's steps are kept, expiring
/// with them: a free key then has no steps, so a claim reads them only
/// when it replaces a lapsed or released claim (see `scripts::RELEASE`).
pub(super) const RELEASED: u8 = b'R';

/// Where a claim's listing fields start: `P`, token, fingerprint.
pub(super) const CLAIM_AT: usize = 1 + 16 + 32;

/// An in-progress value: `P`, token, fingerprint, then for listing only
/// (`idem list`; the fenced operations read the first 49 bytes) the claim's
/// time in Unix milliseconds by the claimer's clock and the call site's
/// name. Expiry never reads that time: it is Redis's `PX`. Written
/// straight into the command that sends it; `now` is `unix_now()`.
pub(super) fn write_claim_value(
    out: &mut impl Write,
    claim: &Claim,
    now: Duration,
) -> io::Result<()> {
    // The fixed part gathered first: one write instead of four.
    let mut head = [0u8; CLAIM_AT + 8];
    head[0] = b'P';
    head[1..17].copy_from_slice(&claim.token.to_bytes());
    head[17..CLAIM_AT].copy_from_slice(claim.fingerprint.as_bytes());
    head[CLAIM_AT..].copy_from_slice(&(now.as_millis() as u64).to_be_bytes());
    out.write_all(&head)?;
    out.write_all(claim.site.as_bytes())
}

/// How long a claim's value is.
pub(super) fn claim_value_len(claim: &Claim) -> usize {
    CLAIM_AT + 8 + claim.site.len()
}

/// The wall-clock time since the Unix epoch (zero before it), for a
/// claim's listing time only.
pub(super) fn unix_now() -> Duration {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
}

/// Where a completed value's record starts: `C`, fingerprint, TTL.
pub(super) const RECORD_AT: usize = 1 + 32 + 8;
