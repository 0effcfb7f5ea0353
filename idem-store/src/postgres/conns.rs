//! What PostgreSQL's connections (`crate::conns`, reused without a health
//! check) are called in errors, and which failures mean a connection
//! itself is gone.

/// The names `Conns` gives PostgreSQL in its errors.
pub(super) const NAMES: (&str, &str) = ("postgres", "PostgreSQL");

/// Whether `err` says the connection itself is gone (rather than the
/// statement failing), so that sending the step again on a new connection
/// may succeed.
pub(super) fn lost_connection(err: &sqlx::Error) -> bool {
    match err {
        sqlx::Error::Io(_) | sqlx::Error::Protocol(_) | sqlx::Error::Tls(_) => true,
        sqlx::Error::Database(db) => db.code().is_some_and(|code| {
            // 08: connection exception; 57P01..57P03: admin or crash
            // shutdown, cannot connect now.
            code.starts_with("08") || matches!(&*code, "57P01" | "57P02" | "57P03")
        }),
        _ => false,
    }
}

/// Whether `err` says PostgreSQL rolled the statement back: 40001
/// serialization failure, 40P01 deadlock detected.
pub(super) fn rolled_back(err: &sqlx::Error) -> bool {
    err.as_database_error()
        .and_then(|db| db.code())
        .is_some_and(|code| matches!(&*code, "40001" | "40P01"))
}
