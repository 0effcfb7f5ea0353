//! The SQLite schema's versions. 0.1 is released with one: the records
//! (with the call site, the claim's time and the tombstone's end) and the
//! steps of calls, created if missing. A later release adds steps that run
//! once each, in order, under SQLite's write lock, so processes opening
//! one file at once upgrade it one after the other. Never edit a released
//! step; add one.

use sqlx::{Connection, SqliteConnection};

use super::MIGRATE;

pub(super) async fn migrate(conn: &mut SqliteConnection) -> Result<(), sqlx::Error> {
    // `BEGIN IMMEDIATE` takes the write lock at once, so the version read
    // below cannot go stale before the tables are made.
    let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
    sqlx::raw_sql(MIGRATE).execute(&mut *tx).await?;
    sqlx::raw_sql(super::steps::MIGRATE)
        .execute(&mut *tx)
        .await?;
    let done: i64 = sqlx::query_scalar("SELECT coalesce(max(version), 0) FROM idem_migrations")
        .fetch_one(&mut *tx)
        .await?;
    if done != CURRENT {
        return Err(sqlx::Error::Configuration(
            format!(
                "idem's tables are at schema version {done}, which this release of idem does not know (it reads {CURRENT}): \
                 the file was written by a later release, or by a build before 0.1; use that release, or move the file aside"
            )
            .into(),
        ));
    }
    tx.commit().await
}

/// This release's schema version.
pub(super) const CURRENT: i64 = 1;

/// Checks, changing nothing, that the file holds idem's tables at this
/// release's version; why not, in words for an operator.
pub(super) async fn check(conn: &mut SqliteConnection) -> Result<(), String> {
    let tables: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('idem_migrations', 'idem_records')",
    )
    .fetch_one(&mut *conn)
    .await
    .map_err(|err| err.to_string())?;
    if tables != 2 {
        return Err(
            "not a file of idem's records: it has no idem_records and idem_migrations tables \
             (left unchanged; open it with `SqliteStore::open` to create them)"
                .to_owned(),
        );
    }
    let version: i64 = sqlx::query_scalar("SELECT coalesce(max(version), 0) FROM idem_migrations")
        .fetch_one(&mut *conn)
        .await
        .map_err(|err| err.to_string())?;
    match version.cmp(&CURRENT) {
        std::cmp::Ordering::Equal => Ok(()),
        std::cmp::Ordering::Less => Err(format!(
            "idem's tables are at schema version {version}, this release reads {CURRENT} \
             (left unchanged; `SqliteStore::open` upgrades them)"
        )),
        std::cmp::Ordering::Greater => Err(format!(
            "idem's tables are at schema version {version}, newer than this release's {CURRENT}: \
             use the release that wrote them"
        )),
    }
}
