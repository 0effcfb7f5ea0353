//! Decoding the rows the claim procedure answers: one with the outcome
//! (read by `crate::sql::claimed`), then, for a won claim, one per saved
//! step.

use bytes::Bytes;
use idem_contract::StoreError;
use idem_contract::store::{ClaimOutcome, StepId};
use sqlx::Row;
use sqlx::mysql::MySqlRow;

use crate::sql::claimed::{self, Failure};

use super::BACKEND;
use super::steps;

/// Reads the claim's rows: outcome, fingerprint, record, remaining
/// microseconds; or (outcome NULL) step id, value.
pub(super) fn claim_outcome(rows: &[MySqlRow]) -> Result<ClaimOutcome, StoreError> {
    read(rows).map_err(|err| StoreError::new(BACKEND, err))
}

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
    claimed::outcome(code, row, || Ok(steps))
}

fn step(row: &MySqlRow) -> Result<(StepId, Bytes), Failure> {
    let id: Vec<u8> = row.try_get(4)?;
    let id = steps::step_id(&id).ok_or("a stored step id is not 16 bytes")?;
    Ok((id, Bytes::from(row.try_get::<Vec<u8>, _>(5)?)))
}
