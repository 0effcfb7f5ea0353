//! Server time per statement from `pg_stat_statements`, where the server
//! loads it (a private one, as `benches/pg_claim/run.sh` starts it; with
//! `pg_stat_statements.track = all` the statements inside the claim
//! function are listed too): reset before a scenario, read after it.

use sqlx::PgPool;

/// Whether the server keeps statement statistics; resets them if so.
pub(crate) async fn reset(pool: &PgPool) -> bool {
    let on = sqlx::query("SELECT pg_stat_statements_reset()")
        .execute(pool)
        .await
        .is_ok();
    if !on {
        eprintln!("bench: no pg_stat_statements on this server: no server time per statement");
    }
    on
}

/// The statements `scenario` sent at least 100 times, with the mean server
/// time of each, as one note.
pub(crate) async fn note(pool: &PgPool, scenario: &str) -> String {
    let rows: Vec<(i64, f64, bool, String)> = sqlx::query_as(
        "SELECT calls, mean_exec_time * 1000, toplevel, \
         left(regexp_replace(regexp_replace(query, '\\s+', ' ', 'g'), '\"?idem_bench_[0-9a-f]+\"?\\.', '', 'g'), 72) \
         FROM pg_stat_statements WHERE calls >= 100 AND query NOT LIKE '%pg_stat%' ORDER BY calls DESC, total_exec_time DESC",
    )
    .fetch_all(pool)
    .await
    .unwrap_or_default();
    let lines: Vec<String> = rows
        .into_iter()
        .map(|(calls, us, top, query)| {
            let inside = if top { "" } else { " (inside a function)" };
            format!("{calls} × {us:.1} µs{inside}: `{query}`")
        })
        .collect();
    format!(
        "{scenario}, server time per statement: {}",
        lines.join("; ")
    )
}
