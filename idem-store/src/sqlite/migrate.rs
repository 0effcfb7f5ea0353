//! The SQLite schema's versions. Step 1 is the table as first released
//! (created if missing, idempotent); each later step runs once, in order,
//! under SQLite's write lock, so processes opening one file at once
//! upgrade it one after the other. Never edit a released step; add one.

use sqlx::SqlitePool;

use super::MIGRATE;

/// The steps after 1, in order: step `i` is version `i + 2`.
const STEPS: &[&str] = &[
    // 2: the call site's name and the claim's creation time, so records
    // can be listed (`idem list`) without the raw key.
    concat!(
        "ALTER TABLE idem_records ADD COLUMN site TEXT;",
        "ALTER TABLE idem_records ADD COLUMN created_at INTEGER;",
        "CREATE INDEX IF NOT EXISTS idem_records_created_at ON idem_records (created_at);",
    ),
    // 3: the steps of calls (recovery points).
    super::steps::MIGRATE,
    // 4: the end of a completed record's tombstone (ms since the epoch),
    // NULL for none.
    "ALTER TABLE idem_records ADD COLUMN tombstone_until INTEGER;",
];

pub(super) async fn migrate(pool: &SqlitePool) -> Result<(), sqlx::Error> {
    sqlx::raw_sql(MIGRATE).execute(pool).await?;
    // `BEGIN IMMEDIATE` takes the write lock at once, so the version read
    // below cannot go stale before the steps run.
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
    let done: i64 = sqlx::query_scalar("SELECT coalesce(max(version), 0) FROM idem_migrations")
        .fetch_one(&mut *tx)
        .await?;
    for (version, step) in (2..).zip(STEPS) {
        if version <= done {
            continue;
        }
        sqlx::raw_sql(step).execute(&mut *tx).await?;
        sqlx::query(concat!(
            "INSERT INTO idem_migrations (version, applied_at) VALUES (?1, ",
            crate::sqlite::now_ms!(),
            ")"
        ))
        .bind(version)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await
}

/// This release's schema version.
pub(super) const CURRENT: i64 = STEPS.len() as i64 + 1;

/// Checks, changing nothing, that the file holds idem's tables at this
/// release's version; why not, in words for an operator.
pub(super) async fn check(pool: &SqlitePool) -> Result<(), String> {
    let tables: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('idem_migrations', 'idem_records')",
    )
    .fetch_one(pool)
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
        .fetch_one(pool)
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
