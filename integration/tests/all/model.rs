//! A reference model of one key's life and a state-machine property test
//! against it (issue 45): random sequences of calls with the same or
//! another payload, holders that finish, are dropped or vanish, late
//! claim answers, time, `forget`, purge, reconciles that find, miss or
//! fail, and extreme durations, on real stores; after every step the
//! caller's answer must be one the model allows, every payload's effects
//! stay within what the model permits, and every value answered was
//! produced for that payload.
//!
//! `cargo test -p idem-integration --test all model::` runs the fixed-seed
//! corpus; `scripts/explore` runs many more cases. A failure prints its
//! shrunk sequence as a test for `model/regressions.rs`.

use crate::support::mysql_server;
use crate::support::pg_server;
use crate::support::redis_server;
use crate::support::valkey_server;

mod explore;
mod ops;
mod reference;
mod regressions;
mod sut;
mod tx;
mod wire;

use sut::Backend;

/// The default corpus on MemoryStore (paused clock). Seed 45 finds issue
/// 44's item 5 in its first case (and items 1, 2, 3 and 4 with the kinds
/// before them left out: `IDEM_MODEL_WITHOUT`).
#[test]
fn corpus_memory() {
    explore::explore(Backend::Memory, 300, 12);
}

/// The default corpus on SQLite (real time, 400 ms leases).
#[test]
fn corpus_sqlite() {
    explore::explore(Backend::Sqlite, 12, 10);
}

/// The default corpus on PostgreSQL (real time, 400 ms leases).
#[test]
fn corpus_postgres() {
    explore::explore(Backend::Postgres, 12, 10);
}

/// The default corpus on MySQL/MariaDB (real time, 400 ms leases).
#[test]
fn corpus_mysql() {
    explore::explore(Backend::MySql, 12, 10);
}

/// The default corpus on Redis (real time, 400 ms leases).
#[test]
fn corpus_redis() {
    explore::explore(Backend::Redis, 12, 10);
}

/// The default corpus on Valkey 9 (real time, 400 ms leases).
#[test]
fn corpus_valkey() {
    explore::explore(Backend::Valkey, 12, 10);
}
