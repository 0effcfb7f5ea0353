//! The axum layer in depth (`idem::guide::http`, feature `axum` of idemkit).
//!
//! HTTP clients retry: on a timeout, a dropped connection, a 502 from a
//! proxy. [`idem::http`](crate) makes those retries safe for an axum
//! service, following the IETF draft "The Idempotency-Key HTTP Header
//! Field" (draft-ietf-httpapi-idempotency-key-header-07): the client sends
//! a unique `Idempotency-Key` with each unsafe request, and the server runs
//! each key once. The README's recipe puts the pieces together (features
//! `axum` and `sqlite`, one handle, shutdown); this page is the reference.
//!
//! # One handle, given to the layer and installed
//!
//! [`IdempotencyLayer::new`](crate::IdempotencyLayer::new) takes an
//! [`Idempotency`](idem_core::Idempotency) and keeps it for the layer's own
//! records. It does not install it: an `#[idempotent]` fn called by a
//! handler, without `store = …`, uses the handle given to
//! [`install`](idem_core::install), and without one answers
//! [`Error::NotConfigured`](idem_core::Error::NotConfigured) (the layer then
//! answers 500 [`not-configured`](crate#not-configured)). Make one
//! handle, install a clone, give a clone to the layer, and keep one to
//! [`drain`](idem_core::Idempotency::drain) on shutdown: clones share the
//! store, the renewer and the list of detached calls to wait for.
//!
//! # An `#[idempotent]` fn behind the layer
//!
//! The layer already runs each request once per key. An `#[idempotent]`
//! fn that a handler behind it calls is a second, independent call: its
//! own key, its own record (two records per request, two claims, two
//! completions). That is what you want when the fn has an identity of its
//! own that the HTTP key does not carry:
//!
//! - it is keyed by a business id (`key = order.id`), so two requests with
//!   *different* `Idempotency-Key`s for the same order still charge once;
//! - it is also called from elsewhere (a queue consumer, a job, another
//!   route) and must be idempotent there too.
//!
//! When the fn is reached only through the layer and would be keyed by
//! the same `Idempotency-Key`, leave the attribute off: the layer's record
//! already replays the whole response, and the second record costs a claim
//! and a completion per request for nothing. (The [extractor](#the-extractor)
//! below is the other way round: no layer, the handler passes the HTTP key
//! to its `#[idempotent]` fn.)
//!
//! # The layer
//!
//! ```
//! use std::time::Duration;
//! use axum::{Router, routing::post};
//! use idem::http::IdempotencyLayer;
//! use idem::{Idempotency, MemoryStore};
//! # #[derive(Clone)] struct User { id: u64 }
//! # async fn create_payment() -> &'static str { "paid" }
//!
//! let idem = Idempotency::new(MemoryStore::new()); // or Redis, PostgreSQL, SQLite
//! let app: Router = Router::new()
//!     .route("/payments", post(create_payment))
//!     .layer(
//!         IdempotencyLayer::new(idem)
//!             .principal(|parts| parts.extensions.get::<User>().map(|u| u.id.to_string()))
//!             .wait(Duration::from_secs(5)), // optional: duplicates wait for the first answer
//!     );
//! ```
//!
//! For POST and PATCH (configurable with `.methods(…)`) the layer:
//!
//! - reads `Idempotency-Key`, the whole field as one RFC 8941
//!   structured-field item (the `sfv` crate): a string (`"…"`) or a bare
//!   token, 1 to 255 bytes, with parameters ignored; a list is refused
//!   (400), so two keys folded into one field by a proxy
//!   (`"k-1";v=1, "k-2"`) or sent as two headers never run as the first;
//!   other items are refused (400), so that `42` and `"42"` are never one
//!   key: integers, decimals, byte sequences (`:…:`), booleans (`?1`);
//! - scopes the key by method, matched route (`/payments/{id}`) and the
//!   caller, so two callers' keys never meet: by default a hash of the
//!   request's `Authorization` header (and of the session cookies named with
//!   `.principal_cookies([…])`), or what `.principal(…)` returns (see
//!   [Security](#security));
//! - buffers the request body (2 MiB by default, `.max_body_bytes(…)`; 413
//!   beyond it, nothing stored) and fingerprints it: SHA-256 of the request
//!   target and body; a JSON body (`application/json`, `…+json`) is
//!   fingerprinted by its value (as `#[idempotent]` does: map entries in
//!   sorted order), so the same object with its keys reordered or other
//!   whitespace is the same request (`.exact_bytes()` compares its bytes
//!   instead); any other body is compared byte for byte;
//! - claims the key in the store; only the winner runs the handler, however
//!   many duplicates arrive at once, on however many server instances share
//!   the store;
//! - stores the status, the body and `Content-Type`, `Content-Encoding`,
//!   `Location`, `Cache-Control`, `Vary` and a few other headers
//!   (`.stored_headers(…)`; `Content-Encoding` always) when the status says
//!   something happened, and releases the key so the retry runs when it says
//!   nothing did (`.store_status(…)`, table below);
//! - replays the stored answer to every duplicate for 24 hours (`.ttl(…)`),
//!   with `Idempotent-Replayed: true`.
//!
//! | the handler's status | default | why |
//! | --- | --- | --- |
//! | 2xx, `303 See Other` | stored | it happened |
//! | `402`, `410` and other 4xx not listed below | stored | a final answer of the business (a declined card) |
//! | `400`, `401`, `403`, `404`, `405`, `406`, `407`, `411`, `412`, `413`, `414`, `415`, `416`, `417`, `421`, `422`, `424`, `426`, `428`, `431`, `451` | released | the request was refused before anything happened: the corrected retry (with a `Content-Type`, a token, a valid field) runs |
//! | `408`, `409`, `425`, `429` | released | the server asks the client to try again |
//! | 5xx, other 1xx and 3xx | released | failed: the retry runs |
//!
//! (`422` is also idem's own answer to a key reused with another body; that
//! one is not a handler's answer and stores nothing.)
//!
//! The handler runs on a task of its own, detached from the connection: when
//! the client times out or disconnects, hyper drops the connection's future
//! but not the handler, which runs to completion and stores its answer for
//! the client's retry (see [when the caller gives up](https://docs.rs/idemkit/latest/idem/guide/attribute/index.html#when-the-caller-gives-up)).
//! The response body is read to its end in the same way, whether or not
//! the client is still there. On shutdown, after
//! `axum::serve(…).with_graceful_shutdown(…)` returns, call
//! `idem.drain(deadline)` on the layer's handle so such requests finish and
//! store their answers before the process exits.
//!
//! **Responses of any size and shape.** A body of known length up to
//! `.max_response_bytes(…)` (512 KiB by default; every `Json` or `String`
//! answer) is sent once its record is written. Any other body (a stream, a
//! chunked download) goes to the client as the handler produces it and is
//! captured on the way; only its last frame waits for the record, so a
//! client that has the whole answer finds it stored. Bodies are stored as
//! bytes (text or base64, whichever is shorter: at most a third larger in
//! the record). A body larger than the limit is sent whole but not stored,
//! and still settles the key: every duplicate until the TTL ends gets a 500
//! `not-stored` problem saying the request was processed and will not be
//! processed again, never a second run; when the length is known up front
//! the first response carries `Idempotent-Stored: false`. Server-sent events
//! (`text/event-stream`) are not captured at all: streamed untouched (a
//! client that leaves ends them), key settled the same way; `.capture(|route,
//! response| …)` exempts other routes or responses.
//!
//! **Where compression goes.** Put `CompressionLayer` (tower-http) *outside*
//! the idempotency layer, that is after it in the chain of `.layer` calls
//! (`.layer(IdempotencyLayer::new(idem)).layer(CompressionLayer::new())`):
//! the record keeps the plain body and each replay is encoded for its own
//! client's `Accept-Encoding`. Inside, it works too: the encoded body is
//! stored with its `Content-Encoding` and `Vary` and replayed as it is, and
//! a duplicate whose `Accept-Encoding` refuses that encoding gets 406 (idem
//! does not re-encode). Replays keep `Cache-Control` (a `no-store` stays
//! `no-store`) and `Vary`.
//!
//! Every answer the layer gives (replays, 409 while running, 422, 400,
//! 413, 503, the problem types) is listed on [`idem::http`](crate#answers).
//! Beyond that table: a 409's `Retry-After` is the route's recent run
//! time (at most the first request's remaining lease); a handler that
//! panicked is a 500 with nothing stored, so the retry runs; waiters
//! (`.wait(…)`) on another instance sharing the store see a failed first
//! request's key released and may run it.
//!
//! # State updates without a key
//!
//! [`state_updates`](crate::IdempotencyLayer::state_updates) marks methods
//! (PUT, DELETE) whose requests are keyed by method, route, path and
//! principal, with `mismatch = "rerun"` and no header: `PUT
//! /orders/7/status` twice with one body runs the handler once (one
//! `update_time`, one message, one cache invalidation) and replays its
//! response; another body runs and its response becomes the record; two
//! updates of one order never run at once (the second waits up to
//! `wait`, then 409). The order-status example in full:
//! `idem::guide::state_updates`.
//!
//! # Whole endpoints in one transaction
//!
//! On `PostgresStore` and `MySqlStore`,
//! [`transactional(store)`](crate::IdempotencyLayer::transactional) gives
//! each guarded request a database transaction, which the handler takes
//! as [`Transaction<sqlx::PgConnection>`](crate::Transaction) (or
//! `MySqlConnection`) and writes through with `&mut *tx.conn().await?`.
//! The layer completes the request's record in that transaction (fenced
//! by the claim's token) and commits once the handler has returned, before
//! the response is sent: the order row and the stored `201` exist
//! together or not at all. The claim is committed at once, outside the
//! transaction, so duplicates meanwhile get `409` as usual. A 5xx, an
//! unstored status or a handler error rolls back and releases the key; a
//! crash or a failed commit leaves neither, and the retry runs once the
//! lease lapses (a failed commit answers `503`; the retry then replays if
//! it had committed after all). The README's PostgreSQL recipe is the
//! whole service.
//!
//! # The extractor
//!
//! A handler that calls `#[idempotent]` service functions itself takes the
//! key with `IdempotencyKey` (400 when missing or invalid;
//! `Option<IdempotencyKey>` when optional). `idem::Error` implements
//! `IntoResponse` with the same problem bodies, so handlers can use `?`.
//!
//! ```
//! use axum::{Extension, Json};
//! use idem::http::IdempotencyKey;
//! use idem::idempotent;
//! # use serde::{Deserialize, Serialize};
//! # #[derive(Clone)] struct User { id: u64 }
//! # #[derive(Serialize, Deserialize)] struct PaymentRequest { amount_cents: u64 }
//! # #[derive(Serialize, Deserialize)] struct Receipt { charge_id: u64 }
//!
//! #[idempotent(key = key, scope = ("payments", user.id), fingerprint = req)]
//! async fn charge(user: &User, key: &IdempotencyKey, req: &PaymentRequest) -> Result<Receipt, idem::Error> {
//!     todo!("charge the card")
//! }
//!
//! async fn create_payment(
//!     Extension(user): Extension<User>, // put there by your authentication layer
//!     key: IdempotencyKey,
//!     Json(req): Json<PaymentRequest>,
//! ) -> Result<Json<Receipt>, idem::Error> {
//!     Ok(Json(charge(&user, &key, &req).await?))
//! }
//! ```
//!
//! Put the caller in the `scope`, as above: the key is the client's choice,
//! and without the caller in the scope one client who reuses (or guesses)
//! another's key gets the other's stored result.
//!
//! # Security
//!
//! - **Keys belong to their caller.** With no `.principal(…)`, the layer
//!   scopes every key by a SHA-256 hash of the request's credentials: the
//!   `Authorization` header (`.principal_headers([…])` names others, such as
//!   `X-Api-Key`) and the session cookies named with
//!   `.principal_cookies([…])` (name only the session cookie: one that
//!   changes between a request and its retry would make the retry a new
//!   request). Two credentials never share a record; requests with none share
//!   the anonymous scope. `.principal(|parts| …)` replaces this with your own
//!   notion of the caller (typically the user an authentication layer put
//!   into the request's extensions). `.share_keys_across_callers()` opts out,
//!   for routes where one caller's answer may go to every caller (a public
//!   endpoint with nothing private in its responses); anywhere else it is a
//!   data leak.
//! - **What is stored**: the key and scope hashed (SHA-256, fixed length;
//!   the raw key and the credentials are never stored), the request's
//!   fingerprint (a hash), and the response: status, body and only the
//!   allow-listed headers (`.stored_headers(…)`; `Set-Cookie` is not among
//!   the defaults and should not be added).
//! - **What is logged**: events carry the scope's description (method, route,
//!   and `credential` plus 16 bytes of hash, or your principal's value) and
//!   a short hash of the key; never the raw key, a credential or a body.
//!
//! # Server-issued keys (token mode) and versions
//!
//! Two patterns beside client keys. **Token mode**: the server issues the
//! key and the client only holds it. `TokenIssuer::new(secret)` mints tokens
//! (random, bound to the caller and to an expiry, HMAC-SHA256-signed: issuing
//! writes nothing to the store); `issuer.router()` answers `POST /` with `201
//! {"token": "…", "expires_in": 3600}`; `IdempotencyLayer::new(idem).tokens(issuer)`
//! accepts only live tokens issued to the request's caller, and answers 400
//! (`invalid-token`, `token-expired`) to anything else (a client-made key, an
//! altered token, another caller's, one signed with a retired secret) without
//! running the handler. Single use is the record's: the token sent again
//! replays the first answer. Nest the issuer's router outside the layer and
//! give the issuer the layer's principal (`.principal(f)`, or the same
//! `principal_headers` / `principal_cookies`). To rotate the secret, sign with
//! the new one and `.also_accept(old)` until the old tokens have expired
//! (default TTL one hour, `.ttl(d)`), then drop it.
//!
//! | | client keys (the default) | token mode (`.tokens(issuer)`) |
//! | --- | --- | --- |
//! | who makes the key | the client (a UUID v4 per logical request) | the server, when the form or page is shown |
//! | the key's life | the record's TTL, from first use | the token's TTL from issue (default 1 h), for the first use and its retries alike: a retry after it gets 400 `token-expired` |
//! | depends on the client's randomness | yes: a weak or reused key collides within the caller's scope | no: a key the server did not sign is refused |
//! | extra round trip | none | one `POST` for the token, before the action |
//! | suits | API clients, SDKs, servers calling servers, queues | user-driven actions in a browser or app: submit an order, pay, refund; double clicks and reloads |
//!
//! **Versions.** A retried update is safe only if the resource has not moved
//! on meanwhile. Send the version in `ETag` (`ETag::strong(version)` is a
//! response part), have clients send it back in `If-Match`, and check it
//! where the update happens, changing the resource and its version together:
//! `require_if_match(if_match)?` answers 428 when the header is missing, and
//! `if_match.check(&current)?` 412 when no listed tag matches (RFC 9110:
//! a list of tags or `*`, strong comparison, so a weak `W/"…"` tag never
//! matches). With both a key and `If-Match`:
//!
//! - a first request against a stale version gets 412; 412 and 428 are never
//!   stored (whatever `store_status` says), so the same key, sent again with
//!   the current version, runs;
//! - a completed update retried with its key replays its stored answer (with
//!   the `ETag` it returned), even though the version has moved on since: the
//!   retry is the same update, not a stale one;
//! - a new update (a new key) against an old version gets 412, and the client
//!   reloads.
//!
//! ```text
//! GET  /payments/pay_1                                   -> 200, ETag: "1"
//! POST /tokens                                           -> 201 {"token":"AQAA…","expires_in":3600}
//! POST /payments/pay_1/refunds  Idempotency-Key: "AQAA…"  If-Match: "1"  -> 201, ETag: "2"
//! POST /payments/pay_1/refunds  Idempotency-Key: "AQAA…"  If-Match: "1"  -> 201, ETag: "2", Idempotent-Replayed: true
//! POST /payments/pay_1/refunds  Idempotency-Key: "<new>"  If-Match: "1"  -> 412 precondition-failed
//! ```
//!
//! The payments example below serves exactly this route
//! (`POST /payments/{id}/refunds`), and `integration/tests/all/http_tokens.rs`
//! drives it over HTTP.
//!
//! # Try it: the payments example
//!
//! `integration/examples/axum_payments.rs` is a small payments service: `POST /payments`
//! behind the layer, whose handler calls an `#[idempotent]` service function
//! that charges a fake card gateway with `idem::child_key("gateway")` as the
//! gateway's own idempotency key; `GET /payments/{id}` reads a receipt back
//! with its version in `ETag`; `POST /payments/{id}/refunds` takes only
//! tokens from `POST /tokens` and needs `If-Match` (above).
//! Start it. It keeps its records in memory; another store takes its
//! feature and a flag: `--features axum,sqlite -- --sqlite payments.db`,
//! `--features axum,redis -- --redis redis://127.0.0.1:6379` or
//! `--features axum,postgres -- --postgres postgres://…`. With Redis or
//! PostgreSQL, several instances on several ports share their records: a
//! retry sent to another instance is replayed too.
//!
//! ```sh
//! cargo run -p idem-integration --example axum_payments
//! # payments on http://127.0.0.1:3000 (store: memory); Ctrl-C stops
//! ```
//!
//! (`IDEM_EXAMPLE_ADDR=127.0.0.1:8080` moves it.) In another terminal, pay (the
//! answers below leave out the `date` header):
//!
//! ```console
//! $ curl -i http://127.0.0.1:3000/payments \
//!     -H 'Idempotency-Key: "order-1"' -H 'Content-Type: application/json' \
//!     -d '{"amount_cents": 1200, "currency": "EUR"}'
//! HTTP/1.1 201 Created
//! content-type: application/json
//! location: /payments/pay_a4e2bcb077f451f5
//! content-length: 90
//!
//! {"id":"pay_a4e2bcb077f451f5","amount_cents":1200,"currency":"EUR","gateway_charge":"ch_1"}
//! ```
//!
//! Send exactly the same request again, as a client retrying after a timeout
//! would. The card is not charged again; the first answer comes back, marked
//! as a replay:
//!
//! ```console
//! $ curl -i http://127.0.0.1:3000/payments \
//!     -H 'Idempotency-Key: "order-1"' -H 'Content-Type: application/json' \
//!     -d '{"amount_cents": 1200, "currency": "EUR"}'
//! HTTP/1.1 201 Created
//! content-type: application/json
//! location: /payments/pay_a4e2bcb077f451f5
//! idempotent-replayed: true
//! content-length: 90
//!
//! {"id":"pay_a4e2bcb077f451f5","amount_cents":1200,"currency":"EUR","gateway_charge":"ch_1"}
//! ```
//!
//! The same key with a different body is a client bug, and is refused:
//!
//! ```console
//! $ curl -i http://127.0.0.1:3000/payments \
//!     -H 'Idempotency-Key: "order-1"' -H 'Content-Type: application/json' \
//!     -d '{"amount_cents": 999, "currency": "EUR"}'
//! HTTP/1.1 422 Unprocessable Entity
//! content-type: application/problem+json
//!
//! {"type":"https://docs.rs/idemkit/latest/idem/http/index.html#fingerprint-mismatch","title":"Idempotency-Key reused","status":422,"detail":"This Idempotency-Key was already used with a different request; use a new key for a new request."}
//! ```
//!
//! A double click: two identical requests at once. One is charged, the other
//! is told to come back (the gateway takes 200 ms here):
//!
//! ```console
//! $ for i in 1 2; do
//!     curl -s -o /dev/null -w '%{http_code} retry-after=%header{retry-after}\n' \
//!       http://127.0.0.1:3000/payments \
//!       -H 'Idempotency-Key: "order-2"' -H 'Content-Type: application/json' \
//!       -d '{"amount_cents": 500, "currency": "EUR"}' &
//!   done; wait
//! 409 retry-after=30
//! 201 retry-after=
//! ```
//!
//! (`%header{…}` needs curl 7.84 or later.) A declined card is a final answer
//! (402), so it is stored and replayed too; a gateway outage (502) is not, so
//! a retry charges. The key belongs to its user: the demo takes
//! `Authorization: Bearer NAME` as user NAME, and alice's `order-1` is a new
//! payment, not the anonymous one above:
//!
//! ```console
//! $ curl -s http://127.0.0.1:3000/payments -H 'Authorization: Bearer alice' \
//!     -H 'Idempotency-Key: "order-1"' -H 'Content-Type: application/json' \
//!     -d '{"amount_cents": 1200, "currency": "EUR"}'
//! {"id":"pay_fb22a386dfe640e3","amount_cents":1200,"currency":"EUR","gateway_charge":"ch_3"}
//! ```
//!
//! A client that gives up does not make the card be charged twice. The fake
//! gateway takes 200 ms; this client waits 100 ms, then retries at once, then
//! again a little later:
//!
//! ```console
//! $ B='{"amount_cents": 1200, "currency": "EUR"}'
//! $ curl -s --max-time 0.1 http://127.0.0.1:3000/payments -H 'Idempotency-Key: "order-7"' \
//!     -H 'Content-Type: application/json' -d "$B"; echo "curl exit $?"
//! curl exit 28
//! $ curl -si http://127.0.0.1:3000/payments -H 'Idempotency-Key: "order-7"' \
//!     -H 'Content-Type: application/json' -d "$B"
//! HTTP/1.1 409 Conflict
//! content-type: application/problem+json
//! retry-after: 30
//! …
//! $ sleep 0.3; curl -si http://127.0.0.1:3000/payments -H 'Idempotency-Key: "order-7"' \
//!     -H 'Content-Type: application/json' -d "$B"
//! HTTP/1.1 201 Created
//! location: /payments/pay_6742627c3c2a0b66
//! idempotent-replayed: true
//! …
//! {"id":"pay_6742627c3c2a0b66","amount_cents":1200,"currency":"EUR","gateway_charge":"ch_1"}
//! ```
//!
//! The first request ran on after its client left and stored its answer; the
//! retry got it replayed (`ch_1`: one charge). `Retry-After` is 30 s (the
//! lease) here because the route had not run before; once it has, it is the
//! route's usual run time, rounded up to whole seconds.
//!
//! Missing or oversized keys are 400 before anything runs:
//!
//! ```console
//! $ curl -s http://127.0.0.1:3000/payments -H 'Content-Type: application/json' \
//!     -d '{"amount_cents": 1200, "currency": "EUR"}'
//! {"type":"https://docs.rs/idemkit/latest/idem/http/index.html#missing-key","title":"Missing Idempotency-Key","status":400,"detail":"This request must carry an Idempotency-Key header, e.g. Idempotency-Key: \"8e03978e-40d5-43e8-bc93-6894a57f9324\"."}
//! ```
//!
//! Read a payment back (use the `location` from your first answer; ids differ
//! on every run):
//!
//! ```console
//! $ curl -s http://127.0.0.1:3000/payments/pay_a4e2bcb077f451f5
//! {"id":"pay_a4e2bcb077f451f5","amount_cents":1200,"currency":"EUR","gateway_charge":"ch_1"}
//! ```
