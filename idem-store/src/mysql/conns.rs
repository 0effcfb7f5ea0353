//! What MySQL's connections (`crate::conns`, reused without a health
//! check) are called in errors, and which failures mean a connection
//! itself is gone.

use sqlx::mysql::MySqlDatabaseError;

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
