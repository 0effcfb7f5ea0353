//! The versioned migrations of a `MySqlStore`'s table, and the run that
//! applies the missing ones.
//!
//! Each migration is a SQL file under `migrations/`, numbered in the order
//! it runs, its statements separated by lines holding only `//`. `{t}` is
//! the quoted records table, `{steps}` the steps table, `{claim}` the claim
//! procedure (`{claim_v4}` the one with the fast path for a fresh key,
//! `{claim_v5}` the one whose answer to a claim not won reads no steps),
//! `{index}` and `{steps_index}` the bare names of their expiry
//! indexes. MySQL commits each DDL statement on its own, so a migration is
//! not one transaction: every statement is written to be run again
//! (`IF NOT EXISTS`, `DROP … IF EXISTS` before `CREATE`), and the version
//! is recorded after the last. Never edit a released file; add one.

use sqlx::Row;
use sqlx::mysql::MySqlConnection;

use super::statements::Sql;

/// The migrations, in order; a migration's number is its place here.
/// 1: the records (with the call site, the claim's time and the
/// tombstone's end), the steps and the claim procedure; 2: a lapsed claim
/// is taken over only by a call of its payload; 3: a claim that reruns
/// (`Claim::rerun`) replaces a completed record of another payload; 4: the
/// claim's fast path for a key no row holds; 5: a claim that is not won
/// answers without reading the steps.
const MIGRATIONS: &[&str] = &[
    include_str!("migrations/0001_records.sql"),
    include_str!("migrations/0002_lapsed_claims.sql"),
    include_str!("migrations/0003_rerun.sql"),
    include_str!("migrations/0004_claim_fast_path.sql"),
    include_str!("migrations/0005_claim_answers.sql"),
];

/// This release's schema version.
pub(super) const CURRENT: i64 = MIGRATIONS.len() as i64;

/// How long a run waits for another replica's run to finish, in seconds.
const LOCK_WAIT_SECS: i32 = 60;

/// Applies the migrations `conn`'s database lacks, under a named lock
/// (`GET_LOCK`), so concurrent runs take turns.
pub(super) async fn run(sql: &Sql, conn: &mut MySqlConnection) -> Result<(), sqlx::Error> {
    // Waits for the lock, and DDL on a large table, may outlast the
    // store's limits on statements.
    sqlx::raw_sql(super::conns::FOR_MIGRATION)
        .execute(&mut *conn)
        .await?;
    // Lock names are at most 64 characters: the table's is hashed.
    let locked: Option<i64> =
        sqlx::query_scalar("SELECT GET_LOCK(CONCAT('idem migrate ', SHA1(?)), ?)")
            .bind(&sql.lock_name)
            .bind(LOCK_WAIT_SECS)
            .fetch_one(&mut *conn)
            .await?;
    if locked != Some(1) {
        return Err(sqlx::Error::Protocol(format!(
            "another migration of {} held its lock for {LOCK_WAIT_SECS} s",
            sql.table
        )));
    }
    let applied = apply(sql, conn).await;
    let released = sqlx::query("SELECT RELEASE_LOCK(CONCAT('idem migrate ', SHA1(?)))")
        .bind(&sql.lock_name)
        .execute(&mut *conn)
        .await;
    applied.and(released.map(drop))
}

async fn apply(sql: &Sql, conn: &mut MySqlConnection) -> Result<(), sqlx::Error> {
    sqlx::raw_sql(&format!(
        "CREATE TABLE IF NOT EXISTS {} (version INT NOT NULL PRIMARY KEY, applied_at DATETIME(6) NOT NULL) ENGINE = InnoDB",
        sql.versions
    ))
    .execute(&mut *conn)
    .await?;
    let done: i64 = sqlx::query(&format!(
        "SELECT CAST(COALESCE(MAX(version), 0) AS SIGNED) FROM {}",
        sql.versions
    ))
    .fetch_one(&mut *conn)
    .await?
    .try_get(0)?;
    if done > CURRENT {
        return Err(crate::sql::schema::unknown_version(
            &sql.table,
            &sql.versions,
            done,
            CURRENT,
        ));
    }
    for (version, migration) in (1..).zip(MIGRATIONS) {
        if version <= done {
            continue;
        }
        for statement in render(sql, migration).split("\n//\n") {
            sqlx::raw_sql(statement).execute(&mut *conn).await?;
        }
        sqlx::query(&format!(
            "INSERT INTO {} (version, applied_at) VALUES (?, UTC_TIMESTAMP(6))",
            sql.versions
        ))
        .bind(version)
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

/// Migration `step` with this table's names filled in.
fn render(sql: &Sql, step: &str) -> String {
    step.replace("{t}", &sql.table)
        .replace("{claim_v5}", &sql.procedure_v5)
        .replace("{claim_v4}", &sql.procedure_v4)
        .replace("{claim}", &sql.procedure)
        .replace("{index}", &sql.index)
        .replace("{steps_index}", &sql.steps_index)
        .replace("{steps}", &sql.steps.table)
}
