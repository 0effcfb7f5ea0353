//! The client half in depth (`idem::guide::client`, feature `client` of idemkit).
//!
//! The [layer](https://docs.rs/idemkit/latest/idem/guide/http/index.html) runs each key once; only the client can make
//! sure that the attempts of one logical request carry one key. A retry
//! loop that makes a new key per attempt is exactly the double charge the
//! server cannot see. [`IdempotencyMiddleware`](crate::IdempotencyMiddleware)
//! is a [`reqwest-middleware`](https://docs.rs/reqwest-middleware)
//! middleware that does it right; [`idem::client`](crate) shows it
//! against a live server and says what to do
//! [when the retries run out](crate#when-the-retries-run-out).
//!
//! ```toml
//! [dependencies]
//! idemkit = { version = "0.1", features = ["client"] }
//! reqwest = "0.13"             # your reqwest chooses TLS; idem enables none
//! reqwest-middleware = "0.5"
//! ```
//!
//! ```no_run
//! use std::time::Duration;
//! use idem::client::IdempotencyMiddleware;
//! use reqwest_middleware::ClientBuilder;
//!
//! # async fn send() -> Result<(), reqwest_middleware::Error> {
//! let client = ClientBuilder::new(reqwest::Client::new())
//!     .with(
//!         IdempotencyMiddleware::new()
//!             .max_retries(3) // the default
//!             .deadline(Duration::from_secs(30)),
//!     )
//!     .build();
//!
//! // A key is made for this POST before its first attempt and sent with
//! // every retry.
//! let created = client
//!     .post("https://payments.example/payments")
//!     .header("content-type", "application/json")
//!     .body(r#"{"amount_cents": 1200, "currency": "EUR"}"#)
//!     .send()
//!     .await?;
//! # let _ = created; Ok(()) }
//! ```
//!
//! # What is retried
//!
//! For POST and PATCH (`.methods(…)` to change), each attempt of one call
//! sends the same request with the same `Idempotency-Key`: a UUID v4 as a
//! structured-field string, or the caller's own header, kept as is.
//!
//! | an attempt gets | the middleware |
//! | --- | --- |
//! | no connection, a lost connection, a timeout | sends it again after a backoff (100 ms doubling up to 5 s, with jitter) |
//! | 5xx (but 501 and 505), 429 | sends it again after its `Retry-After` (at most 10 s, `.max_retry_after`), else the backoff |
//! | 409 with `Retry-After`: the key's first request still runs | sends it again after the `Retry-After`: the first one's stored answer comes back |
//! | 2xx, 3xx, 422 (the key was used with another body), any other 4xx | returns it at once |
//! | anything, when the body is a stream | returns it: a stream cannot be sent twice |
//!
//! Together, client middleware and server layer give one effect per logical
//! request: the first attempt that reaches the server runs the handler; every
//! later attempt, whether the first is still running (409, wait, retry) or
//! done (its answer replayed with `Idempotent-Replayed: true`), does not.
//!
//! # Spans, and the example
//!
//! Each attempt runs in an INFO span `idem.client.attempt` with `key_hash` (8
//! hex digits of the key's SHA-256, never the key), `attempt`, `method`, and
//! `status` or `error` and `retry` (why another attempt follows); a DEBUG
//! event in it says how the attempt ended. The example puts the payments
//! server behind a proxy that loses responses and prints each attempt:
//!
//! ```console
//! $ cargo run -p idem-integration --example client_retries
//! 1. The proxy loses the first two responses: the payment ran, the client never heard.
//!  INFO response lost, connection closed
//! DEBUG idem.client.attempt{key_hash=b4e39435 attempt=1 method=POST error=error sending request for url (http://127.0.0.1:36979/payments): client error (SendRequest): connection closed before message completed retry=connection lost}: retrying wait_ms=98
//!  INFO response lost, connection closed
//! DEBUG idem.client.attempt{key_hash=b4e39435 attempt=2 method=POST error=… retry=connection lost}: retrying wait_ms=158
//! DEBUG idem.client.attempt{key_hash=b4e39435 attempt=3 method=POST status=201}: answered
//! -> 201 Created (replayed: true) {"id":"pay_307003f43b4d78f8","amount_cents":1200,"currency":"EUR","gateway_charge":"ch_1"}
//!
//! 2. The client gives up after 100 ms, the gateway takes 200 ms: 409 while it runs, then its stored answer.
//! DEBUG idem.client.attempt{key_hash=77acd102 attempt=1 method=POST error=…: operation timed out retry=timeout}: retrying wait_ms=56
//! DEBUG idem.client.attempt{key_hash=77acd102 attempt=2 method=POST status=409 retry=status 409}: retrying wait_ms=1041
//! DEBUG idem.client.attempt{key_hash=77acd102 attempt=3 method=POST status=201}: answered
//! -> 201 Created (replayed: true) {"id":"pay_d92a39f774f8ac95","amount_cents":1200,"currency":"EUR","gateway_charge":"ch_2"}
//!
//! 2 payments, 2 handler runs, 2 gateway charges, 2 responses lost.
//! ```
//!
//! `integration/tests/all/client.rs` checks the same over real HTTP, counting the
//! attempts where they arrive: a lost response, a client timeout shorter than
//! the handler, two calls with two keys, a caller's key kept, a 422 not
//! retried, a stream sent once, the retry budget and the deadline.
