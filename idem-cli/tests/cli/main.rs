//! The `idem` binary, run as a process against real stores, as one test
//! binary: `commands` (what each command shows and does) and `hardening`
//! (what probing the CLI found, issue 37: secrets, untouched files,
//! exact values).
//!
//! Servers: see integration/tests/all/support/pg_server.rs, redis_server.rs,
//! mysql_server.rs and dynamodb_server.rs (the machine's, else private ones
//! these tests start).

#[cfg(feature = "dynamodb")]
#[path = "../../../integration/tests/all/support/dynamodb_server.rs"]
mod dynamodb_server;
#[path = "../../../integration/tests/all/support/mysql_server.rs"]
mod mysql_server;
#[path = "../../../integration/tests/all/support/pg_server.rs"]
mod pg_server;
#[path = "../../../integration/tests/all/support/redis_server.rs"]
mod redis_server;

mod commands;
#[cfg(feature = "dynamodb")]
mod dynamodb;
mod hardening;
mod http_records;
mod purge_pace;
