//! Lease renewal for a handle that outlives a runtime (issue 29): a
//! `static` handle used from one runtime after another (as
//! `#[tokio::test]`s do), after a runtime shut down with
//! `shutdown_background`, and from a second runtime while the first still
//! lives but no longer drives its tasks. In each, a body running three
//! leases long keeps its lease: a duplicate sent over two leases after it
//! started gets `InProgress`, and the body runs once.
//!
//! Each runtime's first call is a body that finishes without yielding, so
//! a renewal task spawned by it is never polled on a current-thread
//! runtime (the way renewal used to die unnoticed). Every scenario runs on
//! the memory store and Redis (the Redis connection lives on a runtime of
//! its own, since its I/O task must outlive the test's runtimes).

use crate::support::redis_server;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use idem::{Error, Idempotency, MemoryStore, RedisStore};
use tokio::runtime::Runtime;

// A lease long enough that a renewal delayed by a loaded machine (the
// whole test binary on 2 cores) still lands before it lapses: renewals
// come every third of it, so a stall under two thirds is absorbed.
const LEASE: Duration = Duration::from_millis(1200);
const BODY: Duration = Duration::from_millis(3600);
const DUPLICATE_AFTER: Duration = Duration::from_millis(2700);

#[derive(Clone, Copy, Debug)]
enum Flavor {
    Current,
    Multi,
}

fn runtime(flavor: Flavor) -> Runtime {
    let mut builder = match flavor {
        Flavor::Current => tokio::runtime::Builder::new_current_thread(),
        Flavor::Multi => {
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            builder.worker_threads(2);
            builder
        }
    };
    builder.enable_all().build().expect("tokio runtime")
}

/// A scope of its own per test run: the Redis server outlives a run.
fn scope(test: &str) -> String {
    format!(
        "renewal-{test}-{:x}",
        idem::store::Token::random().to_u128() as u32
    )
}

/// A runtime's first call: a body that returns without ever yielding.
async fn quick_call(idem: &Idempotency, scope: &str, key: &str) {
    let out: Result<u8, Error> = idem.call(scope, key).run(|| async { Ok(1) }).await;
    assert_eq!(out.unwrap(), 1);
}

/// A body three leases long (blocking its thread on a multi-thread
/// runtime, awaiting a timer on a current-thread one), a duplicate over
/// two leases after it started: the duplicate gets `InProgress`, the body ran
/// once and its value is the holder's.
async fn long_body_keeps_its_lease(idem: &'static Idempotency, flavor: Flavor, scope: &str) {
    let (lease, body) = (LEASE, BODY);
    let runs = Arc::new(AtomicU32::new(0));
    let (started_tx, started) = tokio::sync::oneshot::channel();
    let holder = {
        let (scope, runs) = (scope.to_owned(), Arc::clone(&runs));
        tokio::spawn(async move {
            idem.call(&scope, "long")
                .lease(lease)
                .run(|| async move {
                    runs.fetch_add(1, Ordering::SeqCst);
                    started_tx.send(()).unwrap();
                    match flavor {
                        Flavor::Multi => std::thread::sleep(body),
                        Flavor::Current => tokio::time::sleep(body).await,
                    }
                    Ok::<u8, Error>(1)
                })
                .await
        })
    };
    started.await.unwrap();
    tokio::time::sleep(DUPLICATE_AFTER).await;
    let duplicate: Result<u8, Error> = idem
        .call(scope, "long")
        .lease(lease)
        .run(|| async {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok(2)
        })
        .await;
    assert!(
        matches!(duplicate, Err(Error::InProgress { .. })),
        "{flavor:?}: the duplicate got {duplicate:?}"
    );
    assert_eq!(holder.await.unwrap().unwrap(), 1, "{flavor:?}");
    assert_eq!(runs.load(Ordering::SeqCst), 1, "{flavor:?}: body runs");
}

/// How a runtime ends.
#[derive(Clone, Copy)]
enum End {
    Drop,
    ShutdownBackground,
}

fn end(runtime: Runtime, how: End) {
    match how {
        End::Drop => drop(runtime),
        End::ShutdownBackground => runtime.shutdown_background(),
    }
}

/// The (quick-only runtime, long-body runtime) pairs: every flavor after
/// every flavor.
const PAIRS: [(Flavor, Flavor); 4] = [
    (Flavor::Current, Flavor::Current),
    (Flavor::Current, Flavor::Multi),
    (Flavor::Multi, Flavor::Current),
    (Flavor::Multi, Flavor::Multi),
];

/// Runtimes one after another: one whose only call is quick (a fast
/// test), then one whose first call is quick and whose next is long.
fn sequential_runtimes(idem: &'static Idempotency, test: &str, how: End) {
    let scope = scope(test);
    for (round, (quick, long)) in PAIRS.into_iter().enumerate() {
        let first = runtime(quick);
        first.block_on(quick_call(idem, &scope, &format!("quick-{round}")));
        end(first, how);
        let second = runtime(long);
        second.block_on(async {
            quick_call(idem, &scope, &format!("first-{round}")).await;
            long_body_keeps_its_lease(idem, long, &format!("{scope}-{round}")).await;
        });
        end(second, how);
    }
}

/// A first runtime still alive but no longer driving its tasks (its
/// `block_on` returned), whose calls did (`yielded`) or did not let the
/// renewal task run; then a second runtime, used beside it.
fn two_live_runtimes(idem: &'static Idempotency, test: &str) {
    let scope = scope(test);
    for (round, long) in [Flavor::Current, Flavor::Multi].into_iter().enumerate() {
        for yielded in [false, true] {
            let first = runtime(Flavor::Current);
            first.block_on(async {
                quick_call(idem, &scope, &format!("idle-{round}-{yielded}")).await;
                if yielded {
                    tokio::task::yield_now().await;
                }
            });
            let second = runtime(long);
            second.block_on(async {
                quick_call(idem, &scope, &format!("second-{round}-{yielded}")).await;
                let scope = format!("{scope}-{round}-{yielded}");
                long_body_keeps_its_lease(idem, long, &scope).await;
            });
            drop(second);
            drop(first);
        }
    }
}

static MEMORY_SEQUENTIAL: LazyLock<Idempotency> =
    LazyLock::new(|| Idempotency::new(MemoryStore::new()));
static MEMORY_BACKGROUND: LazyLock<Idempotency> =
    LazyLock::new(|| Idempotency::new(MemoryStore::new()));
static MEMORY_TWO_LIVE: LazyLock<Idempotency> =
    LazyLock::new(|| Idempotency::new(MemoryStore::new()));

#[test]
fn memory_a_static_handle_keeps_leases_on_sequential_runtimes() {
    sequential_runtimes(&MEMORY_SEQUENTIAL, "memory-sequential", End::Drop);
}

#[test]
fn memory_a_static_handle_keeps_leases_after_shutdown_background() {
    let how = End::ShutdownBackground;
    sequential_runtimes(&MEMORY_BACKGROUND, "memory-background", how);
}

#[test]
fn memory_a_handle_shared_by_two_live_runtimes_keeps_leases() {
    two_live_runtimes(&MEMORY_TWO_LIVE, "memory-two-live");
}

/// The runtime that drives the Redis connections' I/O, alive for the
/// whole test binary (as a service's main runtime would be).
static REDIS_IO: LazyLock<Runtime> = LazyLock::new(|| runtime(Flavor::Multi));

fn redis() -> Idempotency {
    let store = REDIS_IO.block_on(async {
        RedisStore::connect(&redis_server::url().await)
            .await
            .expect("connect to Redis")
    });
    Idempotency::new(store)
}

static REDIS_SEQUENTIAL: LazyLock<Idempotency> = LazyLock::new(redis);
static REDIS_BACKGROUND: LazyLock<Idempotency> = LazyLock::new(redis);
static REDIS_TWO_LIVE: LazyLock<Idempotency> = LazyLock::new(redis);

#[test]
fn redis_a_static_handle_keeps_leases_on_sequential_runtimes() {
    sequential_runtimes(&REDIS_SEQUENTIAL, "redis-sequential", End::Drop);
}

#[test]
fn redis_a_static_handle_keeps_leases_after_shutdown_background() {
    let how = End::ShutdownBackground;
    sequential_runtimes(&REDIS_BACKGROUND, "redis-background", how);
}

#[test]
fn redis_a_handle_shared_by_two_live_runtimes_keeps_leases() {
    two_live_runtimes(&REDIS_TWO_LIVE, "redis-two-live");
}
