//! The versioned migrations of a `PostgresStore`'s table, and the run that
//! applies the missing ones.
//!
//! Each migration is a SQL file under `migrations/`, numbered in the order
//! it runs. `{t}` is the quoted, schema-qualified table, `{claim}` its
//! claim function (`{claim_v4}` the one that tries a plain insert first),
//! `{index}` the bare name of its expiry index, and
//! `{steps}`, `{steps_of}`, `{steps_index}` the steps table, its reading
//! function and its expiry index. Each runs once, inside the migration's
//! transaction; never edit a released file, add one.

use sqlx::Acquire;
use sqlx::postgres::PgConnection;

use super::statements::Sql;

/// The migrations, in order; a migration's number is its place here.
/// 1: the records (with the call site, the claim's time and the
/// tombstone's end), the claim function, and the steps; 2: a lapsed claim
/// is taken over only by a call of its payload; 3: a claim that reruns
/// (`Claim::rerun`) replaces a completed record of another payload; 4: the
/// claim's fast path for a key no row holds, with the steps in its answer.
const MIGRATIONS: &[&str] = &[
    include_str!("migrations/0001_records.sql"),
    include_str!("migrations/0002_lapsed_claims.sql"),
    include_str!("migrations/0003_rerun.sql"),
    include_str!("migrations/0004_claim_fast_path.sql"),
];

/// This release's schema version.
pub(super) const CURRENT: i32 = MIGRATIONS.len() as i32;

/// Applies the migrations `conn`'s database lacks, in one transaction
/// under an advisory lock, so concurrent runs take turns; a table at a
/// version this release does not know is refused, unchanged.
pub(super) async fn run(sql: &Sql, conn: &mut PgConnection) -> Result<(), sqlx::Error> {
    let mut tx = conn.begin().await?;
    // A migration waits for the lock and may rewrite a large table: not
    // bound by the store's `statement_timeout`.
    sqlx::query("SET LOCAL statement_timeout = 0")
        .execute(&mut *tx)
        .await?;
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
    if done > CURRENT {
        return Err(crate::sql::schema::unknown_version(
            &sql.table,
            &sql.versions,
            i64::from(done),
            i64::from(CURRENT),
        ));
    }
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
            "{claim_v4}",
            &format!("\"{}\".\"{}_claim_v4\"", sql.schema_name, sql.table_name),
        )
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
