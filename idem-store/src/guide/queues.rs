//! Queue consumers in depth: keys, dispositions, heartbeats, crashes
//! (`idem::guide::queues`, feature `postgres` of idemkit).
//!
//! Brokers deliver at least once: a consumer killed before its ack, an ack
//! lost on the way, a producer retrying a publish after the broker's dedupe
//! window. Make the handler idempotent and **key it by the message's business
//! id** (the order id, the payment id), never by the broker's delivery or
//! message id: a republished copy has a new message id but the same order.
//! [`idem::queue`](idem_core::queue) says which
//! [`Disposition`](idem_core::queue::Disposition) each outcome gets and the three
//! ways to ask for it; this page shows a JetStream worker on PostgreSQL's
//! [transactional mode](super::sql#transactional-mode-the-effect-and-the-record-commit-together)
//! and what it did under SIGKILL.
//!
//! ```no_run
//! use idem::idempotent;
//! use idem::postgres::TxHandle;
//! use idem::queue::{AsIdemError, Disposition};
//! # use serde::{Deserialize, Serialize};
//! # #[derive(Serialize, Deserialize)] struct OrderPlaced { order_id: String, amount_cents: i64 }
//! # #[derive(Serialize, Deserialize)] struct Billed;
//! # impl Billed { fn of(_: &OrderPlaced) -> Self { Billed } }
//! # enum BillingError { Idem(idem::Error), Db(sqlx::Error) }
//! # impl From<idem::Error> for BillingError { fn from(e: idem::Error) -> Self { BillingError::Idem(e) } }
//! # impl AsIdemError for BillingError {
//! #     fn as_idem_error(&self) -> Option<&idem::Error> {
//! #         match self { BillingError::Idem(e) => Some(e), BillingError::Db(_) => None }
//! #     }
//! # }
//! # enum AckKind { Nak(Option<std::time::Duration>), Term } // async_nats::jetstream::AckKind
//! # struct Message; // async_nats::jetstream::Message
//! # type BoxError = Box<dyn std::error::Error + Send + Sync>;
//! # impl Message {
//! #     async fn double_ack(&self) -> Result<(), BoxError> { Ok(()) }
//! #     async fn ack_with(&self, _: AckKind) -> Result<(), BoxError> { Ok(()) }
//! # }
//!
//! #[idempotent(key = msg.order_id, scope = "billing", fingerprint = msg, store = tx)]
//! async fn bill(tx: &TxHandle, msg: &OrderPlaced) -> Result<Billed, BillingError> {
//!     sqlx::query("INSERT INTO billing_effects (order_id, amount_cents) VALUES ($1, $2)")
//!         .bind(&msg.order_id)
//!         .bind(msg.amount_cents)
//!         .execute(&mut *tx.conn().await)
//!         .await
//!         .map_err(BillingError::Db)?;
//!     Ok(Billed::of(msg))
//! }
//!
//! // For each message:
//! # async fn handle(store: idem::PostgresStore, pool: sqlx::PgPool, msg: OrderPlaced, message: Message) -> Result<(), BoxError> {
//! let tx = store.tx_handle(pool.begin().await?);
//! let out = bill(&tx, &msg).await;
//! match &out {
//!     Ok(_) => tx.commit().await?,
//!     Err(_) => tx.rollback().await?,
//! }
//! match Disposition::of_result(&out, |_| false) { // errors = "release": no error is stored
//!     Disposition::Ack => message.double_ack().await?,
//!     Disposition::Retry { after } => message.ack_with(AckKind::Nak(Some(after))).await?,
//!     Disposition::Reject => message.ack_with(AckKind::Term).await?,
//! }
//! # Ok(()) }
//! ```
//!
//! The second argument of [`Disposition::of_result`](idem_core::queue::Disposition::of_result)
//! is the function's `errors` policy: `|_| false` for `"release"` (the
//! default), `|_| true` for `"replay"`, or the predicate given as
//! `errors = path` (an annotated fn returns only its result).
//!
//! # What each disposition means to a broker
//!
//! | `Disposition` | JetStream | RabbitMQ |
//! | --- | --- | --- |
//! | `Ack` | ack | `basic.ack` |
//! | `Retry { after }` | `AckKind::Nak(Some(after))` | wait `after`, then `basic.nack` with requeue (AMQP has no delayed nack) |
//! | `Reject` | `AckKind::Term` | `basic.reject` without requeue (to the queue's dead-letter exchange) |
//!
//! `Retry` is for outcomes that a later delivery can change: the handler
//! failed and released its claim, the store was unreachable (the body did not
//! run), or another worker holds the key right now (`after` is the time left
//! on its lease). `Reject` is for outcomes that no redelivery can change: the
//! same order id arrived with another payload, which is a producer bug to
//! look at, not a message to loop on.
//!
//! # Long handlers keep their message
//!
//! While the body runs, the call renews its claim's lease in the same task.
//! `idem::queue::with_heartbeat(future, every, beat)` does the same for the
//! broker: it polls the handler and, every `every`, awaits `beat()`, in which
//! the JetStream worker sends an in-progress ack (`AckKind::Progress`), so a
//! handler slower than the consumer's `ack_wait` is not redelivered to
//! another worker meanwhile. Pick `every` well under `ack_wait` (the example
//! uses a third). RabbitMQ has no such ack; its delivery deadline
//! (`consumer_timeout`, 30 min by default) is per channel and rarely matters.
//!
//! # Why the transactional mode matters for crashes
//!
//! Without it, the effect (an insert, a charge) and the completion of the
//! record are two steps. A worker killed between them leaves an effect with
//! no record; its claim expires with the lease, the broker redelivers, and
//! the handler does the effect again. When the effect is a write to the same
//! PostgreSQL database, run the handler on `PostgresStore::tx_handle(tx)`
//! (`store = tx` in the attribute, the effect through `tx.conn()`), or on
//! MySQL and MariaDB on `MySqlStore::tx_handle(tx)` (`idem::mysql::TxHandle`,
//! the same methods): the claim, the effect and the record are one
//! transaction. Killed before the commit, none of them exists and the
//! redelivery bills at once (no lease to wait out); after it, all of them do
//! and the redelivery replays. For effects in
//! another system, pass `idem::child_key("…")` as that system's own
//! idempotency key, so a redelivered handler sends it the same key again.
//!
//! # Examples and figures
//!
//! `integration/examples/jetstream_worker.rs` is a billing consumer on NATS JetStream
//! (`cargo run -p idem-integration --example jetstream_worker`; a durable pull
//! consumer on the stream `ORDERS`, subject `orders.placed`, created if
//! absent; `NATS_URL`, `DATABASE_URL`, `IDEM_STREAM`, `IDEM_SUBJECT`,
//! `IDEM_CONSUMER`, `IDEM_MODE=plain` in its header). `integration/examples/rabbitmq_worker.rs`
//! runs the same handler (shared in `integration/examples/billing/`) behind a RabbitMQ
//! queue with manual acks. Both run until killed; run as many copies as you
//! like.
//!
//! `integration/tests/all/queue_jetstream.rs` runs the JetStream worker under chaos: 2,000
//! orders published, 10% of them twice with different `Nats-Msg-Id`s (a
//! producer retry past the dedupe window), plus one poison message (a seen
//! order id with another amount); two worker processes, one SIGKILLed 4 times
//! mid-way (at 1/6, 2/6, 3/6 and 4/6 of the stream acked) and restarted; then,
//! once the consumer has nothing pending, it counts the rows of
//! `billing_effects`, a table with no unique constraint:
//!
//! | mode | runs | messages published | kills per run | deliveries by the broker (redeliveries) | effect rows | duplicate effects |
//! | --- | ---: | ---: | ---: | ---: | ---: | ---: |
//! | transactional | 6 | 2,201 | 4 | 2,397–2,893 (196–692) | 2,000 | **0** in every run |
//! | plain (effect, then record) | 7 | 2,201 | 4 | 2,357–2,879 (156–678) | 2,000–2,001 | 1 in 3 runs, 0 in 4: 3 in 28 kills |
//!
//! Each run publishes 2,201 messages for 2,000 orders: 200 producer
//! duplicates and the poison message. So the workers see 356 to 892
//! duplicate deliveries per run (the 200 republished copies, plus the
//! redeliveries of messages a killed worker had fetched but not acked); in
//! transactional mode the effects table ends with exactly one row per order,
//! every run.
//!
//! The poison message is terminated on its first delivery and has no effect
//! (`a_poison_message_is_terminated_not_retried`). A handler four times slower
//! than a 1 s `ack_wait` keeps its message through in-progress acks and its
//! claim through lease renewal (`a_slow_handler_keeps_its_message_and_its_claim`).
//! `integration/tests/all/queue_rabbitmq.rs` publishes 300 orders to RabbitMQ, 10% twice,
//! kills the worker once mid-way: 300 effect rows, 0 duplicates.
//!
//! In plain mode the window between the effect and the completion is one
//! statement long, so a kill lands in it rarely, but it does land: the test
//! asserts only what is guaranteed (every order billed, at most one extra
//! effect per kill) and prints what happened. Use the transactional mode, or
//! `child_key`, when a double effect matters.
