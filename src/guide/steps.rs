//! Recovery points: [`step`](crate::step) in depth.
//!
//! A body that does several things (reserve stock, charge the card, print the
//! shipping label) and fails or dies half-way is the hard case: run it again
//! and the first things happen twice; refuse to run it and the order is
//! stuck. `idem::step` makes each of them a recovery point:
//!
//! ```
//! use idem::idempotent;
//! # use serde::{Deserialize, Serialize};
//! # #[derive(Serialize, Deserialize, Clone)] struct Order { id: String }
//! # #[derive(Serialize, Deserialize)] struct Reservation { parcels: Vec<String> }
//! # #[derive(Serialize, Deserialize)] struct Placed { charge: String, labels: Vec<String> }
//! # #[derive(Debug)] struct AppError;
//! # impl From<idem::Error> for AppError { fn from(_: idem::Error) -> Self { AppError } }
//! # mod warehouse {
//! #     pub async fn reserve(_: &super::Order) -> Result<super::Reservation, super::AppError> {
//! #         Ok(super::Reservation { parcels: vec!["p1".into()] })
//! #     }
//! # }
//! # mod payments {
//! #     pub async fn charge(_: &super::Order, key: &str) -> Result<String, super::AppError> { Ok(key.to_owned()) }
//! # }
//! # mod carrier {
//! #     pub async fn label(parcel: &String) -> Result<String, super::AppError> { Ok(parcel.clone()) }
//! # }
//!
//! #[idempotent(key = order.id, scope = "orders", wait = "10s")]
//! async fn place_order(order: Order) -> Result<Placed, AppError> {
//!     // A retry replays the finished steps and goes on from the first
//!     // unfinished one.
//!     let reservation = idem::step("reserve", || warehouse::reserve(&order)).await?;
//!     let charge = idem::step("charge", || async {
//!         // The same downstream key on every run of this step.
//!         let key = idem::child_key("charge").expect("inside an idempotent call");
//!         payments::charge(&order, &key).await
//!     })
//!     .await?;
//!     let mut labels = Vec::new();
//!     for (i, parcel) in reservation.parcels.iter().enumerate() {
//!         labels.push(idem::step(("label", i), || carrier::label(parcel)).await?);
//!     }
//!     Ok(Placed { charge, labels })
//! }
//! # #[tokio::main] async fn main() {
//! # idem::install(idem::Idempotency::new(idem::MemoryStore::new()));
//! # let placed = place_order(Order { id: "o-1".into() }).await.unwrap();
//! # assert_eq!(placed.labels, ["p1"]);
//! # }
//! ```
//!
//! - A step's `Ok` value is saved under the call before `step` returns it;
//!   its `Err` is not, so a retry runs that step again. When the call is
//!   retried (after a released error, a dropped future, a crash, a lease
//!   takeover), every finished step returns its saved value without running,
//!   and the body goes on at the first unfinished step. A completed call
//!   replays whole, as before: no step runs.
//! - The code between steps runs again on every retry: keep effects inside
//!   steps, and give steps the same names in the same situations. A name is
//!   any key part (`"charge"`, `("label", i)`); a name already used by a
//!   finished step of the same run is `Error::InvalidStep`, and so are a step
//!   inside a step of the same call, `idem::step` outside an idempotent body,
//!   and steps in a call on a store that cannot keep them (`Call::on`, a
//!   transaction's `tx_handle`: a step saved inside the caller's transaction
//!   would roll back with it; the transactional mode needs no recovery
//!   points), refused before the step runs. Never a panic.
//! - Steps compose: a library function that makes an idempotent call of its
//!   own, with steps of its own, may be called inside a step of another call.
//!   The inner call has its own key, `child_key`s and steps, and resumes them
//!   when the outer step runs again.
//! - A step that was in flight when the process died runs again, at most once
//!   more per crash, and sees the same `child_key`s: pass one to the
//!   downstream API so it deduplicates the second attempt.
//! - Saves are fenced by the call's claim: a holder whose lease ran out and
//!   was taken over gets `Error::LeaseLost` from its next step, and cannot
//!   overwrite the new holder's steps. A retry with another payload over
//!   saved steps is `Error::FingerprintMismatch`.
//! - Steps live `ttl` from their save (so never longer than a record
//!   completed after them) and outlive a released claim, which is what lets
//!   a retry resume. Values use the record codec and its `max_record_bytes`
//!   limit: keep them small (ids, not documents).
//! - A step whose value cannot be saved (over `max_record_bytes`, or its
//!   `Serialize` fails) is settled as not stored, as a whole call is: a
//!   marker is saved in its place, a `tracing` warning says so, and the
//!   attempt that ran it and every retry get
//!   `Error::Codec(CodecError::StepNotStored { step, reason })` at that step
//!   without running it again, until the steps expire with the `ttl` (or
//!   `forget`). The call cannot go past that step: a queue consumer that
//!   judges the handler's result with `Disposition::of_result` dead-letters
//!   it (`Reject`); `queue::process` sees a released error and retries, and
//!   each redelivery fails at the step without its effect. The size and
//!   `Serialize` are only known once the step's body made its value; a value
//!   type whose smallest record cannot fit `max_record_bytes` at all is
//!   refused (`InvalidStep`) before the body runs.
//!
//! **What they cost.** One round trip per step: a fenced write (Redis: one
//! script that checks the claim and writes a hash field in the record's hash
//! slot, so Redis Cluster routes both; PostgreSQL: one `INSERT … SELECT …
//! FOR SHARE` into `<table>_steps`; SQLite: one `INSERT … SELECT` into
//! `idem_steps`). Resuming costs nothing extra on the SQL stores: the
//! claim returns the saved steps in its own round trip (PostgreSQL: a
//! column of the claim statement; SQLite: a read only when the claim's
//! write says steps exist). On Redis a claim reads no steps, so that a
//! replay is one command; a claim that finds a released call's marker
//! takes it over by a script that reads them: resuming costs one more
//! round trip there. Counted on the wire by `integration/tests/all/round_trips.rs` for a
//! body of three steps:
//!
//! | call | round trips |
//! | --- | --- |
//! | fresh, three steps | 5 (claim, 3 saves, completion) |
//! | failing at the third step | 4 (claim, 2 saves, release) |
//! | its retry, resuming | 3 (claim with the 2 saved steps, 1 save, completion); Redis 4 |
//! | duplicate of the completed call | 1 |
//!
//! PostgreSQL and MySQL get the steps table with `migrate()`; SQLite
//! creates its `idem_steps` table when the file is opened.
//!
//! **Compared with hand-written phases and workflow engines.** Stripe's
//! engineers write "atomic phases" by hand: each phase is a database
//! transaction that also moves the idempotency key's `recovery_point`
//! column, and a retry jumps to the phase after the last recovery point.
//! `idem::step` is the same model for any annotated function, on any store,
//! without writing the state machine; unlike Stripe's phases, a step does
//! not commit your own database changes atomically with its recovery point
//! (for one transaction, use the transactional mode; for several, put each
//! database change in a step of its own and make it idempotent, e.g. keyed by
//! `child_key`). Durable execution engines (Temporal, Restate, DBOS) journal
//! every step too, but also resume a workflow by themselves after a crash,
//! sleep for days, wait for signals and version workflow code, at the price
//! of a runtime (or a server) that owns the workflow. Recovery points resume
//! only when the call is retried (by the client, the queue's redelivery, a
//! cron), and only for the record's `ttl`: use them for request-sized work
//! with several effects; use an engine when a workflow must finish with no
//! one retrying it.
//!
//! **Under SIGKILL.** `integration/examples/order_steps.rs` is an order
//! workflow (reserve → charge → ship) on SQLite (`cargo run -p
//! idem-integration --example order_steps`). Its chaos mode (`-- chaos 300
//! 6`, also `integration/tests/all/steps_chaos.rs`) runs a worker process over 300 orders,
//! four at a time, and kills it with SIGKILL 6 times, each after a random
//! number of effects and a few more milliseconds, restarting it each time;
//! the effects are rows in a second SQLite file, keyed by order, step and the
//! child key sent. Over ten runs (900 steps each): 4 to 16 steps per run
//! were in flight at a kill and ran twice, with the same child key both
//! times; once, a step was in flight at two kills in a row (in two workers)
//! and ran three times, once per kill; no step ran twice in one worker, and
//! no finished step ran again; 3 to 7 orders per run resumed between two
//! steps; every order then replayed its result without running anything
//! (about 7.5 s a run, debug build). The test asserts these rules, not the
//! counts.
