//! idem's integration tests as one test binary: each module was a test
//! binary of its own, and each linked the whole dependency graph. Run one
//! module with `cargo test -p idem-integration --test all redis_fault::`,
//! one test with its module path (`--exact
//! postgres_tx::a_process_that_dies_before_commit_leaves_nothing`).
//!
//! Tests that re-run this binary as a worker process name the worker test
//! by its module path (`support::test_name`). Apart, in binaries of their
//! own, are the tests that set something for the whole process:
//! `tracing_events.rs` and `renewal_failures.rs` (the global tracing
//! subscriber; the latter also the metrics recorder), `metrics_prometheus.rs`
//! (the example's recorder) and `readme.rs` (the quickstart's
//! `idem::install`, which `macro_forms` checks is absent here).

mod support;

#[cfg(all(feature = "axum", feature = "memory", feature = "client"))]
mod client;
#[cfg(feature = "memory")]
mod detach;
#[cfg(feature = "dynamodb")]
mod dynamodb;
#[cfg(feature = "dynamodb")]
mod dynamodb_capacity;
#[cfg(feature = "dynamodb")]
mod dynamodb_process;
#[cfg(all(feature = "tonic", feature = "memory"))]
mod grpc;
#[cfg(all(feature = "tonic", feature = "memory"))]
mod grpc_answers;
#[cfg(all(feature = "tonic", feature = "memory"))]
mod grpc_keys;
#[cfg(all(feature = "tonic", feature = "memory"))]
mod grpc_service;
#[cfg(all(feature = "axum", feature = "memory"))]
mod http;
#[cfg(all(
    feature = "axum",
    feature = "memory",
    feature = "redis",
    feature = "postgres",
    feature = "sqlite"
))]
mod http_detach;
#[cfg(all(feature = "axum", feature = "memory", feature = "redis"))]
mod http_redis;
#[cfg(all(feature = "axum", feature = "memory"))]
mod http_responses;
#[cfg(all(feature = "axum", feature = "memory", feature = "sqlite"))]
mod http_scoping;
#[cfg(all(feature = "axum", feature = "memory", feature = "sqlite"))]
mod http_sqlite;
#[cfg(all(feature = "axum", feature = "memory"))]
mod http_state_updates;
#[cfg(all(feature = "axum", feature = "memory"))]
mod http_tokens;
#[cfg(all(
    feature = "axum",
    feature = "memory",
    feature = "postgres",
    feature = "mysql"
))]
mod http_tx;
#[cfg(all(
    feature = "axum",
    feature = "memory",
    feature = "postgres",
    feature = "mysql"
))]
mod http_tx_chaos;
mod local_cache;
mod macro_forms;
mod memory;
#[cfg(all(
    feature = "memory",
    feature = "sqlite",
    feature = "postgres",
    feature = "mysql",
    feature = "redis",
    feature = "testing"
))]
mod model;
#[cfg(feature = "mysql")]
mod mysql;
#[cfg(feature = "mysql")]
mod mysql_limits;
#[cfg(feature = "mysql")]
mod mysql_tx;
#[cfg(any(feature = "postgres", feature = "mysql"))]
mod older_replicas;
mod operations;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "postgres")]
mod postgres_tx;
#[cfg(all(
    feature = "memory",
    feature = "sqlite",
    feature = "postgres",
    feature = "mysql"
))]
mod purge;
mod queue_disposition;
#[cfg(feature = "postgres")]
mod queue_jetstream;
#[cfg(feature = "postgres")]
mod queue_rabbitmq;
#[cfg(feature = "postgres")]
mod queue_tx_handle;
mod reconcile;
#[cfg(all(feature = "sqlite", feature = "postgres", feature = "redis"))]
mod reconcile_chaos;
#[cfg(all(feature = "memory", feature = "axum"))]
mod records;
#[cfg(feature = "redis")]
mod redis;
#[cfg(feature = "redis")]
mod redis_cluster;
#[cfg(feature = "redis")]
mod redis_failover;
#[cfg(feature = "redis")]
mod redis_fault;
#[cfg(feature = "redis")]
mod redis_layout;
#[cfg(feature = "redis")]
mod redis_production;
mod renewal_runtimes;
#[cfg(all(feature = "postgres", feature = "mysql"))]
mod rolled_back;
#[cfg(all(feature = "redis", feature = "postgres", feature = "mysql"))]
mod round_trips;
#[cfg(all(
    feature = "sqlite",
    feature = "postgres",
    feature = "mysql",
    feature = "redis"
))]
mod soak;
#[cfg(feature = "sqlite")]
mod sqlite;
#[cfg(feature = "sqlite")]
mod steps_chaos;
#[cfg(all(feature = "testing", feature = "sqlite"))]
mod testing_kit;
#[cfg(feature = "testing")]
mod testing_kit_example;
#[cfg(feature = "redis")]
mod valkey;
#[cfg(feature = "redis")]
mod valkey_cluster;
