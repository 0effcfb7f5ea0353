//! Throughput and latency of idem beside its baselines, in one process.
//!
//! `cargo bench -p idem-integration --bench throughput` (add `-- memory` to run
//! only the scenarios whose name contains `memory`; set
//! `IDEM_BENCH_SUBJECT=raw` to run only the subjects whose name contains
//! `raw`, or `IDEM_BENCH_SUBJECT="=raw GET"` for that one alone, for
//! profiling one of them; `IDEM_BENCH_VERBOSE=1` prints every
//! round; `IDEM_BENCH_ROUNDS=3` runs 3 rounds instead of 7). Each
//! scenario runs interleaved with its baselines for several rounds; the
//! table reports the median round's calls per second, p50 and
//! p99 latency, and the ratio of idem to each baseline: the median of the
//! rounds' ratios, each round's idem figure over the baseline's in the same
//! round. Ratios within one run are what to compare: absolute figures move
//! with the machine.
//!
//! Every scenario runs on two runtimes, one after the other: a
//! current-thread runtime (every subject's requests, connection tasks and
//! wake-ups share one thread, leaving the other core of a two-core machine
//! to the server) and a multi-thread runtime of 2 workers (the way
//! services run). `IDEM_BENCH_RUNTIMES=current` or `=multi` keeps one of
//! them; `IDEM_BENCH_WORKERS` sets the multi-thread runtime's workers.
//! `IDEM_BENCH_AWAKE=1` keeps the CPUs out of idle states (`awake.rs`).

mod awake;
mod codec;
#[cfg(any(feature = "postgres", feature = "mysql"))]
mod dedicated;
mod harness;
mod memory;
#[cfg(feature = "mysql")]
mod mysql;
#[cfg(feature = "redis")]
#[path = "../shared/mysql_tables.rs"]
mod mysql_tables;
#[cfg(feature = "redis")]
mod peer;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "redis")]
mod redis;
#[path = "../shared/redis_keys.rs"]
mod redis_keys;
mod server_time;
#[cfg(any(feature = "postgres", feature = "mysql"))]
mod spread;
#[cfg(feature = "sqlite")]
mod sqlite;

use harness::{Flavor, Report};

async fn run_all(report: &mut Report) {
    memory::run(report).await;
    codec::run(report).await;
    #[cfg(feature = "redis")]
    if report.wants_any("redis") {
        redis::run(report).await;
    }
    #[cfg(feature = "postgres")]
    if report.wants_any("postgres") {
        postgres::run(report).await;
    }
    #[cfg(feature = "mysql")]
    if report.wants_any("mysql") {
        mysql::run(report).await;
    }
    #[cfg(feature = "sqlite")]
    if report.wants_any("sqlite") {
        sqlite::run(report).await;
    }
}

fn main() {
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let mut report = Report::new(filter);
    let _awake = awake::hold(&mut report);
    for flavor in Flavor::wanted() {
        report.set_runtime(flavor.label());
        // Each runtime is dropped before the next starts, with the
        // connections and tasks its scenarios made.
        flavor.runtime().block_on(run_all(&mut report));
    }
    report.print();
}
