//! Redis's and Valkey's counters per command, for [`crate::server_time`].

use redis::aio::ConnectionManager;

use crate::server_time::{Counters, Counts};

/// `INFO commandstats` on `0` (a command a script runs counts too, its
/// time inside the script's).
pub(crate) struct CommandStats(pub ConnectionManager);

impl Counters for CommandStats {
    const SOURCE: &'static str = "`INFO commandstats` (a command a script runs counts once alone and once in the script's time)";

    async fn read(&self) -> Counts {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(&mut self.0.clone())
            .await
            .unwrap();
        info.lines().filter_map(parse).collect()
    }
}

/// `cmdstat_set:calls=3,usec=12,usec_per_call=4.00,…` as ("set", (3, 12.0)).
fn parse(line: &str) -> Option<(String, (u64, f64))> {
    let (name, fields) = line.strip_prefix("cmdstat_")?.split_once(':')?;
    let field = |key: &str| -> Option<u64> {
        fields
            .split(',')
            .find_map(|f| f.strip_prefix(key)?.strip_prefix('=')?.parse().ok())
    };
    Some((name.to_owned(), (field("calls")?, field("usec")? as f64)))
}
