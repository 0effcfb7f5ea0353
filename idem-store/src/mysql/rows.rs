//! Decoding the rows the claim procedure answers: one with the outcome,
//! then, for a won claim, one per saved step.

use std::time::Duration;

use bytes::Bytes;
use idem_core::StoreError;
use idem_core::fingerprint::Fingerprint;
use idem_core::store::{ClaimOutcome, StepId};
use sqlx::Row;
use sqlx::mysql::MySqlRow;

use super::BACKEND;
use super::statements;
use super::steps;

/// Reads the claim's rows: outcome, fingerprint, record, remaining
/// microseconds; or (outcome NULL) step id, value.
pub(super) fn claim_outcome(rows: &[MySqlRow]) -> Result<ClaimOutcome, StoreError> {
    read(rows).map_err(|err| StoreError::new(BACKEND, err))
}

type Failure = Box<dyn std::error::Error + Send + Sync>;

fn read(rows: &[MySqlRow]) -> Result<ClaimOutcome, Failure> {
    let mut outcome = None;
    let mut steps = Vec::new();
    for row in rows {
        match row.try_get::<Option<i32>, _>(0)? {
            Some(code) => outcome = Some((code, row)),
            None => steps.push(step(row)?),
        }
    }
    let (code, row) = outcome.ok_or("the claim procedure answered no outcome")?;
    Ok(match code {
        statements::WON | statements::TOOK_OVER => {
            ClaimOutcome::won(code == statements::TOOK_OVER, steps)
        }
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

fn step(row: &MySqlRow) -> Result<(StepId, Bytes), Failure> {
    let id: Vec<u8> = row.try_get(4)?;
    let id = steps::step_id(&id).ok_or("a stored step id is not 16 bytes")?;
    Ok((id, Bytes::from(row.try_get::<Vec<u8>, _>(5)?)))
}

fn remaining(row: &MySqlRow) -> Result<Duration, sqlx::Error> {
    let us: i64 = row.try_get(3)?;
    Ok(Duration::from_micros(us.max(0) as u64))
}

fn fingerprint(row: &MySqlRow) -> Result<Fingerprint, Failure> {
    let bytes: Vec<u8> = row.try_get(1)?;
    let bytes: [u8; 32] = bytes
        .try_into()
        .map_err(|_| "a stored fingerprint is not 32 bytes")?;
    Ok(Fingerprint::from_bytes(bytes))
}
