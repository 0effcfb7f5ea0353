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
//! The attribute's options, the store semantics and the errors are in the
//! README; the runtime without the macro is [`Idempotency::call`].

#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub use idem_core::{
    Call, Claim, ClaimOutcome, CodecError, DEFAULT_LEASE, DEFAULT_MAX_RECORD_BYTES, DEFAULT_TTL,
    Digester, Error, ErrorPolicy, Fence, Fingerprint, FingerprintError, Idempotency,
    IdempotencyBuilder, KeyHasher, KeyPart, RecordKey, ReleaseErrors, Reported, ShortKey, Store,
    StoreError, StoreErrorsIf, Token, async_trait, child_key, install, installed, queue,
    replay_errors, store_errors_if,
};
pub use idem_macros::idempotent;

#[cfg(feature = "memory")]
#[cfg_attr(docsrs, doc(cfg(feature = "memory")))]
pub use idem_store::MemoryStore;

#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub use idem_store::{RedisStore, RedisStoreBuilder};

#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub use idem_store::{PostgresStore, postgres};

#[cfg(feature = "sqlite")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlite")))]
pub use idem_store::SqliteStore;

#[cfg(feature = "axum")]
#[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
pub mod http;

#[doc(hidden)]
pub use idem_core::__private;
