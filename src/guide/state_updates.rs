//! State updates: side effects only when the data changed
//! (`mismatch = "rerun"`).
//!
//! `PUT /orders/123/status {"status": "paid"}` is idempotent in theory:
//! the order ends paid however often it is sent. Its side effects are not.
//! Each call rewrites `update_time`, writes an audit row, publishes a
//! message and clears a cache, so a double click or a gateway's retry
//! doubles them. What the application wants: skip the update when the
//! data did not change, keep the side effects to real changes, and never
//! run two updates of one order at once.
//!
//! A key that names a request cannot say this: keyed by the order, a
//! second PUT with *new* data would be `FingerprintMismatch` forever; keyed
//! by a request key, nothing stops the duplicate that carries none. So
//! key the call by the **resource**, and let another payload rerun:
//!
//! ```
//! use idem::idempotent;
//! # use std::sync::atomic::{AtomicU32, Ordering};
//! # use serde::{Deserialize, Serialize};
//! # static MESSAGES: AtomicU32 = AtomicU32::new(0);
//! # #[derive(Serialize, Deserialize, Clone, Debug, PartialEq)] struct Order { id: u64, status: String, updated_at: u64 }
//! # #[derive(Debug)] struct AppError;
//! # impl From<idem::Error> for AppError { fn from(_: idem::Error) -> Self { AppError } }
//! # mod db { pub async fn set_status(id: u64, status: &str) -> Result<super::Order, super::AppError> {
//! #     Ok(super::Order { id, status: status.into(), updated_at: 1 }) } }
//! # mod mq { pub async fn publish(_: &super::Order) -> Result<(), super::AppError> {
//! #     super::MESSAGES.fetch_add(1, std::sync::atomic::Ordering::SeqCst); Ok(()) } }
//! # mod cache { pub async fn invalidate(_: u64) {} }
//!
//! #[idempotent(key = order_id, scope = "order-status", mismatch = "rerun", wait = "5s")]
//! async fn set_status(order_id: u64, status: String) -> Result<Order, AppError> {
//!     // Runs once per real change: the row and its `update_time`, the
//!     // message and the cache invalidation.
//!     let order = db::set_status(order_id, &status).await?;
//!     mq::publish(&order).await?;
//!     cache::invalidate(order_id).await;
//!     Ok(order)
//! }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! # idem::install(idem::Idempotency::new(idem::MemoryStore::new()));
//! set_status(123, "paid".into()).await.unwrap();     // runs: one message
//! set_status(123, "paid".into()).await.unwrap();     // replayed: nothing happens
//! set_status(123, "shipped".into()).await.unwrap();  // a change: runs, replaces the record
//! set_status(123, "paid".into()).await.unwrap();     // a change from "shipped": runs
//! assert_eq!(MESSAGES.load(Ordering::SeqCst), 3);
//! # }
//! ```
//!
//! # What each call gets
//!
//! | the key's state | same payload as the record | another payload |
//! | --- | --- | --- |
//! | free (or expired) | runs | runs |
//! | completed | replays the stored value | **runs; its record replaces the old one** |
//! | held by a running call | waits up to `wait`, then `InProgress` (409) | the same: waits its turn |
//! | a lapsed claim (its holder vanished) | takes it over (reconcile asked) | `FingerprintMismatch` (422) |
//! | a tombstone | `Expired` (410) | runs, replaces it |
//!
//! The comparison is with the **last completed** payload of the key, not
//! with every payload it ever saw: `paid`, `shipped`, `paid` runs three
//! times, since each is a change from the state before it.
//!
//! # One at a time
//!
//! The claim is the lock (the seeds' "幂等锁"): a call runs only while it
//! holds the key's claim, so two updates of one order never overlap,
//! whatever their payloads, and a call that finds the key held waits
//! (with `wait`) and then claims in turn. When the record is replaced,
//! the store does it in the claim's one atomic round trip (a PL/pgSQL
//! function, a MySQL procedure, a Lua script, one SQLite transaction):
//! a "forget, then claim" would leave a moment in which a stale duplicate
//! of the old payload claims the free key and runs again.
//!
//! # What the other rules mean here
//!
//! - **Fencing.** Unchanged: a holder whose lease ran out and was taken
//!   over gets `LeaseLost`, and its value is not stored.
//! - **Steps.** A retry of the same payload (after a released error, a
//!   drop, a crash) resumes from its first unfinished
//!   [`step`](crate::step), as ever. The steps of a replaced record are
//!   dropped with it: a new payload starts from its first step.
//! - **Reconcile and lapsed claims.** A claim whose holder vanished is
//!   evidence that its payload's effect may have happened, so only that
//!   payload takes it over (and asks its `reconcile`); another is refused
//!   until the vanished payload's retry settles the key or an operator
//!   `forget`s it. The same holds for a released call that saved steps.
//! - **Tombstones.** A late duplicate of the last payload is `Expired`;
//!   another payload is an update, and replaces the tombstone.
//! - **The local cache** ([`IdempotencyBuilder::local_cache`](crate::IdempotencyBuilder::local_cache))
//!   is skipped: another host may have replaced the record it would hold.
//!
//! # Without the attribute, and over HTTP
//!
//! The builder's [`Call::mismatch`](crate::Call::mismatch) with
//! [`Mismatch::Rerun`](crate::Mismatch::Rerun) is the same setting. The
//! axum layer keys the methods an application marks as state updates by
//! method, route, path and principal, with no `Idempotency-Key` header:
//! `IdempotencyLayer::state_updates([Method::PUT, Method::DELETE])`
//! (feature `axum`, `idem::http`).
//!
//! Every store passes the conformance cases of state updates
//! (`idem_conformance::cases::a_rerun_…`,
//! `concurrent_updates_run_one_at_a_time`). A store of your own replaces
//! the record when the claim asks with
//! [`Claim::rerun`](crate::store::Claim::rerun); one that does not fails
//! closed, and the caller gets `FingerprintMismatch`.
