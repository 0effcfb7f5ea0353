//! Make async functions safe to call more than once.
//!
//! HTTP clients retry, queues redeliver, users double-click. `idem` turns a
//! plain `async fn` into an idempotent one: the first call with a key
//! claims it atomically in a store, runs the body and stores the `Ok`
//! value; every duplicate gets that value back without running the body.
//!
//! ```
//! use idem::{idempotent, Idempotency, MemoryStore};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize, Debug, PartialEq)]
//! struct Receipt { id: u64, amount_cents: u64 }
//!
//! #[idempotent(key = order_id, scope = "payments", ttl = "24h")]
//! async fn charge(order_id: &str, amount_cents: u64) -> Result<Receipt, idem::Error> {
//!     Ok(Receipt { id: rand_id(), amount_cents })
//! }
//! # fn rand_id() -> u64 { std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! idem::install(Idempotency::new(MemoryStore::new()));
//! let first = charge("order-1", 1200).await.unwrap();
//! let again = charge("order-1", 1200).await.unwrap();
//! assert_eq!(first, again); // replayed: the body ran once
//! assert!(matches!(
//!     charge("order-1", 999).await,
//!     Err(idem::Error::FingerprintMismatch { .. })
//! ));
//! # }
//! ```
//!
//! # Where to go next
//!
//! - [`idempotent`]: the attribute and its options (`key`, `scope`, `ttl`,
//!   `lease`, `wait`, `tombstone`, `store`, `fingerprint`, `skip`, `errors`, `detach`,
//!   `version`, `crate`).
//! - [`Idempotency::call`]: the same runtime without the macro: one
//!   [`Call`] with settings, among them [`Call::detach`] for bodies that
//!   must run on when their caller goes away, [`Call::reconcile`] and
//!   [`Call::on`] (a borrowed store), ended by [`Call::run`].
//! - [`step`]: recovery points inside a body of several effects, so a
//!   retried call resumes after its last finished step.
//! - The stores, one feature each: [`MemoryStore`] (`memory`, default),
//!   `RedisStore` (`redis`), `PostgresStore` and its transactional mode
//!   (`postgres`), `SqliteStore` (`sqlite`), `MySqlStore` (`mysql`, MySQL
//!   and MariaDB), `DynamoDbStore` (`dynamodb`). Each backend's module
//!   ([`memory`], `redis`, `postgres`, `sqlite`, `mysql`, `dynamodb`) holds its store and what else it needs (a builder,
//!   defaults, the transaction types).
//! - Your own store: the [`Store`] trait, the items of [`store`] it speaks
//!   (claims, outcomes, fencing tokens), and the `idem-conformance` crate,
//!   whose suite every store must pass.
//! - [`key`] and [`fingerprint`]: how scopes, keys and payloads are hashed,
//!   for a [`KeyPart`] of your own.
//! - `testing` (feature `testing`): prove your own functions: crash
//!   points, a faulty store, pinned keys, and the inventory of
//!   `#[idempotent]` functions.
//! - [`http`] (`axum`): a tower layer for whole HTTP endpoints, and an
//!   extractor; [`queue`]: what a queue consumer tells its broker.
//! - [`client`] (`client`): the other side of HTTP, a reqwest middleware
//!   that keeps one key per logical request across its retries.
//!
//! # Errors
//!
//! idem's own errors reach the caller through `E: From<idem::Error>`; the
//! variants, when each happens and the HTTP status that answers it are
//! listed once, on [`Error`].
//!
//! # Guides
//!
//! The reference that belongs to no one item is in [`guide`]: the
//! attribute in depth, records across deploys, the stores, the HTTP layer,
//! the client, queues, recovery points, operations and faults.
//!
//! The crate is published as `idemkit`; its library is named `idem`
//! (`idemkit = "0.1"` in `Cargo.toml`, `idem::…` in code). Minimum Rust
//! version: 1.88.

#![cfg_attr(docsrs, feature(doc_cfg))]

pub use idem_core::{
    Body, Call, CallSite, CodecError, DEFAULT_LEASE, DEFAULT_MAX_RECORD_BYTES, DEFAULT_TTL, Error,
    ErrorPolicy, Failed, Idempotency, IdempotencyBuilder, KeyPart, MAX_DURATION, Mismatch,
    NoReconcile, Ran, Reconcile, ReleaseErrors, ReplayErrors, Reported, Store, StoreError,
    StoreErrorKind, call_site, child_key, install, installed, replay_errors, replay_errors_if,
    step,
};
pub use idem_macros::idempotent;

pub use idem_core::{fingerprint, key, place, queue, store, transaction};

/// Operating records: list, inspect, purge, count (what `idem` the CLI uses).
pub use idem_core::admin;

// Each backend is a module with its store and whatever else it needs; the
// store type is also at the root, where applications name it.

#[cfg(feature = "memory")]
#[cfg_attr(docsrs, doc(cfg(feature = "memory")))]
pub use idem_store::memory;

#[cfg(feature = "memory")]
#[cfg_attr(docsrs, doc(cfg(feature = "memory")))]
#[doc(no_inline)]
pub use idem_store::MemoryStore;

#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub use idem_store::redis;

#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
#[doc(no_inline)]
pub use idem_store::RedisStore;

#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub use idem_store::postgres;

#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
#[doc(no_inline)]
pub use idem_store::PostgresStore;

#[cfg(feature = "sqlite")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlite")))]
pub use idem_store::sqlite;

#[cfg(feature = "sqlite")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlite")))]
#[doc(no_inline)]
pub use idem_store::SqliteStore;

#[cfg(feature = "mysql")]
#[cfg_attr(docsrs, doc(cfg(feature = "mysql")))]
pub use idem_store::mysql;

#[cfg(feature = "mysql")]
#[cfg_attr(docsrs, doc(cfg(feature = "mysql")))]
#[doc(no_inline)]
pub use idem_store::MySqlStore;

#[cfg(feature = "dynamodb")]
#[cfg_attr(docsrs, doc(cfg(feature = "dynamodb")))]
pub use idem_store::dynamodb;

#[cfg(feature = "dynamodb")]
#[cfg_attr(docsrs, doc(cfg(feature = "dynamodb")))]
#[doc(no_inline)]
pub use idem_store::DynamoDbStore;

// The integrations are crates of their own (`idem-axum`, `idem-reqwest`,
// `idem-tonic`),
// here under the paths applications write.

#[cfg(feature = "axum")]
#[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
#[doc(inline)]
pub use idem_axum as http;

#[cfg(feature = "client")]
#[cfg_attr(docsrs, doc(cfg(feature = "client")))]
#[doc(inline)]
pub use idem_reqwest as client;

#[cfg(feature = "tonic")]
#[cfg_attr(docsrs, doc(cfg(feature = "tonic")))]
#[doc(inline)]
pub use idem_tonic as grpc;

#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;

pub mod guide;

#[doc(hidden)]
pub use idem_core::__private;
