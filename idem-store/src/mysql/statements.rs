//! The statements of `MySqlStore`, rendered once per table, and the
//! queries that bind their parameters.
//!
//! Expiry is judged by the server: `UTC_TIMESTAMP(6)` is the start of the
//! current statement (inside the claim procedure, of each of its
//! statements), in UTC whatever the session's `time_zone`, and the times
//! are `DATETIME(6)` columns, which neither convert nor end in 2038. Every
//! value is bound (`?`); MySQL numbers parameters by position, so a value
//! used twice is bound twice.

use idem_contract::StoreError;
use idem_contract::store::LAPSED_CLAIM_KEPT;

use super::{BACKEND, NOW};
use crate::sql::claimed::COMPLETED;

impl super::MySqlStore {
    /// The statements of this store's table, for the transactional mode.
    pub(super) fn statements(&self) -> &Sql {
        &self.inner.sql
    }
}

/// Where the records live and the statements that use them.
#[derive(Debug)]
pub(super) struct Sql {
    /// `` `table` ``, or `` `database`.`table` ``.
    pub table: String,
    /// The database and table as given (no database: the connection's).
    pub database_name: Option<String>,
    pub table_name: String,
    /// The quoted names of the migrations table, the claim procedures
    /// (migrations 0003's and 0004's, which replicas of earlier releases
    /// call, and 0005's, which this one calls) and the two indexes, and the bare
    /// table name for the migration's lock.
    pub versions: String,
    pub procedure: String,
    pub procedure_v4: String,
    pub procedure_v5: String,
    pub index: String,
    pub steps_index: String,
    pub lock_name: String,
    pub claim: String,
    /// A completed, unexpired row, answered as the claim procedure's
    /// first read answers it.
    pub completed: String,
    pub complete: String,
    pub complete_again: String,
    pub release: String,
    pub renew: String,
    /// Complete and release in transactional mode: the row is locked by
    /// the caller's transaction, so the token alone fences.
    pub complete_locked: String,
    pub release_locked: String,
    pub purge: String,
    /// Drops the value of records past their TTL whose tombstone stands.
    pub compact: String,
    /// Whether anyone holds or completed a key: asked only after a fenced
    /// operation found no claim of ours, to tell a takeover from an expiry.
    pub live: String,
    pub steps: super::steps::StepsSql,
    /// Deletes the record under a key and its steps, whoever holds it.
    pub forget: String,
}

/// What a completion sets besides the record: its expiry and its
/// tombstone's end (NULL for none), each bound as microseconds from now.
const COMPLETED_UNTIL: &str = "expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, \
     tombstone_until = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND";

/// A row whose tombstone, if any, has passed.
const NO_TOMBSTONE: &str = "(tombstone_until IS NULL OR tombstone_until <= UTC_TIMESTAMP(6))";

/// The fence shared by complete, release and renew: the row is our
/// unexpired claim. Binds the key, then the token.
const HELD: &str = "`key` = ? AND token = ? AND record IS NULL AND expires_at > UTC_TIMESTAMP(6)";

impl Sql {
    pub(super) fn new(database: Option<&str>, table: &str) -> Result<Self, StoreError> {
        if let Some(database) = database {
            crate::sql::check_identifier(BACKEND, "database", database, 64)?;
        }
        // Room for the suffixes of the procedure, indexes and tables.
        crate::sql::check_identifier(BACKEND, "table", table, 64 - "_migrations".len())?;
        let name = |suffix: &str| match database {
            Some(db) => format!("`{db}`.`{table}{suffix}`"),
            None => format!("`{table}{suffix}`"),
        };
        let t = name("");
        let steps = super::steps::StepsSql::new(&name("_steps"), &t);
        Ok(Sql {
            database_name: database.map(str::to_owned),
            table_name: table.to_owned(),
            versions: name("_migrations"),
            procedure: name("_claim"),
            procedure_v4: name("_claim_v4"),
            procedure_v5: name("_claim_v5"),
            index: format!("`{table}_expires_at`"),
            steps_index: format!("`{table}_steps_exp`"),
            lock_name: format!("idem migrate {}.{table}", database.unwrap_or("")),
            claim: format!("CALL {}(?, ?, ?, ?, ?, ?, ?)", name("_claim_v5")),
            // Time left as the procedure reads it (see its migration).
            completed: format!(
                "SELECT {COMPLETED}, fingerprint, record, \
                 TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) - TIMESTAMPDIFF(MICROSECOND, NOW(6), SYSDATE(6)) \
                 FROM {t} WHERE `key` = ? AND record IS NOT NULL AND expires_at > {NOW}"
            ),
            complete: format!("UPDATE {t} SET record = ?, {COMPLETED_UNTIL} WHERE {HELD}"),
            // Sent again after a lost connection: the first one may have
            // landed, and then the row holds our token and these bytes.
            complete_again: format!(
                "UPDATE {t} SET record = ?, {COMPLETED_UNTIL} \
                 WHERE `key` = ? AND token = ? AND (record IS NULL AND expires_at > {NOW} OR record = ?)"
            ),
            release: format!("DELETE FROM {t} WHERE {HELD}"),
            complete_locked: format!(
                "UPDATE {t} SET record = ?, {COMPLETED_UNTIL} \
                 WHERE `key` = ? AND token = ? AND record IS NULL"
            ),
            release_locked: format!(
                "DELETE FROM {t} WHERE `key` = ? AND token = ? AND record IS NULL"
            ),
            renew: format!(
                "UPDATE {t} SET expires_at = {NOW} + INTERVAL ? MICROSECOND WHERE {HELD}"
            ),
            live: format!(
                "SELECT COUNT(*) FROM {t} WHERE `key` = ? AND (expires_at > {NOW} OR tombstone_until > {NOW})"
            ),
            // A lapsed claim stays a day past its lease (`LAPSED_CLAIM_KEPT`):
            // the evidence a takeover and its reconcile need.
            purge: format!(
                "DELETE FROM {t} WHERE expires_at <= {NOW} AND {NO_TOMBSTONE} \
                 AND (record IS NOT NULL OR expires_at <= {NOW} - INTERVAL {} SECOND) \
                 ORDER BY expires_at LIMIT ?",
                LAPSED_CLAIM_KEPT.as_secs()
            ),
            compact: format!(
                "UPDATE {t} SET record = '' WHERE expires_at <= {NOW} AND tombstone_until > {NOW} \
                 AND LENGTH(record) > 0 ORDER BY expires_at LIMIT ?"
            ),
            // The call's steps go with it: a forgotten call must not resume.
            forget: format!(
                "DELETE r, s FROM (SELECT ? AS k) AS x LEFT JOIN {t} AS r ON r.`key` = x.k \
                 LEFT JOIN {} AS s ON s.`call` = x.k",
                steps.table
            ),
            steps,
            table: t,
        })
    }
}
