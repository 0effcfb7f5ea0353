//! The values under a record's key: their layout, how a claim's is
//! written, and how a read one is decoded.

use std::io::{self, Write};
use std::time::Duration;

use bytes::{Buf, Bytes};
use idem_contract::StoreError;
use idem_contract::fingerprint::Fingerprint;
use idem_contract::store::{Claim, ClaimOutcome};

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

/// A duration of 8 big-endian milliseconds in a stored value, at `at`:
/// the TTL a completed value was stored with, a claim's time or lease.
pub(super) fn millis_at(value: &[u8], at: usize) -> Result<Duration, StoreError> {
    value
        .get(at..at + 8)
        .and_then(|bytes| <[u8; 8]>::try_from(bytes).ok())
        .map(|ms| Duration::from_millis(u64::from_be_bytes(ms)))
        .ok_or_else(|| corrupt("a duration is not 8 bytes"))
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
pub(super) const KEPT_AFTER_LEASE_MS: u64 =
    idem_contract::store::LAPSED_CLAIM_KEPT.as_secs() * 1000;

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
/// completed record, another caller's claim, or a lapsed claim. `pttl` is
/// the key's `PTTL` read just before, when the claim asked for it (a call
/// with tombstones, and the takeover script), or estimated from a
/// completed value's expiry ([`lifetime_left`]) for a claim that asks
/// for the record's lifetime: a record's lifetime and a claim's lease
/// left by Redis's clock. Without it, a record's lifetime is zero (not
/// asked), and a claim's lease left is estimated from its value
/// ([`lease_left_estimate`]).
pub(super) fn claimed(pttl: Option<i64>, held: Option<Vec<u8>>) -> Result<Claimed, StoreError> {
    let Some(held) = held else {
        return Ok(Claimed::Outcome(ClaimOutcome::won(false, Vec::new())));
    };
    let outcome = match held.first() {
        Some(_) if is_completed(&held) => {
            let fingerprint = fingerprint_at(&held, 1)?;
            let expires_in = match pttl {
                Some(pttl) => remaining(pttl).min(millis_at(&held, 33)?),
                None => Duration::ZERO,
            };
            ClaimOutcome::completed(fingerprint, record_of(held), expires_in)
        }
        Some(b'P') if held.len() >= SITE_AT => {
            let left = match pttl {
                Some(pttl) => lease_left(pttl),
                None => lease_left_estimate(&held, unix_now()),
            };
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
            let tombstone = millis_at(&held, 33)?;
            let expired_ago = tombstone.saturating_sub(remaining(pttl.unwrap_or(0)));
            ClaimOutcome::expired(fingerprint_at(&held, 1)?, expired_ago)
        }
        _ => return Err(corrupt("unknown state")),
    };
    Ok(Claimed::Outcome(outcome))
}

/// A completed value's lifetime left, as a `PTTL` would answer it, from
/// the expiry written in it and the server's time now as this store
/// reads it (`clock.rs`), less a thirty-second of itself for the clocks'
/// drift since they were read: never more than Redis keeps the record, so
/// a local cache never outlives it. `None` for any other value, and for
/// a completed value of the earlier layout (`C`), which holds no expiry:
/// its lifetime is then not known, and a local cache does not keep it.
pub(super) fn lifetime_left(held: &[u8], server_now: Duration) -> Option<i64> {
    if held.first() != Some(&COMPLETED) || record_at(held).is_none() {
        return None;
    }
    let expires_at = millis_at(held, EXPIRY_AT).ok()?;
    let left = expires_at.saturating_sub(server_now);
    i64::try_from((left - left / 32).as_millis()).ok()
}

/// Whether `held` is a completed value, of either layout.
pub(super) fn is_completed(held: &[u8]) -> bool {
    record_at(held).is_some()
}

/// Where a completed value's record starts, by its layout; `None` for any
/// other value (or one too short to be completed).
pub(super) fn record_at(held: &[u8]) -> Option<usize> {
    let at = match held.first() {
        Some(&COMPLETED) => RECORD_AT,
        Some(&COMPLETED_BEFORE) => RECORD_AT_BEFORE,
        _ => return None,
    };
    (held.len() >= at).then_some(at)
}

/// The lease left of an in-progress value found without a `PTTL`, by the
/// claim's time and lease written in it and this host's clock (`now`):
/// zero, so that the takeover script judges by Redis's clock, once it says
/// the lease ran out, or where it says more than the whole lease is left
/// (the claimer's clock is ahead of this one). Only which answer to ask
/// for rests on it: a lease the estimate still counts as running has run
/// out at Redis by at most the claimer's clock's lead on this host's, and
/// never by a whole lease; a takeover is always Redis's judgement. A
/// renewal keeps the value, so a renewed claim's estimate runs out early
/// and the script answers its lease left instead.
pub(super) fn lease_left_estimate(held: &[u8], now: Duration) -> Duration {
    let (Ok(at), Ok(lease)) = (millis_at(held, CLAIM_AT), millis_at(held, LEASE_AT)) else {
        return Duration::ZERO;
    };
    let left = (at + lease).saturating_sub(now);
    if left > lease { Duration::ZERO } else { left }
}

/// The record of a completed value, in the value's own buffer: advancing
/// moves a pointer, where `Bytes::slice` would first share the buffer
/// (one more allocation).
fn record_of(held: Vec<u8>) -> Bytes {
    let at = record_at(&held).unwrap_or(held.len());
    let mut record = Bytes::from(held);
    record.advance(at);
    record
}

/// The value a release leaves where the call's steps are kept, expiring
/// with them: a free key then has no steps, so a claim reads them only
/// when it replaces a lapsed or released claim (see `scripts::RELEASE`).
pub(super) const RELEASED: u8 = b'R';

/// Where a claim's own fields start: `P`, token, fingerprint; the fenced
/// operations compare no more.
pub(super) const CLAIM_AT: usize = 1 + 16 + 32;

/// Where a claim's lease, in milliseconds, is written: after the claim's
/// time.
pub(super) const LEASE_AT: usize = CLAIM_AT + 8;

/// Where a claim's call site's name starts.
pub(super) const SITE_AT: usize = LEASE_AT + 8;

/// An in-progress value: `P`, token, fingerprint, then the claim's time
/// in Unix milliseconds by the claimer's clock and its lease in
/// milliseconds (for listing, and for estimating the lease left where the
/// claim read no `PTTL`: [`lease_left_estimate`]), then the call site's
/// name. Expiry never reads that time: it is Redis's `PX`. Written
/// straight into the command that sends it; `now` is `unix_now()`.
pub(super) fn write_claim_value(
    out: &mut impl Write,
    claim: &Claim,
    now: Duration,
) -> io::Result<()> {
    // The fixed part gathered first: one write instead of five.
    let mut head = [0u8; SITE_AT];
    head[0] = b'P';
    head[1..17].copy_from_slice(&claim.token.to_bytes());
    head[17..CLAIM_AT].copy_from_slice(claim.fingerprint.as_bytes());
    head[CLAIM_AT..LEASE_AT].copy_from_slice(&(now.as_millis() as u64).to_be_bytes());
    head[LEASE_AT..].copy_from_slice(&millis(claim.lease).to_be_bytes());
    out.write_all(&head)?;
    out.write_all(claim.site.as_bytes())
}

/// How long a claim's value is.
pub(super) fn claim_value_len(claim: &Claim) -> usize {
    SITE_AT + claim.site.len()
}

/// The wall-clock time since the Unix epoch (zero before it), for a
/// claim's listing time only.
pub(super) fn unix_now() -> Duration {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
}

/// A completed value: `D`, fingerprint (32 bytes), TTL and expiry (8
/// bytes each, milliseconds, big-endian), record. The expiry is the
/// server's Unix time when the record expires, by the server's clock as
/// the completing store read it (`clock.rs`), so a replay reads the
/// record's lifetime from the value alone ([`lifetime_left`]).
pub(super) const COMPLETED: u8 = b'D';

/// A completed value as written before the expiry was kept in it: `C`,
/// fingerprint, TTL, record. Still read (a record lives its TTL, and
/// replicas of an earlier version may write it during a rolling
/// deployment), never written; an earlier version reading a `D` value
/// fails closed (`unexpected value under an idem key`), it runs nothing.
pub(super) const COMPLETED_BEFORE: u8 = b'C';

/// Where a completed value's expiry is written: after `D`, fingerprint,
/// TTL.
pub(super) const EXPIRY_AT: usize = 1 + 32 + 8;

/// Where a completed value's record starts.
pub(super) const RECORD_AT: usize = EXPIRY_AT + 8;

/// Where a `C` value's record starts: `C`, fingerprint, TTL.
pub(super) const RECORD_AT_BEFORE: usize = 1 + 32 + 8;

/// A completed value of `fingerprint`, kept `ttl` from `server_now` (the
/// server's time as this store reads it), holding `record`.
pub(super) fn completed_value(
    fingerprint: &[u8],
    ttl_ms: u64,
    server_now: Duration,
    record: &[u8],
) -> Vec<u8> {
    let expiry = expiry_ms(ttl_ms, server_now);
    let mut value = Vec::with_capacity(RECORD_AT + record.len());
    value.push(COMPLETED);
    value.extend_from_slice(fingerprint);
    value.extend_from_slice(&ttl_ms.to_be_bytes());
    value.extend_from_slice(&expiry.to_be_bytes());
    value.extend_from_slice(record);
    value
}

/// The server's Unix time in milliseconds when a record kept `ttl_ms`
/// from `server_now` expires.
pub(super) fn expiry_ms(ttl_ms: u64, server_now: Duration) -> u64 {
    u64::try_from(server_now.as_millis())
        .unwrap_or(u64::MAX)
        .saturating_add(ttl_ms)
}

#[cfg(test)]
mod tests {
    use idem_contract::store::Token;

    use super::*;

    fn written(lease_ms: u64, at_ms: u64) -> Vec<u8> {
        let claim = Claim::new(
            Token::random(),
            Fingerprint::NONE,
            Duration::from_millis(lease_ms),
            "site",
        );
        let mut value = Vec::new();
        write_claim_value(&mut value, &claim, Duration::from_millis(at_ms)).unwrap();
        value
    }

    #[test]
    fn a_claims_lease_left_is_estimated_from_its_time_and_lease() {
        let value = written(30_000, 1_000_000);
        let at = |ms| lease_left_estimate(&value, Duration::from_millis(ms));
        assert_eq!(at(1_000_000), Duration::from_millis(30_000));
        assert_eq!(at(1_010_000), Duration::from_millis(20_000));
        // Run out: zero, for the takeover script to judge.
        assert_eq!(at(1_030_000), Duration::ZERO);
        assert_eq!(at(2_000_000), Duration::ZERO);
        // More than the lease left: the claimer's clock is ahead; the
        // script judges.
        assert_eq!(at(990_000), Duration::ZERO);
    }

    #[test]
    fn a_claim_found_without_pttl_answers_the_estimate() {
        let now = unix_now().as_millis() as u64;
        let live = written(60_000, now);
        match claimed(None, Some(live)).unwrap() {
            Claimed::Outcome(ClaimOutcome::InProgress { retry_after, .. }) => {
                assert!(retry_after > Duration::from_secs(50), "{retry_after:?}");
                assert!(retry_after <= Duration::from_secs(60), "{retry_after:?}");
            }
            _ => panic!("expected in progress"),
        }
        let lapsed = written(60_000, now - 61_000);
        assert!(matches!(
            claimed(None, Some(lapsed)).unwrap(),
            Claimed::Replace(_)
        ));
        // With a `PTTL`, Redis's clock decides, whatever the value says.
        let lapsed = written(60_000, now - 61_000);
        let pttl = KEPT_AFTER_LEASE_MS as i64 + 5_000;
        match claimed(Some(pttl), Some(lapsed)).unwrap() {
            Claimed::Outcome(ClaimOutcome::InProgress { retry_after, .. }) => {
                assert_eq!(retry_after, Duration::from_millis(5_000));
            }
            _ => panic!("expected in progress"),
        }
    }

    #[test]
    fn a_record_found_without_pttl_has_no_lifetime() {
        let mut value = vec![b'C'];
        value.extend_from_slice(Fingerprint::NONE.as_bytes());
        value.extend_from_slice(&60_000u64.to_be_bytes());
        value.extend_from_slice(b"record");
        let lifetime = |pttl| match claimed(pttl, Some(value.clone())).unwrap() {
            Claimed::Outcome(ClaimOutcome::Completed {
                expires_in, record, ..
            }) => {
                assert_eq!(&record[..], b"record");
                expires_in
            }
            _ => panic!("expected completed"),
        };
        assert_eq!(lifetime(None), Duration::ZERO);
        assert_eq!(lifetime(Some(59_000)), Duration::from_millis(59_000));
        assert_eq!(lifetime(Some(90_000)), Duration::from_millis(60_000));
    }

    #[test]
    fn a_completed_value_holds_its_expiry_by_the_servers_clock() {
        let server_now = Duration::from_millis(1_700_000_000_000);
        let value = completed_value(Fingerprint::NONE.as_bytes(), 64_000, server_now, b"rec");
        assert_eq!(value[0], COMPLETED);
        assert_eq!(value.len(), RECORD_AT + 3);
        let left = |later_ms| lifetime_left(&value, server_now + Duration::from_millis(later_ms));
        // Less a thirty-second of itself, for the clocks' drift.
        assert_eq!(left(0), Some(62_000));
        assert_eq!(left(32_000), Some(31_000));
        assert_eq!(left(64_000), Some(0));
        assert_eq!(left(90_000), Some(0));
        let with = |pttl| match claimed(pttl, Some(value.clone())).unwrap() {
            Claimed::Outcome(ClaimOutcome::Completed {
                record, expires_in, ..
            }) => {
                assert_eq!(&record[..], b"rec");
                expires_in
            }
            _ => panic!("expected completed"),
        };
        assert_eq!(with(left(0)), Duration::from_millis(62_000));
        // Never more than the stored TTL, whatever the clocks say.
        let ahead = lifetime_left(&value, server_now - Duration::from_secs(3_600));
        assert_eq!(with(ahead), Duration::from_millis(64_000));
    }

    #[test]
    fn a_completed_value_of_the_earlier_layout_is_read_without_a_lifetime() {
        let mut value = vec![COMPLETED_BEFORE];
        value.extend_from_slice(Fingerprint::NONE.as_bytes());
        value.extend_from_slice(&60_000u64.to_be_bytes());
        value.extend_from_slice(b"record");
        assert!(is_completed(&value));
        assert_eq!(lifetime_left(&value, unix_now()), None);
        // A `C` value too short for a `D` one is still read whole.
        let Claimed::Outcome(ClaimOutcome::Completed { record, .. }) =
            claimed(None, Some(value)).unwrap()
        else {
            panic!("expected completed");
        };
        assert_eq!(&record[..], b"record");
    }
}
