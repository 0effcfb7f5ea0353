//! Decoding the row the claim statement answers: outcome, fingerprint,
//! record, remaining microseconds (read by `crate::sql::claimed`), steps.

use idem_contract::StoreError;
use idem_contract::store::ClaimOutcome;
use sqlx::Row;
use sqlx::postgres::PgRow;

use crate::sql::claimed::{self, Failure};

use super::BACKEND;
use super::steps;

/// Reads the claim statement's row.
pub(super) fn claim_outcome(row: &PgRow) -> Result<ClaimOutcome, StoreError> {
    read(row).map_err(|err| StoreError::new(BACKEND, err))
}

fn read(row: &PgRow) -> Result<ClaimOutcome, Failure> {
    let code: i32 = row.try_get(0)?;
    claimed::outcome(code, row, || Ok(steps::parse(row.try_get(4)?)?))
}
