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
//!   a `#[tonic::async_trait]` service impl, `Result<Response<M>, Status>`
//!   and all: the answer is stored and replayed as the layer's is.
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
//! **Where the key comes from.** The `idempotency-key` metadata, or, for
//! a method registered with [`key_field`](IdempotencyLayer::key_field),
//! a field of the decoded request when the metadata is absent (AIP-155's
//! `request_id`, which the client sets once per logical call):
//!
//! ```
//! use idem::grpc::IdempotencyLayer;
//! use idem::{Idempotency, MemoryStore};
//!
//! #[derive(Clone, PartialEq, prost::Message, serde::Serialize)]
//! struct CreateOrderRequest {
//!     #[prost(string, tag = "1")]
//!     sku: String,
//!     #[prost(string, tag = "2")]
//!     request_id: String,
//! }
//!
//! let layer = IdempotencyLayer::new(Idempotency::new(MemoryStore::new()))
//!     .key_field("/shop.Orders/Create", |request: &CreateOrderRequest| &request.request_id)
//!     .required("/shop.Orders/Create");
//! # let _ = layer;
//! ```
//!
//! **Whose key.** A key is scoped by the full method path and the caller:
//! by default a hash of the `authorization` metadata, so two credentials
//! never share an answer; [`principal`](IdempotencyLayer::principal) puts
//! the application's own notion of the caller there instead (a tenant an
//! authentication layer outside this one put into the extensions).
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
//! **Service methods.** Without the layer, `#[idempotent]` goes directly
//! on a method of a `#[tonic::async_trait]` service impl, the trait
//! tonic-build generated, under it. A return type spelled
//! `Result<…Response<M>, …Status>` is taken for a tonic method (by those
//! names): the response message is stored prost-encoded with the
//! response's metadata; a `Status` (code, message, details, metadata) is
//! stored when its code is one of the deterministic ones and releases the
//! key otherwise, as the layer's table says (`errors = "release"`, `"replay"` or
//! a `fn(&tonic::Status) -> bool` change that); idem's own answers are
//! statuses with an `ErrorInfo` detail, as the layer's; a replayed answer
//! carries `idempotent-replayed: true`. `reconcile` is not taken there.
//!
//! ```
//! use idem::{Idempotency, MemoryStore, idempotent};
//! use tonic::{Request, Response, Status};
//!
//! #[derive(Clone, PartialEq, prost::Message, serde::Serialize)]
//! pub struct ChargeRequest {
//!     #[prost(string, tag = "1")]
//!     pub order: String,
//!     #[prost(string, tag = "2")]
//!     pub request_id: String,
//! }
//!
//! #[derive(Clone, PartialEq, prost::Message)]
//! pub struct ChargeReply {
//!     #[prost(uint64, tag = "1")]
//!     pub charge_id: u64,
//! }
//!
//! // As tonic-build generates it from `service Payments`.
//! #[tonic::async_trait]
//! pub trait Payments: Send + Sync + 'static {
//!     async fn charge(&self, request: Request<ChargeRequest>) -> Result<Response<ChargeReply>, Status>;
//! }
//!
//! struct MyPayments {
//!     idem: Idempotency,
//! }
//!
//! #[tonic::async_trait]
//! impl Payments for MyPayments {
//!     #[idempotent(store = self.idem, key = request.get_ref().request_id, fingerprint = request.get_ref())]
//!     async fn charge(&self, request: Request<ChargeRequest>) -> Result<Response<ChargeReply>, Status> {
//!         let order = request.into_inner().order;
//!         if order.is_empty() {
//!             return Err(Status::invalid_argument("no order")); // stored: deterministic
//!         }
//!         Ok(Response::new(ChargeReply { charge_id: order.len() as u64 }))
//!     }
//! }
//! # #[tokio::main] async fn main() {
//! # let payments = MyPayments { idem: Idempotency::new(MemoryStore::new()) };
//! # let call = || Request::new(ChargeRequest { order: "o-1".into(), request_id: "r-1".into() });
//! # let first = payments.charge(call()).await.unwrap();
//! # let again = payments.charge(call()).await.unwrap();
//! # assert_eq!(first.get_ref(), again.get_ref());
//! # assert_eq!(again.metadata().get("idempotent-replayed").unwrap(), "true");
//! # }
//! ```
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
