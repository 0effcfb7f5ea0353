//! The finished steps of calls (`idem::step`), in a table beside the
//! records (`<table>_steps`): a release deletes the record row, not its
//! steps. The claim statement returns them with a won claim.

use bytes::Bytes;
use idem_contract::StoreError;
use idem_contract::store::StepId;

/// The statements of steps, rendered once per table.
#[derive(Debug)]
pub(super) struct StepsSql {
    /// `"schema"."table_steps"`.
    pub table: String,
    /// `"schema"."table_steps_of"`.
    pub function: String,
    pub save: String,
    pub purge: String,
}

impl StepsSql {
    pub(super) fn new(schema: &str, table: &str, records: &str, held: &str) -> Self {
        let steps = format!("\"{schema}\".\"{table}_steps\"");
        StepsSql {
            function: format!("\"{schema}\".\"{table}_steps_of\""),
            // The record row is locked for share, so a takeover's write
            // waits for this save to commit (and then reads the step), or
            // this save waits for the takeover and finds the token changed.
            save: format!(
                "INSERT INTO {steps} AS s (call, step, value, expires_at) \
                 SELECT $1, $3, $4, statement_timestamp() + $5 * interval '1 microsecond' \
                 FROM {records} WHERE {held} FOR SHARE \
                 ON CONFLICT (call, step) DO UPDATE SET value = EXCLUDED.value, expires_at = EXCLUDED.expires_at"
            ),
            purge: format!(
                "DELETE FROM {steps} WHERE (call, step) IN (SELECT call, step FROM {steps} \
                 WHERE expires_at <= statement_timestamp() LIMIT $1 FOR UPDATE SKIP LOCKED)"
            ),
            table: steps,
        }
    }
}

/// The steps column of a claim's row: `step id || value` per step.
pub(super) fn parse(cells: Option<Vec<Vec<u8>>>) -> Result<Vec<(StepId, Bytes)>, StoreError> {
    cells
        .unwrap_or_default()
        .into_iter()
        .map(|cell| {
            let id = cell
                .get(..16)
                .and_then(|id| <[u8; 16]>::try_from(id).ok())
                .ok_or_else(|| StoreError::new(super::BACKEND, "a stored step is cut short"))?;
            let mut value = Bytes::from(cell);
            Ok((StepId::from_bytes(id), value.split_off(16)))
        })
        .collect()
}
