//! Stores for [idem](https://docs.rs/idemkit), each behind a feature:
//! `memory` ([`MemoryStore`]), `redis` ([`RedisStore`]), `postgres`
//! ([`PostgresStore`]), `sqlite` ([`SqliteStore`]), `mysql`
//! ([`MySqlStore`], MySQL and MariaDB) and `dynamodb` (`DynamoDbStore`). Every store passes
//! the conformance suite, the `idem-conformance` crate.
//!
//! Each backend is a module holding its store and whatever else it needs
//! (a builder, constants, the PostgreSQL transactional mode); the store
//! type itself is also here at the root.

#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(feature = "memory")]
#[cfg_attr(docsrs, doc(cfg(feature = "memory")))]
pub mod memory;

#[cfg(feature = "memory")]
#[cfg_attr(docsrs, doc(cfg(feature = "memory")))]
#[doc(no_inline)]
pub use memory::MemoryStore;

#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub mod postgres;

#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
#[doc(no_inline)]
pub use postgres::PostgresStore;

#[cfg(feature = "sqlite")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlite")))]
pub mod sqlite;

#[cfg(feature = "mysql")]
#[cfg_attr(docsrs, doc(cfg(feature = "mysql")))]
pub mod mysql;

#[cfg(feature = "mysql")]
#[cfg_attr(docsrs, doc(cfg(feature = "mysql")))]
#[doc(no_inline)]
pub use mysql::MySqlStore;

/// What a SQL store's statement is sent for.
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
mod answer;

/// The dedicated connections of the SQL stores.
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
mod conns;

#[cfg(any(feature = "redis", feature = "postgres", feature = "mysql"))]
mod completed;

/// What the SQL stores share beyond their connections.
#[cfg(any(feature = "postgres", feature = "mysql"))]
mod sql;

// The guides that need sqlx (`idem::guide::sql`, `idem::guide::queues`).
#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub mod guide;

#[cfg(feature = "sqlite")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlite")))]
#[doc(no_inline)]
pub use sqlite::SqliteStore;

/// Records in Redis: [`RedisStore`](redis::RedisStore) and its
/// [builder](redis::RedisStoreBuilder).
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub mod redis;

#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
#[doc(no_inline)]
pub use crate::redis::RedisStore;

/// Records in DynamoDB: [`DynamoDbStore`](dynamodb::DynamoDbStore) and its
/// record size limit.
#[cfg(feature = "dynamodb")]
#[cfg_attr(docsrs, doc(cfg(feature = "dynamodb")))]
pub mod dynamodb;

#[cfg(feature = "dynamodb")]
#[cfg_attr(docsrs, doc(cfg(feature = "dynamodb")))]
#[doc(no_inline)]
pub use crate::dynamodb::DynamoDbStore;
