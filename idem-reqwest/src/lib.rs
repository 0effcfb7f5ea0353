//! The client half of idempotent HTTP: a [`reqwest_middleware`] middleware
//! that gives each logical request one idempotency key and retries it with
//! that key until it gets an answer.
//!
//! This crate is [idem](https://docs.rs/idemkit)'s reqwest integration.
//! Applications use it as `idem::client`, with the `client` feature of
//! `idemkit` (`idemkit = { version = "0.1", features = ["client"] }`), as
//! the examples here do; it is a crate of its own so that a reqwest major
//! upgrade is a release of this crate, not of idem. It needs no store and
//! depends on no other part of idem. The [`guide`] walks through it in
//! depth.
//!
//! A server that honours `Idempotency-Key` (such as
//! [`IdempotencyLayer`](https://docs.rs/idemkit/latest/idem/http/struct.IdempotencyLayer.html)) runs a request once
//! per key; it cannot tell a retry from a new request if the client makes a
//! new key for each attempt. [`IdempotencyMiddleware`] makes the key once,
//! before the first attempt, and re-sends the same request with it after a
//! lost connection, a timeout, a 5xx, a 429 or a 409 "still running":
//! together, one effect per logical request.
//!
//! ```
//! use idem::client::IdempotencyMiddleware;
//! use reqwest_middleware::ClientBuilder;
//! # use axum::{Router, routing::post};
//! # use idem::{Idempotency, MemoryStore, http::IdempotencyLayer};
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! # let app = Router::new()
//! #     .route("/orders", post(|| async { (axum::http::StatusCode::CREATED, "order 1") }))
//! #     .layer(IdempotencyLayer::new(Idempotency::new(MemoryStore::new())));
//! # let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
//! # let base = format!("http://{}", listener.local_addr().unwrap());
//! # tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
//! let client = ClientBuilder::new(reqwest::Client::new())
//!     .with(IdempotencyMiddleware::new())
//!     .build();
//!
//! // A key is made for this POST and kept for each of its retries.
//! let created = client.post(format!("{base}/orders")).body("tea").send().await.unwrap();
//! assert_eq!(created.status(), 201);
//!
//! // A key kept by the caller (say, in an outbox row) is sent as is: the
//! // same request sent again later is answered from the server's record.
//! let key = format!("\"{}\"", idem::client::new_key());
//! for _ in 0..2 {
//!     let sent = client
//!         .post(format!("{base}/orders"))
//!         .header("idempotency-key", &key)
//!         .body("coffee")
//!         .send()
//!         .await
//!         .unwrap();
//!     assert_eq!(sent.status(), 201);
//! }
//! # }
//! ```
//!
//! # When the retries run out
//!
//! After [`max_retries`](IdempotencyMiddleware::max_retries) or at the
//! [`deadline`](IdempotencyMiddleware::deadline) the caller gets the last
//! answer or error (or [`DeadlineExceeded`] if an attempt was still
//! running). The request may have run on the server. To try again later
//! without running it twice, send it again with the **same key**: a caller
//! that may have to do so makes the key itself with [`new_key`] and keeps
//! it until it has an answer.
//!
//! # TLS
//!
//! idem builds reqwest without TLS or other default features of its own;
//! the `reqwest` you depend on to build the client chooses them (`rustls`,
//! `native-tls`), and Cargo unifies the two.

mod attempt;
mod backoff;
mod error;
pub mod guide;
mod middleware;
mod new_key;
mod retry;

pub use error::DeadlineExceeded;
pub use middleware::{DEFAULT_MAX_RETRIES, DEFAULT_MAX_RETRY_AFTER, IdempotencyMiddleware};
pub use new_key::new_key;
