//! Throughput and latency of idem beside its baselines, in one process.
//!
//! `cargo bench -p idem-integration --bench throughput` (add `-- memory` to run
//! only the scenarios whose name contains `memory`; set
//! `IDEM_BENCH_SUBJECT=raw` to run only the subjects whose name contains
//! `raw`, for profiling one of them; `IDEM_BENCH_VERBOSE=1` prints every
//! round). Each scenario runs
//! interleaved with its baselines for several rounds; the table reports
//! the median round's calls per second, p50 and p99 latency, and the ratio
//! of idem to each baseline. Ratios within one run are what to compare:
//! absolute figures move with the machine.
//!
//! The client runs on one runtime thread (`IDEM_BENCH_WORKERS` to change
//! it): on a two-core machine that leaves the other core to the server,
//! and every subject's requests, connection tasks and wake-ups share one
//! thread. With two workers, whether a connection's driver task happened
//! to land on the caller's thread or the other one moved single-call
//! latencies by 5× between rounds, more than any difference between
//! subjects.

mod codec;
mod harness;
mod memory;
#[cfg(feature = "redis")]
mod peer;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "redis")]
mod redis;
#[cfg(feature = "sqlite")]
mod sqlite;

use harness::Report;

fn main() {
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let workers = std::env::var("IDEM_BENCH_WORKERS")
        .ok()
        .and_then(|w| w.parse().ok())
        .unwrap_or(1);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let mut report = Report::new(filter);
    runtime.block_on(async {
        memory::run(&mut report).await;
        codec::run(&mut report).await;
        #[cfg(feature = "redis")]
        if report.wants_any("redis") {
            redis::run(&mut report).await;
        }
        #[cfg(feature = "postgres")]
        if report.wants_any("postgres") {
            postgres::run(&mut report).await;
        }
        #[cfg(feature = "sqlite")]
        if report.wants_any("sqlite") {
            sqlite::run(&mut report).await;
        }
    });
    report.print();
}
