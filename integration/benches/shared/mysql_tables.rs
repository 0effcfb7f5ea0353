//! Leaving the shared MariaDB or MySQL as a bench found it.

use sqlx::MySqlPool;

/// Drops what `MySqlStore::migrate` made for `table`: its steps,
/// migrations and records tables, and every claim procedure, found by
/// name so that a later migration's procedure goes too.
pub(crate) async fn drop_store_table(pool: &MySqlPool, table: &str) {
    for suffix in ["_steps", "_migrations", ""] {
        let drop = format!("DROP TABLE IF EXISTS `{table}{suffix}`");
        sqlx::raw_sql(&drop).execute(pool).await.unwrap();
    }
    // `_` matches any character in LIKE; the table's own are literal.
    let pattern = format!("{}\\_claim%", table.replace('_', "\\_"));
    let procedures: Vec<String> = sqlx::query_scalar(
        "SELECT CAST(routine_name AS CHAR) FROM information_schema.routines \
         WHERE routine_schema = DATABASE() AND routine_name LIKE ?",
    )
    .bind(pattern)
    .fetch_all(pool)
    .await
    .unwrap();
    for name in procedures {
        let drop = format!("DROP PROCEDURE IF EXISTS `{name}`");
        sqlx::raw_sql(&drop).execute(pool).await.unwrap();
    }
}
