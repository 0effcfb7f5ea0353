//! Idempotent HTTP for axum, after the IETF draft "The Idempotency-Key
//! HTTP Header Field" (draft-ietf-httpapi-idempotency-key-header-07).
//!
//! This crate is [idem](https://docs.rs/idemkit)'s axum integration, built
//! on idem's public API alone. Applications use it as `idem::http`, with
//! the `axum` feature of `idemkit` (`idemkit = { version = "0.1", features
//! = ["axum"] }`), as every example here does; it is a crate of its own so
//! that an axum major upgrade is a release of this crate, not of idem. The
//! [`guide`] walks through it in depth.
//!
//! Two levels:
//!
//! - [`IdempotencyLayer`], a tower layer in front of any axum router: for
//!   POST and PATCH it reads `Idempotency-Key`, claims the key, runs the
//!   handler once, stores its response and replays it to every duplicate
//!   with `Idempotent-Replayed: true`. Concurrent duplicates never both
//!   run the handler.
//! - [`IdempotencyKey`], an extractor for handlers that call
//!   `#[idempotent]` service functions themselves, and `IntoResponse` for
//!   [`Error`](idem_core::Error), so such a handler can return
//!   `Result<_, idem::Error>`.
//!
//! Beside them, token mode ([`TokenIssuer`] and
//! [`IdempotencyLayer::tokens`]: the server issues the keys, signed and
//! bound to the caller) and versions ([`ETag`], [`IfMatch`],
//! [`require_if_match`]: an update names the version it was made against,
//! RFC 9110 §13.1.1).
//!
//! ```
//! use axum::{Json, Router, http::StatusCode, routing::post};
//! use idem::http::IdempotencyLayer;
//! use idem::{Idempotency, MemoryStore};
//! use serde_json::{Value, json};
//!
//! async fn create_order(Json(order): Json<Value>) -> (StatusCode, Json<Value>) {
//!     (StatusCode::CREATED, Json(json!({ "id": 1, "order": order })))
//! }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let idem = Idempotency::new(MemoryStore::new());
//! let app: Router = Router::new()
//!     .route("/orders", post(create_order))
//!     .layer(IdempotencyLayer::new(idem));
//! # use tower::ServiceExt;
//! # let request = || axum::http::Request::post("/orders")
//! #     .header("idempotency-key", "\"order-1\"")
//! #     .header("content-type", "application/json")
//! #     .body(axum::body::Body::from(r#"{"sku":"tea"}"#)).unwrap();
//! # let first = app.clone().oneshot(request()).await.unwrap();
//! # assert_eq!(first.status(), 201);
//! # let again = app.oneshot(request()).await.unwrap();
//! # assert_eq!(again.headers()["idempotent-replayed"], "true");
//! # }
//! ```
//!
//! # Answers
//!
//! | situation | status |
//! | --- | --- |
//! | first request with a key | the handler's own answer (stored if its status is) |
//! | duplicate after completion | the stored answer, with `Idempotent-Replayed: true` |
//! | duplicate while the first still runs | 409 with `Retry-After`, or the first answer when the layer [waits](IdempotencyLayer::wait) |
//! | duplicate that waited on a first request that failed (not stored) | that answer, replayed (409 `attempt-failed` if it was too large to keep) |
//! | duplicate of an answer not stored (too large, or [not captured](IdempotencyLayer::capture)) | 500 `not-stored`; the handler does not run again |
//! | duplicate refusing the stored answer's `Content-Encoding` | 406 |
//! | duplicate after the stored answer expired, within its [tombstone](IdempotencyLayer::tombstone) | 410 `expired`; the handler does not run again |
//! | same key, other request body | 422 |
//! | key missing (when required), empty, over 255 bytes, malformed, repeated, not a string or token | 400 |
//! | request body over the limit | 413 |
//! | in [token mode](IdempotencyLayer::tokens): a key that is not a live token issued to this caller | 400 |
//! | store unreachable | 503 |
//!
//! # Problem types
//!
//! Error answers are RFC 9457 `application/problem+json` documents with
//! `type`, `title`, `status` and `detail` ([`Problem`]). Their `type` is
//! this page followed by one of these fragments.
//!
//! ### missing-key
//! 400: the request needs an `Idempotency-Key` header and has none.
//!
//! ### invalid-key
//! 400: the key is empty, longer than 255 bytes, not visible ASCII, not a
//! well-formed structured-field string, another structured-field item (an
//! integer, decimal, byte sequence or boolean), or sent more than once.
//!
//! ### body-too-large
//! 413: the request body is larger than the layer buffers; nothing ran.
//!
//! ### body-unreadable
//! 400: the request body could not be read; nothing ran.
//!
//! ### in-progress
//! 409 with `Retry-After`: a request with this key is still running.
//!
//! ### attempt-failed
//! 409 with `Retry-After`: this request waited on another with the same
//! key, which failed without an answer to share; nothing was stored, and a
//! retry runs the request again.
//!
//! ### not-stored
//! 500: the request with this key was processed, but its response could
//! not be stored (larger than the layer keeps, or streamed without
//! capture), so it cannot be replayed; it will not be processed again
//! until the record expires. The first response carried
//! `Idempotent-Stored: false` when that was known before its body. (A 5xx,
//! not a 409: the server cannot give the answer; a client should not read
//! it as "not processed" and retry with a new key.)
//!
//! ### encoding-not-acceptable
//! 406: the stored response is encoded (compressed inside the layer) in a
//! way this request's `Accept-Encoding` refuses; idem does not re-encode.
//!
//! ### fingerprint-mismatch
//! 422: the key was used before with a different request.
//!
//! ### expired
//! 410: the request with this key was processed, and its stored response
//! has expired; the layer's [tombstone](IdempotencyLayer::tombstone) still
//! remembers it, so it will not be processed again. Use a new key for a new
//! request.
//!
//! ### lease-lost
//! 409: the request ran past its lease and a retry took it over.
//!
//! ### store-unavailable
//! 503: the idempotency store failed or could not be reached.
//!
//! ### store-misconfigured
//! 500: the idempotency store cannot work as configured (a
//! [`StoreErrorKind`](idem_core::StoreErrorKind) that does not pass by itself);
//! retrying will not help until an operator fixes it.
//!
//! ### invalid-option
//! 500: the call's settings cannot work (`Error::InvalidOption`).
//!
//! ### invalid-step
//! 500: the handler used `idem::step` where it cannot work
//! (`Error::InvalidStep`).
//!
//! ### codec
//! 500: a stored response could not be read or written.
//!
//! ### response-failed
//! 500: the handler ran but its response body failed before it could be
//! sent; duplicates get `not-stored`.
//!
//! ### not-configured
//! 500: an `#[idempotent]` fn behind the layer has no `store =` and no
//! handle was installed: the layer's own handle is not installed for the
//! fns it calls; call `idem::install(handle.clone())` at startup.
//!
//! ### invalid-token
//! 400: in [token mode](IdempotencyLayer::tokens), the key is not a token
//! the [`TokenIssuer`] made for this caller: client-made, malformed,
//! altered, issued to another caller, or signed with a secret no longer
//! accepted. Nothing ran.
//!
//! ### token-expired
//! 400: in token mode, the key is a genuine token past its expiry. Nothing
//! ran.
//!
//! ### precondition-failed
//! 412 ([`IfMatch::check`]): the resource's version is not one `If-Match`
//! names; nothing changed. Never stored: a corrected retry with the same
//! key runs.
//!
//! ### precondition-required
//! 428 ([`require_if_match`], or the [`IfMatch`] extractor): the request
//! must carry `If-Match`. Never stored.
//!
//! ### invalid-if-match
//! 400: `If-Match` is neither `*` nor a list of quoted entity tags.

mod answers;
mod body;
mod defaults;
mod flights;
pub mod guide;
mod idempotency_key;
mod layer;
mod locate;
mod principal;
mod request;
mod run_times;
mod scope;
mod service;
mod sites;
mod state_updates;
mod stored;
mod tee;
mod token;
mod transaction;
mod versions;

pub use defaults::{captured_by_default, stores_by_default};
#[doc(inline)]
pub use idem_core::problem::{PROBLEM_TYPE_BASE, Problem};
pub use idempotency_key::{
    IDEMPOTENCY_KEY, IDEMPOTENT_REPLAYED, IDEMPOTENT_STORED, IdempotencyKey, MAX_KEY_BYTES,
};
pub use layer::{DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_RESPONSE_BYTES, IdempotencyLayer};
pub use locate::{credential_principal, record_key};
pub use service::IdempotencyService;
// The fuzz targets' entry points (`fuzz/`), only in a fuzzing build:
// cargo-fuzz sets `--cfg fuzzing`.
#[cfg(fuzzing)]
pub use stored::fuzz_stored_response;
#[cfg(any(fuzzing, test))]
pub use token::fuzz_token;
pub use token::{DEFAULT_TOKEN_TTL, TokenError, TokenIssuer};
pub use transaction::Transaction;
#[cfg(fuzzing)]
pub use versions::fuzz_if_match;
pub use versions::{ETag, IfMatch, require_if_match};
