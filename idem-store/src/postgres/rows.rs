//! Decoding the rows the claim statement answers.

use std::time::Duration;

use bytes::Bytes;
use idem_core::StoreError;
use idem_core::fingerprint::Fingerprint;
use idem_core::store::ClaimOutcome;
use sqlx::Row;
use sqlx::postgres::PgRow;

use super::BACKEND;
use super::statements;
use super::steps;

/// Reads the claim statement's row: outcome, fingerprint, record,
/// remaining microseconds, steps.
pub(super) fn claim_outcome(row: &PgRow) -> Result<ClaimOutcome, StoreError> {
    read(row).map_err(|err| StoreError::new(BACKEND, err))
}

type Failure = Box<dyn std::error::Error + Send + Sync>;

fn read(row: &PgRow) -> Result<ClaimOutcome, Failure> {
    let outcome: i32 = row.try_get(0)?;
    Ok(match outcome {
        statements::WON | statements::TOOK_OVER => ClaimOutcome::won(
            outcome == statements::TOOK_OVER,
            steps::parse(row.try_get(4)?)?,
        ),
        statements::IN_PROGRESS => ClaimOutcome::in_progress(fingerprint(row)?, remaining(row)?),
        statements::COMPLETED => ClaimOutcome::completed(
            fingerprint(row)?,
            Bytes::from(row.try_get::<Vec<u8>, _>(2)?),
            remaining(row)?,
        ),
        statements::EXPIRED => ClaimOutcome::expired(fingerprint(row)?, remaining(row)?),
        other => return Err(format!("unknown claim outcome {other}").into()),
    })
}

/// The time left (or, for a tombstone, since the record's TTL ran out).
fn remaining(row: &PgRow) -> Result<Duration, sqlx::Error> {
    let us: i64 = row.try_get(3)?;
    Ok(Duration::from_micros(us.max(0) as u64))
}

fn fingerprint(row: &PgRow) -> Result<Fingerprint, Failure> {
    let bytes: Vec<u8> = row.try_get(1)?;
    let bytes: [u8; 32] = bytes
        .try_into()
        .map_err(|_| "a stored fingerprint is not 32 bytes")?;
    Ok(Fingerprint::from_bytes(bytes))
}
