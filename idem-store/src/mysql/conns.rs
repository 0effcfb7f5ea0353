//! What MySQL's connections (`crate::conns`, reused without a health
//! check) are called in errors, which failures mean a connection itself
//! is gone, and the limits the store's own connections run under.
//!
//! The limits: the server gives a statement up when idem does (the
//! response timeout), so that one the caller stopped waiting for (a claim
//! behind a row lock, a slow purge batch) does not run on beside the next
//! and pile up. `innodb_lock_wait_timeout` (whole seconds: the next one
//! above the response timeout, so that idem's own timeout comes first and
//! the server's error, which idem would take for a rollback and resend,
//! never does) bounds a wait for a row lock on MySQL and MariaDB; MariaDB's
//! `max_statement_time` bounds a statement's whole run, in a comment only
//! MariaDB executes (MySQL's `max_execution_time` covers `SELECT` alone).
//! The values are kept in user variables too, so that the end of a
//! handler's transaction, which runs free of them, restores them in a
//! statement of its own that knows no settings.

use std::time::Duration;

use sqlx::Executor;
use sqlx::mysql::{MySqlConnection, MySqlDatabaseError};

use crate::conns::Init;

/// Sets the server's defaults for the session's limits: for statements
/// that are the caller's to bound (a handler's transaction) or may take
/// long (a migration).
macro_rules! lifted {
    () => {
        "SET SESSION innodb_lock_wait_timeout = DEFAULT \
         /*M!100108 , SESSION max_statement_time = DEFAULT */"
    };
}

/// Sets the limits `limits` stored in the session's user variables.
macro_rules! restored {
    () => {
        "SET SESSION innodb_lock_wait_timeout = @idem_lock_wait \
         /*M!100108 , SESSION max_statement_time = @idem_statement_time */"
    };
}

/// Begins a handler's transaction free of the store's limits.
pub(super) const BEGIN_FOR_HANDLER: &str = concat!(lifted!(), "; BEGIN");
/// Ends it, the limits restored first (`SET` does not end a transaction).
pub(super) const COMMIT_FOR_HANDLER: &str = concat!(restored!(), "; COMMIT");
pub(super) const ROLLBACK_FOR_HANDLER: &str = concat!(restored!(), "; ROLLBACK");
/// Frees a migration's connection (closed after it) of the limits.
pub(super) const FOR_MIGRATION: &str = lifted!();

/// Sets a new connection's limits from `response_timeout`.
pub(super) fn limits(response_timeout: Duration) -> Init<MySqlConnection> {
    // The servers' maxima: 2^30 s for the lock wait, a year for a statement.
    let secs = response_timeout.as_secs_f64().min(31_536_000.0);
    let lock_wait = (secs.floor() as u64 + 1).min(1 << 30);
    let text = format!(
        "SET @idem_lock_wait = {lock_wait}, @idem_statement_time = {secs:.6}, \
         SESSION innodb_lock_wait_timeout = {lock_wait} \
         /*M!100108 , SESSION max_statement_time = {secs:.6} */"
    );
    Box::new(move |conn| {
        let text = text.clone();
        Box::pin(async move { conn.execute(sqlx::raw_sql(&text)).await.map(drop) })
    })
}

/// The names `Conns` gives MySQL in its errors.
pub(super) const NAMES: (&str, &str) = ("mysql", "MySQL");

/// Whether `err` says the connection itself is gone (rather than the
/// statement failing), so that sending the step again on a new connection
/// may succeed.
pub(super) fn lost_connection(err: &sqlx::Error) -> bool {
    match err {
        sqlx::Error::Io(_) | sqlx::Error::Protocol(_) | sqlx::Error::Tls(_) => true,
        sqlx::Error::Database(db) => {
            // SQLSTATE 08: connection exception. 1053 server shutdown,
            // 1927 connection killed (MariaDB), 4031 idle session closed
            // by the server (MySQL 8).
            db.code().is_some_and(|code| code.starts_with("08"))
                || db
                    .try_downcast_ref::<MySqlDatabaseError>()
                    .is_some_and(|db| matches!(db.number(), 1053 | 1927 | 4031))
        }
        _ => false,
    }
}

/// Whether `err` says MySQL rolled the statement back: 1213 deadlock
/// (its transaction rolled back), 1205 lock wait timeout (the statement;
/// the connection, closed after any failure, takes the rest with it).
pub(super) fn rolled_back(err: &sqlx::Error) -> bool {
    err.as_database_error()
        .and_then(|db| db.try_downcast_ref::<MySqlDatabaseError>())
        .is_some_and(|db| matches!(db.number(), 1213 | 1205))
}
