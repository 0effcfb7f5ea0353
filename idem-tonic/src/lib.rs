//! Idempotent gRPC for tonic (SPEC §14), re-exported by
//! [idemkit](https://docs.rs/idemkit) as `idem::grpc` (feature `tonic`).
//!
//! - **Server.** [`IdempotencyLayer`] is a tower layer for a tonic server
//!   (`Server::builder().layer(…)`): a unary call carrying an
//!   `idempotency-key` metadata entry runs its handler once per key, scope
//!   (the full method path and the caller's principal, a hash of its
//!   `authorization` metadata) and request message; the answer (status
//!   code and message, response message, allow-listed metadata and
//!   trailers) is stored and replayed to duplicates with
//!   `idempotent-replayed: true`. `OK` and the deterministic errors are
//!   stored; `UNAVAILABLE`, `INTERNAL` and the other transient codes
//!   release the key, so a retry runs. idem's own answers carry a
//!   `google.rpc.ErrorInfo` detail (domain `idemkit`): a concurrent
//!   duplicate gets `ABORTED` with a `google.rpc.RetryInfo` delay, the same
//!   key with another message `INVALID_ARGUMENT` (reason
//!   `IDEMPOTENCY_KEY_REUSED`), a missing or malformed key
//!   `INVALID_ARGUMENT`, a tombstoned key `FAILED_PRECONDITION`, a store
//!   that fails `UNAVAILABLE`. The handler runs to completion when the
//!   client cancels or its deadline passes, and its answer is stored for
//!   the retry. Streaming methods pass through untouched.
//! - **Client.** [`client::RetryLayer`] around a tonic `Channel` keeps
//!   one key per logical call across its retries (§14's retry rules).
//! - **Service methods.** `#[idempotent]` goes directly on the methods of
//!   a `#[tonic::async_trait]` service impl.
//!
//! ```no_run
//! use idem::grpc::IdempotencyLayer;
//! use idem::{Idempotency, MemoryStore};
//!
//! # async fn serve() -> Result<(), Box<dyn std::error::Error>> {
//! let layer = IdempotencyLayer::new(Idempotency::new(MemoryStore::new()))
//!     .required("/shop.Payments/Charge");
//! // tonic::transport::Server::builder()
//! //     .layer(layer)
//! //     .add_service(PaymentsServer::new(MyPayments))
//! //     .serve("[::1]:50051".parse()?)
//! //     .await?;
//! # let _ = layer;
//! # Ok(())
//! # }
//! ```

//!
//! # Guide
//!
//! **Which methods.** The layer sees HTTP/2 requests, not your `.proto`:
//! tell it each unary method to guard, by its full path. `unary(path)`
//! fingerprints the request message's bytes; `message::<M>(path)` decodes
//! it as the prost type `M` (with `serde::Serialize` derived, e.g. by
//! prost-build's `type_attribute(".", "#[derive(serde::Serialize)]")`) and
//! fingerprints the value, so a map field sent in another order, or fields
//! in another order, are the same request; `required(path)` refuses a call
//! without a key. Methods not named (every streaming method) are passed
//! through untouched: the layer never reads a stream.
//!
//! **What a duplicate gets.** The stored answer: the status code and
//! message, the response message, `grpc-status-details-bin`, and the
//! metadata and trailers named in `stored_metadata`, with
//! `idempotent-replayed: true`. Stored codes are `OK` and the
//! deterministic errors; `store_code` changes the rule. A duplicate that
//! arrives while the first call runs gets `ABORTED` with a `RetryInfo`
//! delay, or, with `wait(d)`, the first call's answer.
//!
//! **Cancellation.** A guarded call runs on a task of its own: when the
//! client cancels or its deadline passes, the handler still finishes and
//! its answer is stored, so the client's retry with the same key gets it.
//!
//! **Client.** Put [`client::RetryLayer`] around the `Channel`, naming the
//! same methods: each call gets a key before its first attempt (or keeps
//! the caller's), and retries send it again with the same message.
//!
//! ```no_run
//! use std::time::Duration;
//!
//! use idem::grpc::client::RetryLayer;
//!
//! # async fn connect() -> Result<(), Box<dyn std::error::Error>> {
//! let channel = tonic::transport::Channel::from_static("http://[::1]:50051")
//!     .connect()
//!     .await?;
//! let channel = tower::ServiceBuilder::new()
//!     .layer(RetryLayer::new().unary("/shop.Payments/Charge").deadline(Duration::from_secs(10)))
//!     .service(channel);
//! // let mut client = PaymentsClient::new(channel);
//! # let _ = channel;
//! # Ok(())
//! # }
//! ```
//!
//! **Service methods.** `#[idempotent]` can also sit on a method of a
//! `#[tonic::async_trait]` impl whose `Ok` type is serializable and whose
//! error type is `From<idem::Error>` (a domain trait your handlers call).
//! A tonic-generated method itself returns `Result<Response<M>, Status>`,
//! which the attribute cannot store (`Response<M>` is not serde) — guard
//! those with the layer.
//!
//! A runnable server and client on SQLite: `cargo run -p
//! idem-integration --example grpc_payments`.

#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]

mod answers;
mod attribute;
pub mod client;
mod layer;
mod scope;
mod service;
mod stored;

pub use answers::DOMAIN;

/// What `#[idempotent]` expands to on a tonic service method. Not public
/// API: names here may change in any release.
#[doc(hidden)]
pub mod __private {
    pub use crate::attribute::*;
}
pub use layer::IdempotencyLayer;
pub use service::IdempotencyService;

/// The request metadata that carries a call's idempotency key.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// The response metadata set to `true` on a replayed answer.
pub const IDEMPOTENT_REPLAYED: &str = "idempotent-replayed";
