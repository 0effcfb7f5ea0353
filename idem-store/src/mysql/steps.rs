//! The finished steps of calls (`idem::step`), in a table beside the
//! records (`<table>_steps`): a release deletes the record row, not its
//! steps. The claim procedure returns them with a won claim, one row each.

use idem_contract::store::StepId;

use super::NOW;

/// The statements of steps, rendered once per table.
#[derive(Debug)]
pub(super) struct StepsSql {
    /// `` `table_steps` `` (database-qualified if the records are).
    pub table: String,
    pub save: String,
    pub purge: String,
}

impl StepsSql {
    pub(super) fn new(steps: &str, records: &str) -> Self {
        StepsSql {
            // The record row is read with a shared lock, so a takeover's
            // claim waits for this save to commit (and then reads the
            // step), or this save waits for the takeover and finds the
            // token changed.
            save: format!(
                "INSERT INTO {steps} (`call`, step, value, expires_at) \
                 SELECT r.`key`, ?, ?, {NOW} + INTERVAL ? MICROSECOND FROM {records} AS r \
                 WHERE r.`key` = ? AND r.token = ? AND r.record IS NULL AND r.expires_at > {NOW} \
                 LOCK IN SHARE MODE \
                 ON DUPLICATE KEY UPDATE value = ?, expires_at = {NOW} + INTERVAL ? MICROSECOND"
            ),
            purge: format!(
                "DELETE FROM {steps} WHERE expires_at <= {NOW} ORDER BY expires_at LIMIT ?"
            ),
            table: steps.to_owned(),
        }
    }
}

/// A step id from its stored bytes.
pub(super) fn step_id(bytes: &[u8]) -> Option<StepId> {
    <[u8; 16]>::try_from(bytes).ok().map(StepId::from_bytes)
}
