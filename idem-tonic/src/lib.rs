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

#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]

mod answers;
pub mod client;
mod layer;
mod scope;
mod service;
mod stored;

pub use answers::DOMAIN;
pub use layer::IdempotencyLayer;
pub use service::IdempotencyService;

/// The request metadata that carries a call's idempotency key.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// The response metadata set to `true` on a replayed answer.
pub const IDEMPOTENT_REPLAYED: &str = "idempotent-replayed";
