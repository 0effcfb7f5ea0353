//! Guides: the reference that does not belong to one item.
//!
//! The README is what a newcomer reads first; these pages are what they
//! come back to. Each fact lives in one place: where an item's own rustdoc
//! says it (an option of [`idempotent`](crate::idempotent), a variant of
//! [`Error`](crate::Error), an answer of [`http`](crate::http)), a guide
//! links there instead of repeating it.
//!
//! | guide | what it covers |
//! | --- | --- |
//! | [`attribute`] | `#[idempotent]` in depth: the rules a call keeps, a caller that gives up, traits and other attributes, every compile-time check, the builder underneath |
//! | [`records`] | records across deploys, and what a record holds |
//! | [`stores`] | choosing a store, what every store guarantees, the memory store, the local replay cache, your own store |
//! | [`redis`] | the Redis store and running Redis for idem (feature `redis`) |
//! | [`sql`] | SQLite, PostgreSQL with its transactional mode, MySQL/MariaDB (features `sqlite`, `postgres`, `mysql`) |
//! | [`http`] | the axum layer: the recipe, what it stores, compression, security, token mode, versions, a walk through the payments example (feature `axum`) |
//! | [`client`] | the reqwest middleware that keeps one key across retries (feature `client`) |
//! | [`queues`] | queue consumers: keys, dispositions, heartbeats, crashes (feature `postgres` for its example) |
//! | [`steps`] | recovery points inside a body of several effects |
//! | [`state_updates`] | `mismatch = "rerun"`: a key that names a resource, side effects once per real change (a PUT without a key) |
//! | [`unknown_outcomes`] | a holder that vanished mid-effect: what `child_key`, steps, the transactional mode and `reconcile` each guarantee |
//! | [`operations`] | metrics, spans, forgetting records, the `idem` command |
//! | [`testing`] | proving your own functions: crash points, a faulty store, pinned keys, the list of sites (feature `testing`) |
//! | [`faults`] | what each store does under the faults an SRE tries |

pub mod attribute;
#[cfg(feature = "client")]
#[cfg_attr(docsrs, doc(cfg(feature = "client")))]
#[doc(inline)]
pub use idem_reqwest::guide as client;
pub mod faults;
#[cfg(feature = "axum")]
#[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
#[doc(inline)]
pub use idem_axum::guide as http;
pub mod operations;
#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
#[doc(inline)]
pub use idem_store::guide::queues;
pub mod records;
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub mod redis;
#[cfg(all(feature = "sqlite", feature = "postgres"))]
#[cfg_attr(docsrs, doc(cfg(all(feature = "sqlite", feature = "postgres"))))]
#[doc(inline)]
pub use idem_store::guide::sql;
pub mod state_updates;
pub mod steps;
pub mod stores;
pub mod testing;
pub mod unknown_outcomes;
