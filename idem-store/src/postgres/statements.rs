//! The statements of `PostgresStore`, rendered once per table, and the
//! queries that bind their parameters.
//!
//! Expiry is judged by the server: `statement_timestamp()` is the start of
//! the client's current statement, so it moves on inside a long
//! transaction (unlike `now()`, which stays at the transaction's start) and
//! is one fixed instant within one statement. Time *left* is answered by
//! `clock_timestamp()`, read after the row: a row committed after our
//! statement began was written at a later `statement_timestamp()` than
//! ours, and by ours it would have more than its whole lease left.

use idem_contract::StoreError;
use idem_contract::store::LAPSED_CLAIM_KEPT;

use super::BACKEND;
use crate::sql::claimed::{COMPLETED, IN_PROGRESS};

impl super::PostgresStore {
    /// The statements of this store's table, for the transactional mode.
    pub(super) fn statements(&self) -> &Sql {
        &self.inner.sql
    }
}

/// Where the records live and the statements that use them.
#[derive(Debug)]
pub(super) struct Sql {
    /// `"schema"."table"`.
    pub table: String,
    /// The bare schema and table names, for messages and locks.
    pub schema_name: String,
    pub table_name: String,
    pub versions: String,
    pub claim: String,
    /// A completed, unexpired row, answered as the claim's first read
    /// answers it.
    pub completed: String,
    pub complete: String,
    pub complete_again: String,
    pub release: String,
    pub renew: String,
    /// Complete and release in transactional mode: the row is locked by
    /// the caller's transaction, so the token alone fences (the lease
    /// cannot run out from under it).
    pub complete_locked: String,
    pub release_locked: String,
    pub purge: String,
    /// Drops the value of records past their TTL whose tombstone stands.
    pub compact: String,
    /// Whether anyone holds or completed a key: asked only after a fenced
    /// operation found no claim of ours, to tell a takeover from an expiry.
    pub live: String,
    pub steps: super::steps::StepsSql,
    /// Deletes the record under a key, whoever holds it.
    pub forget: String,
}

/// A row whose tombstone, if any, has passed.
const NO_TOMBSTONE: &str = "(tombstone_until IS NULL OR tombstone_until <= statement_timestamp())";

/// The fence shared by complete, release and renew: the row is our
/// unexpired claim.
/// What a completion sets besides the record: its expiry (`$4` µs from
/// now) and its tombstone's end (`$5` µs from now; NULL for none).
const COMPLETED_UNTIL: &str = "expires_at = statement_timestamp() + $4 * interval '1 microsecond', \
     tombstone_until = statement_timestamp() + $5 * interval '1 microsecond'";

/// The claim's answer columns after its outcome, read from the row `r`:
/// fingerprint, record, and the time left in microseconds.
const FOUND: &str = "r.fingerprint, r.record, \
     floor(extract(epoch FROM r.expires_at - clock_timestamp()) * 1000000)::bigint";

/// The row `r` of key `$1`, unexpired.
const LIVE_ROW: &str = "r.key = $1 AND r.expires_at > statement_timestamp()";

const HELD: &str =
    "key = $1 AND token = $2 AND record IS NULL AND expires_at > statement_timestamp()";

impl Sql {
    pub(super) fn new(schema: &str, table: &str) -> Result<Self, StoreError> {
        crate::sql::check_identifier(BACKEND, "schema", schema, 63)?;
        // Room for the suffixes of the function, index and version table.
        crate::sql::check_identifier(BACKEND, "table", table, 63 - "_migrations".len())?;
        let t = format!("\"{schema}\".\"{table}\"");
        Ok(Sql {
            versions: format!("\"{schema}\".\"{table}_migrations\""),
            // A plain read first, so a replayed duplicate (or one in
            // progress elsewhere) costs an index lookup rather than a
            // PL/pgSQL call: it returns what the function's first read
            // would, and `LIMIT 1` stops the `Append` before the function
            // runs. Only when it finds nothing does the function claim.
            // The time left is by `clock_timestamp()`, read after the
            // row: the row's writer may have begun its statement after
            // ours did, so `statement_timestamp()` could answer more than
            // the writer's whole lease (issue 37). A claim that reruns
            // (`$6`) passes a completed row of another payload on to the
            // function, which replaces it. The function answers a won
            // key's steps too (migration 0004).
            claim: format!(
                "SELECT CASE WHEN r.record IS NULL THEN {IN_PROGRESS} ELSE {COMPLETED} END, {FOUND}, NULL::bytea[] \
                 FROM {t} AS r WHERE {LIVE_ROW} \
                 AND (r.record IS NULL AND r.token <> $2 OR r.record IS NOT NULL AND NOT ($6 AND r.fingerprint <> $3)) \
                 UNION ALL \
                 SELECT * FROM \"{schema}\".\"{table}_claim_v4\"($1, $2, $3, $4, $5, $6) \
                 LIMIT 1"
            ),
            completed: format!(
                "SELECT {COMPLETED}, {FOUND} FROM {t} AS r WHERE {LIVE_ROW} AND r.record IS NOT NULL"
            ),
            complete: format!("UPDATE {t} SET record = $3, {COMPLETED_UNTIL} WHERE {HELD}"),
            // Sent again after a lost connection: the first one may have
            // landed, and then the row holds our token and these bytes.
            complete_again: format!(
                "UPDATE {t} SET record = $3, {COMPLETED_UNTIL} \
                 WHERE key = $1 AND token = $2 AND (record IS NULL AND expires_at > statement_timestamp() OR record = $3)"
            ),
            release: format!("DELETE FROM {t} WHERE {HELD}"),
            complete_locked: format!(
                "UPDATE {t} SET record = $3, {COMPLETED_UNTIL} \
                 WHERE key = $1 AND token = $2 AND record IS NULL"
            ),
            release_locked: format!(
                "DELETE FROM {t} WHERE key = $1 AND token = $2 AND record IS NULL"
            ),
            renew: format!(
                "UPDATE {t} SET expires_at = statement_timestamp() + $3 * interval '1 microsecond' WHERE {HELD}"
            ),
            live: format!(
                "SELECT EXISTS (SELECT 1 FROM {t} WHERE key = $1 AND (expires_at > statement_timestamp() \
                 OR tombstone_until > statement_timestamp()))"
            ),
            // A lapsed claim stays a day past its lease (`LAPSED_CLAIM_KEPT`):
            // the evidence a takeover and its reconcile need.
            purge: format!(
                "DELETE FROM {t} WHERE key IN (SELECT key FROM {t} WHERE expires_at <= statement_timestamp() \
                 AND {NO_TOMBSTONE} AND {lapsed} ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED) \
                 AND expires_at <= statement_timestamp() AND {NO_TOMBSTONE} AND {lapsed}",
                lapsed = format_args!(
                    "(record IS NOT NULL OR expires_at <= statement_timestamp() - interval '{} seconds')",
                    LAPSED_CLAIM_KEPT.as_secs()
                ),
            ),
            compact: format!(
                "UPDATE {t} SET record = ''::bytea WHERE key IN (SELECT key FROM {t} WHERE expires_at <= statement_timestamp() \
                 AND tombstone_until > statement_timestamp() AND length(record) > 0 \
                 ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED) AND expires_at <= statement_timestamp() AND length(record) > 0"
            ),
            steps: super::steps::StepsSql::new(schema, table, &t, HELD),
            // The call's steps go with it: a forgotten call must not resume.
            forget: format!(
                "WITH s AS (DELETE FROM \"{schema}\".\"{table}_steps\" WHERE call = $1) DELETE FROM {t} WHERE key = $1"
            ),
            table: t,
            schema_name: schema.to_owned(),
            table_name: table.to_owned(),
        })
    }
}
