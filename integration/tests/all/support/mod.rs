//! What the tests share, declared once for the binary: the servers they
//! find or start, the example apps they serve, proxies and gates that
//! count or cut traffic. The test binaries of their own
//! (`tests/tracing_events.rs`, `tests/renewal_failures.rs`) and idem-cli's
//! tests include the few files they need by `#[path]`.

pub(crate) mod captured;
#[cfg(all(feature = "axum", feature = "memory", feature = "client"))]
pub(crate) mod client;
pub(crate) mod cluster;
#[cfg(feature = "dynamodb")]
pub(crate) mod dynamodb_meter;
#[cfg(feature = "dynamodb")]
pub(crate) mod dynamodb_server;
#[cfg(all(feature = "tonic", feature = "memory"))]
pub(crate) mod grpc;
#[cfg(all(feature = "axum", feature = "memory"))]
pub(crate) mod http;
pub(crate) mod mysql_server;
pub(crate) mod pg_server;
pub(crate) mod provider;
pub(crate) mod queue_worker;
pub(crate) mod redis_server;
pub(crate) mod sql;
pub(crate) mod sql_mysql;
pub(crate) mod sql_pg;
pub(crate) mod tcp_gate;
pub(crate) mod turn_proxy;
pub(crate) mod valkey_server;

/// The name the test harness gives test `name` of the module whose
/// `module_path!()` is `module` (the binary's name left out), for a child
/// process that runs this binary again as that one test: `--exact`
/// `test_name(module_path!(), "race_worker")`.
pub(crate) fn test_name(module: &str, name: &str) -> String {
    match module.split_once("::") {
        Some((_binary, path)) => format!("{path}::{name}"),
        None => name.to_owned(),
    }
}
