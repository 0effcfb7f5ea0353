//! The versioned migrations of a `PostgresStore`'s table, and the run that
//! applies the missing ones.
//!
//! Each migration is a SQL file under `migrations/`, numbered in the order
//! it runs. `{t}` is the quoted, schema-qualified table, `{claim}` its
//! claim function, `{index}` the bare name of its expiry index, and
//! `{steps}`, `{steps_of}`, `{steps_index}` the steps table, its reading
//! function and its expiry index. Each runs once, inside the migration's
//! transaction; never edit a released file, add one.

use sqlx::Acquire;
use sqlx::postgres::PgConnection;

use super::statements::Sql;

/// The migrations, in order; a migration's number is its place here.
const MIGRATIONS: &[&str] = &[
    // 1: the records and the claim function.
    include_str!("migrations/0001_records.sql"),
    // 2: the steps of calls (recovery points), and the function the claim
    // statement calls to read a won key's steps. A PL/pgSQL function,
    // never inlined, so its read takes a snapshot after the claim
    // function's write: a step whose save held the record row
    // (`FOR SHARE`) while the claim waited on it is seen.
    include_str!("migrations/0002_steps.sql"),
    // 3: the call site's name and the claim's creation time, so records
    // can be listed (`idem list`) without the raw key; the claim function
    // gains the site as a fifth argument. The four-argument function
    // stays, so replicas still running the previous release keep working
    // during a rolling deploy (their claims list with no site or age).
    include_str!("migrations/0003_site.sql"),
    // 4: the claim function answers the time left by `clock_timestamp()`,
    // read after the row, instead of its statement's start: a row written
    // by a statement that began after ours (we waited on its lock) read
    // more than a whole lease left (issue 37).
    include_str!("migrations/0004_remaining.sql"),
    // 5: tombstones: the end of a completed record's tombstone, and the
    // claim function answers "expired" (outcome 4) for a record past its
    // TTL whose tombstone stands, instead of claiming it.
    include_str!("migrations/0005_tombstone.sql"),
];

/// Applies the migrations `conn`'s database lacks, in one transaction
/// under an advisory lock, so concurrent runs take turns.
/// This release's schema version.
pub(super) const CURRENT: i32 = MIGRATIONS.len() as i32;

pub(super) async fn run(sql: &Sql, conn: &mut PgConnection) -> Result<(), sqlx::Error> {
    let mut tx = conn.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
        .bind(format!("idem migrate {}", sql.table))
        .execute(&mut *tx)
        .await?;
    sqlx::raw_sql(&format!(
        "CREATE SCHEMA IF NOT EXISTS \"{}\"; \
         CREATE TABLE IF NOT EXISTS {} (version int PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())",
        sql.schema_name, sql.versions
    ))
    .execute(&mut *tx)
    .await?;
    let done: i32 = sqlx::query_scalar(&format!(
        "SELECT coalesce(max(version), 0) FROM {}",
        sql.versions
    ))
    .fetch_one(&mut *tx)
    .await?;
    for (version, step) in (1..).zip(MIGRATIONS) {
        if version <= done {
            continue;
        }
        sqlx::raw_sql(&render(sql, step)).execute(&mut *tx).await?;
        sqlx::query(&format!(
            "INSERT INTO {} (version) VALUES ($1)",
            sql.versions
        ))
        .bind(version)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await
}

/// Migration `step` with this table's names filled in.
fn render(sql: &Sql, step: &str) -> String {
    step.replace("{t}", &sql.table)
        .replace(
            "{claim}",
            &format!("\"{}\".\"{}_claim\"", sql.schema_name, sql.table_name),
        )
        .replace("{index}", &format!("\"{}_expires_at\"", sql.table_name))
        .replace("{steps_of}", &sql.steps.function)
        .replace(
            "{steps_index}",
            &format!("\"{}_steps_exp\"", sql.table_name),
        )
        .replace("{steps}", &sql.steps.table)
}
