//! Reading a claim's answer, whatever the database: the claim statement
//! (PostgreSQL's function, MySQL's procedure) answers its outcome as a
//! code, then the fingerprint, record and time left in the columns these
//! functions read.

use std::time::Duration;

use bytes::Bytes;
use idem_contract::fingerprint::Fingerprint;
use idem_contract::store::{ClaimOutcome, StepId};
use sqlx::{ColumnIndex, Decode, Row, Type};

/// Claim outcomes as the claim statement reports them.
pub(crate) const WON: i32 = 0;
pub(crate) const TOOK_OVER: i32 = 1;
pub(crate) const IN_PROGRESS: i32 = 2;
pub(crate) const COMPLETED: i32 = 3;
pub(crate) const EXPIRED: i32 = 4;

/// Why an answer could not be read.
pub(crate) type Failure = Box<dyn std::error::Error + Send + Sync>;

/// The outcome `code` answers, read from `row`: fingerprint (column 1),
/// record (2), microseconds left (3); `steps` are read for a won claim
/// only.
pub(crate) fn outcome<'r, R>(
    code: i32,
    row: &'r R,
    steps: impl FnOnce() -> Result<Vec<(StepId, Bytes)>, Failure>,
) -> Result<ClaimOutcome, Failure>
where
    R: Row,
    usize: ColumnIndex<R>,
    &'r [u8]: Decode<'r, R::Database> + Type<R::Database>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
{
    Ok(match code {
        WON | TOOK_OVER => ClaimOutcome::won(code == TOOK_OVER, steps()?),
        IN_PROGRESS => ClaimOutcome::in_progress(fingerprint(row)?, remaining(row)?),
        COMPLETED => ClaimOutcome::completed(
            fingerprint(row)?,
            Bytes::copy_from_slice(row.try_get::<&[u8], _>(2)?),
            remaining(row)?,
        ),
        EXPIRED => ClaimOutcome::expired(fingerprint(row)?, remaining(row)?),
        other => return Err(format!("unknown claim outcome {other}").into()),
    })
}

/// The completed record the completed read answered, in its first row
/// (columns as the claim's), if it found one.
pub(crate) fn completed<'r, R>(row: Option<&'r R>) -> Result<Option<ClaimOutcome>, Failure>
where
    R: Row,
    usize: ColumnIndex<R>,
    &'r [u8]: Decode<'r, R::Database> + Type<R::Database>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
{
    row.map(|row| outcome(COMPLETED, row, || Ok(Vec::new())))
        .transpose()
}

/// The time left (or, for a tombstone, since the record's TTL ran out).
fn remaining<'r, R>(row: &'r R) -> Result<Duration, sqlx::Error>
where
    R: Row,
    usize: ColumnIndex<R>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
{
    let us: i64 = row.try_get(3)?;
    Ok(Duration::from_micros(us.max(0) as u64))
}

fn fingerprint<'r, R>(row: &'r R) -> Result<Fingerprint, Failure>
where
    R: Row,
    usize: ColumnIndex<R>,
    &'r [u8]: Decode<'r, R::Database> + Type<R::Database>,
{
    let bytes: &[u8] = row.try_get(1)?;
    let bytes: [u8; 32] = bytes
        .try_into()
        .map_err(|_| "a stored fingerprint is not 32 bytes")?;
    Ok(Fingerprint::from_bytes(bytes))
}
