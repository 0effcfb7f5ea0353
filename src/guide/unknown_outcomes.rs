//! Unknown outcomes: a holder that vanished mid-effect (`reconcile`), and
//! a duplicate that comes after the record expired (tombstones).
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
//! | `tombstone` | after the TTL, a late duplicate with the same payload gets `Error::Expired` (410, queue `Ack`) and does not run, until the tombstone ends | replay the value (it is gone), or outlive the tombstone: after it the key runs as new |
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
//! The chaos test `integration/tests/all/reconcile_chaos.rs` measures the
//! difference. A worker charges 150 payments through a fake provider on
//! loopback that books every charge it receives (it does not deduplicate)
//! and answers lookups by reference. The worker is SIGKILLed 6 times and
//! restarted, with 300 ms leases, until every payment is done; 3 of the
//! kills land in the ambiguous window on purpose in every run (the
//! provider booked the charge and holds its answer), 3 at random moments.
//! Without `reconcile`, 2–9 payments per run were booked twice on
//! PostgreSQL and 4–13 on SQLite (at least one extra booking per kill in
//! the window; a kill can find up to four payments between booking and
//! completion). With the reconcile above, every payment was booked exactly
//! once, in 40 runs of 40 on each store, the reconcile answering `Some`
//! 3–14 times per run. Run it with `cargo test -p idem-integration
//! --all-features --test all reconcile_chaos::` (about 3 s).
//!
//! `Ok(Some(v))` is stored and returned as if the body ran (the body does
//! not run); `Ok(None)` runs the body; `Err` goes through the error policy,
//! but a takeover whose reconcile did not answer (it failed, or the call
//! was dropped while it ran) is never released: a released key would be
//! claimed fresh and run the body without asking. Its claim lapses
//! instead, so the next call takes it over and asks again. A takeover is
//! only by a call of the vanished holder's payload: another payload under
//! its key is `FingerprintMismatch`, as while the holder's lease ran. A
//! fresh key, a
//! released claim, an expired record or a replay never reconcile. Steps and
//! reconcile: the reconcile runs first, then, if it answers `None`, the body
//! resumes after the steps the holder finished; a step interrupted mid-way
//! has no reconcile of its own, so a call whose risky effect is a step should
//! answer for that effect in its call-level reconcile. The store must tell a
//! takeover from a free key (`ClaimOutcome::Won::took_over`): every store
//! does; on Redis a vanished holder's claim stays a day after its lease
//! (a retry later than that runs as a fresh call, without a reconcile).
//!
//! # Tombstones
//!
//! A record lives its TTL; a duplicate after that runs as a new call (a
//! mobile client back online after a day, a queue replayed from last
//! week). `tombstone = "30d"` on the attribute, or
//! [`Call::tombstone`](crate::Call::tombstone) and
//! [`IdempotencyLayer::tombstone`](crate::http::IdempotencyLayer::tombstone),
//! keeps a marker of the completed call (its fingerprint and when its
//! record expired; never its value) for that long after the TTL:
//!
//! - the same payload gets `Error::Expired { expired_ago, .. }`, and the
//!   body does not run (HTTP 410 [`expired`](crate::http#expired); a queue
//!   consumer acknowledges it);
//! - another payload is still `Error::FingerprintMismatch` (422);
//! - once the tombstone has passed, the key is free.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use std::time::Duration;
//! let idem = idem::Idempotency::new(idem::MemoryStore::new());
//! let pay = |amount: u32| {
//!     idem.call("payments", "order-1")
//!         .ttl(Duration::from_millis(20))
//!         .tombstone(Duration::from_secs(30 * 24 * 3600))
//!         .fingerprint(&amount)
//!         .run(move || async move { Ok::<_, idem::Error>(amount) })
//! };
//! assert_eq!(pay(1200).await.unwrap(), 1200);
//! tokio::time::sleep(Duration::from_millis(50)).await;
//! assert!(matches!(pay(1200).await, Err(idem::Error::Expired { .. })));
//! assert!(matches!(pay(999).await, Err(idem::Error::FingerprintMismatch { .. })));
//! # }
//! ```
//!
//! Every store keeps them. Memory keeps the entry without its value. The
//! SQL stores keep the row: a nullable `tombstone_until` column, judged by the server's clock in the claim's one
//! statement; `purge_expired` (and `idem purge`) drops the value of a row
//! in its tombstone and deletes it once the tombstone has passed, and
//! `idem list`/`inspect`/`stats` show it as `tombstone`. Redis
//! keeps a marker key of its own in the record's hash slot (`PX` = TTL +
//! tombstone), written by the completion: only calls that ask for a
//! tombstone pay for it (their claim and completion are scripts; other
//! calls keep the native commands); `idem list`/`inspect`/`stats` show a
//! marker whose record has expired as `tombstone`, and Redis drops it when
//! its `PX` runs out (`idem purge` has nothing to do there). A call that
//! stops asking for a tombstone on Redis does not look for one written
//! before. What a tombstone costs is measured in BENCHMARKS.md.
