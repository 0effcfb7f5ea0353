//! MySQL's and MariaDB's counters per kind of statement, for
//! [`crate::server_time`]: `performance_schema`'s statement events (the
//! stores send prepared statements, which MariaDB leaves out of its
//! digests and its `prepared_statements_instances` counts).

use sqlx::MySqlPool;

use crate::server_time::{Counters, Counts};

/// The statement events of the server `0` reaches.
pub(crate) struct StatementEvents(pub MySqlPool);

impl StatementEvents {
    /// Whether the server keeps them (`--performance-schema=ON`; MariaDB's
    /// default is off).
    pub(crate) async fn kept(pool: &MySqlPool) -> bool {
        let on: Result<i64, _> = sqlx::query_scalar("SELECT @@performance_schema")
            .fetch_one(pool)
            .await;
        let kept = matches!(on, Ok(1));
        if !kept {
            eprintln!("bench: no performance_schema on this server: no server time per statement");
        }
        kept
    }
}

impl Counters for StatementEvents {
    const SOURCE: &'static str = "`performance_schema` statement events";

    async fn read(&self) -> Counts {
        let rows: Vec<(String, u64, u64)> = sqlx::query_as(
            "SELECT EVENT_NAME, COUNT_STAR, SUM_TIMER_WAIT \
             FROM performance_schema.events_statements_summary_global_by_event_name \
             WHERE COUNT_STAR > 0",
        )
        .fetch_all(&self.0)
        .await
        .unwrap();
        // Timers count picoseconds.
        let us = |ps: u64| ps as f64 / 1e6;
        rows.into_iter()
            .map(|(name, n, ps)| (name, (n, us(ps))))
            .collect()
    }

    /// A stored program's statements, inside the `CALL`'s execution.
    fn nested(what: &str) -> bool {
        what.starts_with("statement/sp/")
    }
}
