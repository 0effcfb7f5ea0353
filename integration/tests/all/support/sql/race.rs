//! Two OS processes (replicas) race on the same 1,000 keys through one
//! server; every body increments a counter row, so a table says how often
//! each body ran in total.

use std::process::Command;
use std::time::{Duration, Instant};

use futures::StreamExt;
use idem::{Error, Idempotency};

use super::{Knobs, SqlServer, options, store_at};
use crate::support::test_name;

/// Environment variable that makes `race_worker` a worker: the place.
const WORKER: &str = "IDEM_SQL_RACE_WORKER";
const KEYS: u32 = 1000;

/// What the race needs of a server beyond [`SqlServer`]: the counter
/// table beside the store's place, and a connection to bump it on.
pub(crate) trait RaceServer: SqlServer {
    /// The variable the server's support file reads its URL from.
    const URL_VAR: &'static str;
    /// A connection of the worker's own.
    type Conn: Send;
    /// The counter table's name beside `place`, quoted.
    fn runs_table(place: &str) -> String;
    /// Creates the counter table `runs`.
    async fn create_runs(runs: &str);
    /// A connection of the worker's own.
    async fn connect() -> Self::Conn;
    /// Adds one run of `key` to `runs`.
    async fn bump(conn: &mut Self::Conn, runs: &str, key: u32) -> Result<(), sqlx::Error>;
    /// The rows of `runs`, their sum and their maximum.
    async fn totals(runs: &str) -> (i64, i64, i64);
}

/// `module` is the `module_path!()` of the test module whose
/// `race_worker` the child processes run.
pub(crate) async fn two_processes_racing_run_each_body_once<S: RaceServer>(module: &str) {
    let place = S::unique("race");
    store_at::<S>(&place).await;
    let runs = S::runs_table(&place);
    S::create_runs(&runs).await;
    let started = Instant::now();
    // The workers use this process's server, a private one included.
    let url = S::url().await;
    let workers: Vec<_> = (0..2)
        .map(|_| {
            Command::new(std::env::current_exe().unwrap())
                .args([
                    test_name(module, "race_worker").as_str(),
                    "--exact",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(WORKER, &place)
                .env(S::URL_VAR, &url)
                .spawn()
                .unwrap()
        })
        .collect();
    for mut worker in workers {
        assert!(worker.wait().unwrap().success(), "a worker failed");
    }
    let elapsed = started.elapsed();
    let totals = S::totals(&runs).await;
    println!("2 processes x {KEYS} keys in {elapsed:?}");
    assert_eq!(totals, (i64::from(KEYS), i64::from(KEYS), 1));
    S::execute(&format!("DROP TABLE {runs}")).await;
}

/// Not a test of its own: the entry point of `two_processes_racing…`'s
/// child processes (a no-op unless `IDEM_SQL_RACE_WORKER` is set).
pub(crate) async fn race_worker<S: RaceServer>() {
    let Ok(place) = std::env::var(WORKER) else {
        return;
    };
    let store = S::connect_with(&place, Knobs::default(), options::<S>().await)
        .await
        .unwrap();
    let idem = Idempotency::new(store);
    let runs = S::runs_table(&place);
    let counter = tokio::sync::Mutex::new(S::connect().await);
    let tasks = (0..KEYS).map(|key| {
        let (idem, runs, counter) = (&idem, &runs, &counter);
        async move {
            // Both processes go through the keys in the same order, so
            // they collide on most of them; a call that meets the other's
            // claim waits for its value.
            idem.call("race", &key)
                .wait(Duration::from_secs(30))
                .run(|| async {
                    S::bump(&mut *counter.lock().await, runs, key)
                        .await
                        .map_err(|err| Error::Store(idem::StoreError::new("counter", err)))?;
                    Ok::<_, Error>(key)
                })
                .await
        }
    });
    let results: Vec<_> = futures::stream::iter(tasks)
        .buffer_unordered(16)
        .collect()
        .await;
    for out in results {
        out.unwrap();
    }
}
