//! The finished steps of calls (`idem::step`), in their own table beside
//! the records: a release deletes the record row, not its steps.

use bytes::Bytes;
use idem_contract::StoreError;
use idem_contract::key::RecordKey;
use idem_contract::store::StepId;
use sqlx::Row;
use sqlx::sqlite::SqliteRow;

use crate::answer::Affected;

use super::statements::held;
use super::{SqliteStore, err, millis};

pub(super) const MIGRATE: &str = concat!(
    "CREATE TABLE IF NOT EXISTS idem_steps (",
    " call BLOB NOT NULL, step BLOB NOT NULL, value BLOB NOT NULL, expires_at INTEGER NOT NULL,",
    " PRIMARY KEY (call, step)",
    ") WITHOUT ROWID;",
    "CREATE INDEX IF NOT EXISTS idem_steps_expires_at ON idem_steps (expires_at);",
);

/// Saves a step if the call's claim is still ours: one statement, so the
/// fence and the write are one atomic step.
const SAVE: &str = concat!(
    "INSERT INTO idem_steps (call, step, value, expires_at) SELECT ?1, ?3, ?4, ",
    now_ms!(),
    " + ?5 FROM idem_records",
    held!(),
    " ON CONFLICT (call, step) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at"
);

const LOAD: &str = concat!(
    "SELECT step, value FROM idem_steps WHERE call = ?1 AND expires_at > ",
    now_ms!()
);

pub(super) const PURGE: &str = concat!(
    "DELETE FROM idem_steps WHERE (call, step) IN (SELECT call, step FROM idem_steps WHERE expires_at <= ",
    now_ms!(),
    " LIMIT ?1)"
);

pub(super) async fn save(
    store: &SqliteStore,
    key: &RecordKey,
    token: idem_contract::store::Token,
    step: StepId,
    value: &[u8],
    ttl: std::time::Duration,
) -> Result<u64, StoreError> {
    let token = token.to_bytes();
    let Affected(saved) = store
        .send(
            sqlx::query(SAVE)
                .bind(&key.as_bytes()[..])
                .bind(&token[..])
                .bind(&step.as_bytes()[..])
                .bind(value)
                .bind(millis(ttl)),
        )
        .await?;
    Ok(saved)
}

pub(super) async fn load(
    store: &SqliteStore,
    key: &RecordKey,
) -> Result<Vec<(StepId, Bytes)>, StoreError> {
    let rows: Vec<SqliteRow> = store
        .send(sqlx::query(LOAD).bind(&key.as_bytes()[..]))
        .await?;
    rows.into_iter()
        .map(|row| {
            let id: Vec<u8> = row.try_get(0).map_err(err)?;
            let id: [u8; 16] = id
                .try_into()
                .map_err(|_| StoreError::new(super::BACKEND, "a stored step id is not 16 bytes"))?;
            let value: Vec<u8> = row.try_get(1).map_err(err)?;
            Ok((StepId::from_bytes(id), Bytes::from(value)))
        })
        .collect()
}
