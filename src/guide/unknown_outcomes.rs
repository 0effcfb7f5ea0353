//! Unknown outcomes: a holder that vanished mid-effect, and `reconcile`.
//!
//! A holder can call the payment provider and vanish (killed, partitioned,
//! its lease lost) before it stores the result. The next caller takes over
//! the claim and cannot know whether the effect happened. What each tool
//! guarantees there:
//!
//! | tool | guarantees | does not |
//! | --- | --- | --- |
//! | `child_key(name)` | every attempt of a call sends the downstream the same key | help when the downstream does not deduplicate by that key |
//! | `idem::step` | a finished step never runs again; the body resumes after it | cover a step interrupted mid-way: it runs again |
//! | transactional mode (PostgreSQL) | effects in the same database commit with the record, or roll back with it | reach effects outside that database |
//! | `reconcile` | on a takeover of a vanished holder, and only then, asks you whether the effect happened, before the body runs again | know anything itself: it is as good as the downstream's answer |
//!
//! `reconcile` is a fn taking the parameters by reference and returning
//! `Result<Option<T>, E>` (`reconcile = path` on the attribute,
//! [`Call::reconcile`](crate::Call::reconcile)`(|| async { … })` on the builder). It runs inside the
//! call (its lease renewed, `child_key` answering the holder's key), so it
//! can ask the provider "is there a charge with reference R?":
//!
//! ```
//! use idem::idempotent;
//! # use serde::{Deserialize, Serialize};
//! # #[derive(Serialize, Deserialize)] struct Order { id: String }
//! # #[derive(Serialize, Deserialize)] struct Receipt { charge: String }
//! # #[derive(Debug)] struct PayError;
//! # impl From<idem::Error> for PayError { fn from(_: idem::Error) -> Self { PayError } }
//! # mod provider {
//! #     use super::*;
//! #     pub async fn find_charge(_: &str) -> Result<Option<Receipt>, PayError> { Ok(None) }
//! #     pub async fn charge(_: &Order, reference: &str) -> Result<Receipt, PayError> {
//! #         Ok(Receipt { charge: reference.to_owned() })
//! #     }
//! # }
//!
//! async fn booked(order: &Order) -> Result<Option<Receipt>, PayError> {
//!     let reference = idem::child_key("charge").expect("inside the call");
//!     provider::find_charge(&reference).await // Some(receipt) if it was booked
//! }
//!
//! #[idempotent(key = order.id, scope = "payments", reconcile = booked)]
//! async fn charge(order: Order) -> Result<Receipt, PayError> {
//!     provider::charge(&order, &idem::child_key("charge").unwrap()).await
//! }
//! # #[tokio::main] async fn main() {
//! # idem::install(idem::Idempotency::new(idem::MemoryStore::new()));
//! # charge(Order { id: "o-1".into() }).await.unwrap();
//! # }
//! ```
//!
//! `Ok(Some(v))` is stored and returned as if the body ran (the body does
//! not run); `Ok(None)` runs the body; `Err` goes through the error policy
//! (released by default, so the next call asks again). A fresh key, a
//! released claim, an expired record or a replay never reconcile. Steps and
//! reconcile: the reconcile runs first, then, if it answers `None`, the body
//! resumes after the steps the holder finished; a step interrupted mid-way
//! has no reconcile of its own, so a call whose risky effect is a step should
//! answer for that effect in its call-level reconcile. The store must tell a
//! takeover from a free key (`ClaimOutcome::Won::took_over`): every store
//! does; on Redis a vanished holder's claim stays a day after its lease
//! (a retry later than that runs as a fresh call, without a reconcile).
//!
//! Not built yet: tombstones (SPEC §13: a late duplicate after the TTL gets
//! `Error::Expired` instead of running again). Until then a duplicate that
//! arrives after the record's TTL runs the body as a new call.
