//! `#[idempotent]` in depth.
//!
//! The options (`key`, `scope`, `ttl`, `lease`, `wait`, `tombstone`,
//! `store`, `fingerprint`, `skip`, `errors`, `detach`, `version`,
//! `reconcile`, `crate`), their forms and defaults are in one table, on the
//! attribute itself: [`idempotent`](crate::idempotent#options). Two of them
//! are for [unknown outcomes](super::unknown_outcomes):
//!
//! - `tombstone = "30d"`: after the `ttl`, a marker (the fingerprint, no
//!   value) stays that long, so a very late duplicate gets
//!   [`Error::Expired`](crate::Error::Expired) (HTTP 410, queue `Ack`)
//!   instead of running again.
//! - `reconcile = path`: on a takeover of a vanished holder, and only then,
//!   an async fn taking the parameters by reference and returning
//!   `Result<Option<T>, E>` says whether the effect happened: `Ok(Some(v))`
//!   is stored and returned without running the body, `Ok(None)` runs it.
//!
//! idem's own errors, with their HTTP statuses, are on
//! [`Error`](crate::Error).
//!
//! # Rules you can rely on
//!
//! - Key and fingerprint are computed from the arguments **before** the body
//!   runs, so a body that mutates its input cannot change which record it
//!   completes.
//! - Every `Ok` value is stored and replayed exactly, including `()`,
//!   `None`, `0`, `false`, empty collections, `Some(None)` (a PATCH's
//!   "cleared"), NaN (its sign and payload bits too) and infinities, and
//!   maps whose keys are not strings (see
//!   [what a record holds](super::records#what-a-record-holds)). Two kinds
//!   of value cannot replay, and are refused before they are stored (the
//!   key is settled as below): one nested more than 256 levels deep as
//!   JSON, and a `u128`/`i128` inside `#[serde(flatten)]` or an untagged or
//!   internally tagged enum.
//! - A derived key or fingerprint is a streaming SHA-256 over the serde form
//!   of the values: no intermediate JSON, parts length-prefixed (`("ab",
//!   "c")` and `("a", "bc")` differ), map entries combined so a `HashMap`'s
//!   order cannot change the result ([`key`](crate::key),
//!   [`fingerprint`](crate::fingerprint)).
//! - Records survive deploys: see [`records`](super::records).
//! - A call whose future is dropped while its body runs (client gone,
//!   timeout) releases its claim, so a retry need not wait out the lease;
//!   with `detach` the body is not dropped at all but runs on and completes.
//! - The lease is renewed while the body runs, from a task the handle
//!   keeps on the runtime the call runs on, so even a body that blocks its
//!   thread keeps it (the body itself is not spawned: no `'static` bound),
//!   and a handle used from several runtimes (a `static` across
//!   `#[tokio::test]`s, one runtime after another) renews on each.
//! - A result that cannot be stored after the body ran (larger than the
//!   handle's `max_record_bytes`, not encodable, or one that would not
//!   replay: [`CodecError::TooDeep`](crate::CodecError::TooDeep),
//!   [`CodecError::Unreplayable`](crate::CodecError::Unreplayable)) still
//!   settles the key:
//!   the caller gets its value, a `tracing` warning says so, and every
//!   duplicate until the TTL ends gets
//!   [`CodecError::NotStored`](crate::CodecError::NotStored) instead of
//!   running the body again (a queue consumer acks it; HTTP answers a 500
//!   [`not-stored`](crate::http#not-stored) problem).
//! - Fail closed: the body never runs without a won claim. If the store
//!   fails *after* the body ran (the completion cannot be written), the
//!   call answers `Error::Store` and the claim is left to expire with its
//!   lease rather than released, so a retry cannot run the body again at
//!   once.
//!
//! # When the caller gives up
//!
//! The most common reason for a retry is a caller that timed out. What
//! happens to the first call depends on how it runs:
//!
//! | the first call | its caller gives up mid-body | the retry |
//! | --- | --- | --- |
//! | plain `#[idempotent]` / [`Call::run`](crate::Call::run) | the body is dropped at its next `.await`; the claim is released at once | runs the body again, from the start: whatever the first run did before the drop (a charge sent) may happen twice |
//! | `#[idempotent(detach)]` / [`Call::detach`](crate::Call::detach) | the body runs on, on its own task, to the end; its result is stored | while it runs: waits (per `wait`) or gets `InProgress`; then the stored result, the body not run again |
//! | behind [`IdempotencyLayer`](crate::http::IdempotencyLayer) | always detached: the handler runs to completion even when the client disconnects | 409 with `Retry-After` (or the answer, with `.wait(…)`), then the replay |
//! | any of these, the process crashes | nothing runs on | runs again once the lease (30 s by default) ends |
//!
//! Use `detach` whenever the body has an effect outside the store (a
//! charge, an email, a message) and the caller may go away: a dropped body
//! can stop after the effect and before the record. For the crash row,
//! which no library can prevent, pass [`child_key`](crate::child_key) as
//! the downstream service's own idempotency key: the rerun sends it the
//! same key, and the downstream service answers the first effect instead
//! of repeating it.
//!
//! ```
//! use std::sync::Arc;
//! use idem::idempotent;
//! # use serde::{Deserialize, Serialize};
//! # #[derive(Serialize, Deserialize)] struct Order { id: String }
//! # #[derive(Serialize, Deserialize)] struct Shipment(String);
//! # struct Carrier;
//! # impl Carrier {
//! #     async fn book(&self, order: &Order, key: &str) -> Result<Shipment, ShipError> {
//! #         Ok(Shipment(format!("{}:{key}", order.id)))
//! #     }
//! # }
//! # struct ShipError;
//! # impl From<idem::Error> for ShipError { fn from(_: idem::Error) -> Self { ShipError } }
//!
//! #[idempotent(key = order.id, scope = "shipping", skip(carrier), detach)]
//! async fn ship(order: Order, carrier: Arc<Carrier>) -> Result<Shipment, ShipError> {
//!     let key = idem::child_key("carrier").expect("inside an idempotent call");
//!     carrier.book(&order, &key).await
//! }
//! ```
//!
//! On shutdown, wait for detached calls still running (the layer's requests
//! included) before the process exits, up to a deadline, with
//! [`Idempotency::drain`](crate::Idempotency::drain) on a clone of the
//! handle you gave away (the README's recipe shows it after
//! `axum::serve`):
//!
//! ```
//! # use std::time::Duration;
//! # #[tokio::main] async fn main() {
//! let idem = idem::Idempotency::new(idem::MemoryStore::new());
//! idem::install(idem.clone());
//! // … serve until asked to stop …
//! let still_running = idem.drain(Duration::from_secs(30)).await; // 0: all stored
//! # assert_eq!(still_running, 0);
//! # }
//! ```
//!
//! # Traits, `#[instrument]` and other attributes
//!
//! - **Traits.** `#[idempotent]` works on methods of trait impls written
//!   with native `async fn` (Rust 1.75+), and on methods of impls written
//!   with `#[async_trait]` or `#[tonic::async_trait]` (a tonic service's
//!   methods): that macro runs first and rewrites the method into a fn
//!   returning `Pin<Box<dyn Future<Output = T> + Send + 'async_trait>>`
//!   whose body is `Box::pin(async move { … })`; `#[idempotent]`
//!   recognises that shape (as tracing's `#[instrument]` does) and wraps
//!   the block inside it, with the same options and the same compile-time
//!   checks, at the same tokens, as on a native `async fn`. Write it on the
//!   method, under the impl's `#[async_trait]`:
//!
//!   ```
//!   use async_trait::async_trait;
//!   use idem::{Idempotency, MemoryStore, idempotent};
//!
//!   #[async_trait]
//!   trait Billing {
//!       async fn bill(&self, order: String) -> Result<u64, idem::Error>;
//!   }
//!
//!   struct Biller {
//!       idem: Idempotency,
//!   }
//!
//!   #[async_trait]
//!   impl Billing for Biller {
//!       #[idempotent(store = self.idem, key = order)]
//!       async fn bill(&self, order: String) -> Result<u64, idem::Error> {
//!           Ok(order.len() as u64) // runs once per order
//!       }
//!   }
//!   # #[tokio::main] async fn main() {
//!   # let biller = Biller { idem: Idempotency::new(MemoryStore::new()) };
//!   # assert_eq!(biller.bill("o-1".into()).await.unwrap(), 3);
//!   # }
//!   ```
//!
//!   A tonic service method itself returns
//!   `Result<tonic::Response<M>, tonic::Status>`, neither of them serde: a
//!   return type spelled that way (`…Response<M>`, `…Status`) is stored
//!   through `idem::grpc` (feature `tonic`) as the prost-encoded message
//!   and its metadata, statuses stored or released by code as the gRPC
//!   layer does; see [`grpc`](crate::grpc#guide) for an example. A type of
//!   your own named `Response` with an error named `Status` is taken the
//!   same way: rename one of them (or alias it) to keep the serde path.
//! - **`#[instrument]`** goes *below* `#[idempotent]`: attributes expand
//!   top first, so the lower one wraps the other's output, and idem's
//!   claim, replay and its events then run inside your span. Above it, the
//!   span covers only the body, and a replay logs outside it.
//!
//!   ```
//!   # use idem::idempotent;
//!   # use serde::{Deserialize, Serialize};
//!   # #[derive(Debug, Serialize, Deserialize)] struct Order { id: String }
//!   # #[derive(Serialize, Deserialize)] struct Bill;
//!   # struct PgPool;
//!   # struct AppError;
//!   # impl From<idem::Error> for AppError { fn from(_: idem::Error) -> Self { AppError } }
//!   #[idempotent(key = order.id, skip(pool))]
//!   #[tracing::instrument(skip(pool))]
//!   async fn bill(pool: &PgPool, order: Order) -> Result<Bill, AppError> { todo!() }
//!   ```
//! - **`#[cfg]` on parameters** is honoured: a parameter compiled out is
//!   not hashed into the derived key.
//! - **Lints**: the expansion keeps the fn the user's item; an annotated fn
//!   nothing calls still warns `dead_code`.
//!
//! # Compile-time checks
//!
//! Misuse of `#[idempotent]` is a compile error, not a surprise in
//! production. Each error points at your own token (the type, the
//! parameter, the literal, the option name) and says what to do; all
//! mistakes in one attribute are reported together, and each unmet
//! requirement is one error (a type lacking both `Serialize` and
//! `Deserialize` gets two). Each case below is pinned by a trybuild
//! snapshot in `ui-tests/tests/ui/fail/`.
//!
//! | mistake | where the error points | what it says |
//! | --- | --- | --- |
//! | `#[idempotent]` on a fn that is not `async` | `fn` | write `async fn` |
//! | `#[idempotent]` on a struct, impl or other item | the item's keyword | it goes on an `async fn` that returns a `Result` |
//! | no return type | after the parameters | return `Result<T, E>`, e.g. `-> Result<(), idem::Error>` |
//! | return type not a `Result` (aliases such as `anyhow::Result<T>` or `type Result<T> = …` are fine) | the return type | must return `Result<T, E>` |
//! | `Ok` type not `Serialize` | the `Ok` type | cannot be stored; derive `Serialize` and `Deserialize` |
//! | `Ok` type not `DeserializeOwned` | the `Ok` type | cannot be replayed; derive `Deserialize` |
//! | `Ok` type borrows (`&str`, `Cow<'a, str>`) | the reference or the lifetime | a replayed value is decoded from the store and cannot borrow; return an owned type |
//! | error type without `From<idem::Error>` | the error type | add `impl From<idem::Error>` (or a `#[from]` variant), or return `idem::Error` / `anyhow::Error` |
//! | `errors = "replay"` or `errors = path` with an error type not `Serialize` / `DeserializeOwned` | the `errors` value | the policy stores the error; derive them, or leave `errors` out |
//! | `errors = "retry"` (unknown policy) | the literal | the policies are `"release"`, `"replay"` or a `fn(&E) -> bool` |
//! | `errors = path` to a fn of another signature | the path | expected `fn(&E) -> bool` |
//! | unknown option (`tll = "1h"`) | the option name | did you mean `ttl`? and the list of options |
//! | an option given twice | the second one, with a note at the first | give each option at most once |
//! | malformed duration (`"24x"`, `""`, `"-1s"`, `"10"`) | the literal | write a number and a unit: `"500ms"`, `"30s"`, `"15m"`, `"24h"`, `"7d"`, `"1h30m"` |
//! | `ttl = "0s"` or `lease = "0s"` | the literal | must be longer than zero (given as expressions, such as `ttl = Duration::ZERO`, they are checked when the call is made: `Error::InvalidOption` before any claim; the builder too) |
//! | literal `lease` longer than literal `ttl` (or than the default 24h) | the `lease` literal | a claim may not outlive the record it guards |
//! | no `key` (or no `fingerprint`) and a parameter that is not `Serialize` | the parameter | names it; leave it out with `skip(name)`, or give `key = …` / `fingerprint = …` |
//! | a destructured parameter with a derived key or fingerprint | the pattern | bind it to a name, or give `key` and `fingerprint` |
//! | `skip(x)` naming no parameter | `x` | lists the fn's parameters |
//! | `key = expr` or `scope = expr` not an `idem::KeyPart` | the expression | keys are strings, integers, byte slices, `Uuid`, references and tuples of these |
//! | `fingerprint = expr` not `Serialize` | the expression | fingerprint a serializable value, or `fingerprint = false` |
//! | `fingerprint = true` | the literal | `true` is the default; give an expression or `false` |
//! | `store = expr` not an `idem::Idempotency` nor something that derefs to one | the expression | pass an `Idempotency`, `&Idempotency`, `Arc<Idempotency>` or a `static` `LazyLock<Idempotency>` |
//! | `crate = …` not a path | the value | e.g. `crate = ::my_facade::idem` |
//! | no `key` and nothing to hash (only `&self`, or every parameter skipped): every call would share one key | the fn name | give `key = …` (`key = self.id`), or a constant (`key = "singleton"`) if one result for all calls is meant |
//! | `#[idempotent]` under an `#[async_trait]` older than 0.1.50, whose boxed future has another shape | `async` | update async-trait, or annotate an inherent `async fn` and call it from the trait method |
//! | `detach` with a borrowed parameter (`&str`, `&self`, `Vec<&T>`; `&'static` is fine) | the reference or lifetime in that parameter | the body runs on after the caller is gone and cannot borrow; take it owned (`String`, `Arc<T>`, `self: Arc<Self>`) or remove `detach` |
//!
//! Type errors point at the first token of a multi-token `Ok` type (`Vec`
//! in `Vec<Receipt>`). These checks hold in generic fns and in `impl`
//! blocks: they are calls inside the generated body, not module-level
//! assertions. A generic `Ok` type or parameter needs the matching bound
//! on the fn (`T: Serialize`).
//!
//! Supported forms, each pinned by a test in `ui-tests/tests/ui/pass/`
//! that compiles and runs, and by `integration/tests/all/macro_forms.rs`: free `async fn`;
//! methods taking `&self`, `&mut self` and `self: Arc<Self>`; generic fns;
//! `impl Trait` parameters left out with `skip`; methods of trait impls;
//! `anyhow::Result<T>` and a crate's own `Result` alias; `crate = path`;
//! every option at once; every parameter skipped with an explicit `key`;
//! `detach` with owned parameters and `self: Arc<Self>`.
//!
//! # Without the macro
//!
//! The attribute expands to the builder of
//! [`Idempotency::call`](crate::Idempotency::call); both behave the same.
//!
//! ```
//! # use std::time::Duration;
//! # use serde::{Deserialize, Serialize};
//! # #[derive(Serialize, Deserialize)] struct ChargeRequest { amount_cents: u64 }
//! # #[derive(Serialize, Deserialize)] struct Receipt { charge_id: u64 }
//! # #[derive(Debug)] struct AppError;
//! # impl From<idem::Error> for AppError { fn from(_: idem::Error) -> Self { AppError } }
//! # async fn charge_card(p: &ChargeRequest) -> Result<Receipt, AppError> { Ok(Receipt { charge_id: p.amount_cents }) }
//! # #[tokio::main] async fn main() {
//! # let key = "order-1"; let payload = ChargeRequest { amount_cents: 1200 };
//! let idem = idem::Idempotency::new(idem::MemoryStore::new());   // Clone, cheap
//! idem::install(idem.clone());                                   // the default for #[idempotent]
//! let out: Result<Receipt, AppError> = idem
//!     .call("payments", &key)                   // scope, key
//!     .ttl(Duration::from_secs(86400))
//!     .lease(Duration::from_secs(30))
//!     .wait(Duration::ZERO)
//!     .fingerprint(&payload)
//!     .run(|| async { charge_card(&payload).await })
//!     .await;
//! # assert!(out.is_ok());
//! # }
//! ```
//!
//! [`run_reported`](crate::Call::run_reported) also tells whether the
//! value was replayed (for HTTP's `Idempotent-Replayed` header).
//! `.errors(idem::replay_errors())` and
//! `.errors(idem::replay_errors_if(|e: &AppError| e.is_final()))` choose the
//! error policy ([`Call::errors`](crate::Call::errors)). Inside a running
//! body, [`child_key`](crate::child_key) returns a key derived from the
//! call's scope and key, to pass to a downstream API, so a retried call
//! sends the same downstream key again.
