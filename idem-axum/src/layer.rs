//! `IdempotencyLayer`: claim, run, store and replay whole HTTP responses.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderName, Method, StatusCode, header, response};

use crate::defaults::{captured_by_default, stores_by_default};
use crate::flights::Flights;
use crate::principal::PrincipalRule;
use crate::run_times::RunTimes;
use crate::scope::JsonBodies;
use crate::token::TokenIssuer;
use idem_core::{DEFAULT_TTL, Idempotency};
type StoreStatus = dyn Fn(StatusCode) -> bool + Send + Sync;
type Capture = dyn Fn(&str, &response::Parts) -> bool + Send + Sync;

/// The largest request body buffered by default: 2 MiB, axum's own default
/// body limit, so the layer never refuses what a `Json` extractor accepts.
pub const DEFAULT_MAX_BODY_BYTES: usize = 2 << 20;

/// The largest response body stored by default: 512 KiB, which fits the
/// handle's default record limit of 1 MiB even when written as base64
/// (bodies grow by at most a third in the record).
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 512 << 10;

/// A tower [`Layer`](tower::Layer) that makes the unsafe requests of an axum router
/// idempotent, after the IETF draft "The Idempotency-Key HTTP Header Field".
///
/// For each request whose method is one of [`methods`](Self::methods)
/// (POST and PATCH by default) the layer
///
/// 1. reads the `Idempotency-Key` header ([`IdempotencyKey`](crate::IdempotencyKey)); a missing
///    key is 400 unless [`key_required(false)`](Self::key_required), then
///    the request passes through untouched; an invalid one is always 400;
/// 2. scopes the key by method, matched route (axum's [`MatchedPath`](axum::extract::MatchedPath), or
///    the URI path where there is none) and the caller, so two callers'
///    keys never meet: by default a hash of the request's credentials
///    ([`principal_headers`](Self::principal_headers),
///    [`principal_cookies`](Self::principal_cookies)), or the
///    [`principal`](Self::principal) function's answer;
/// 3. buffers the body (413 beyond [`max_body_bytes`](Self::max_body_bytes),
///    nothing claimed) and fingerprints it: SHA-256 over the request's path
///    and query and its body: a JSON body (`application/json`, `…+json`)
///    by the value it parses as, so key order and whitespace do not
///    matter, unless [`exact_bytes`](Self::exact_bytes);
/// 4. claims the key; only the winner runs the inner service. Its response
///    is stored (status, body and the [`stored_headers`](Self::stored_headers))
///    when [`store_status`](Self::store_status) says so (by default 2xx
///    and the 4xx that are a final answer, such as 402:
///    [`stores_by_default`]), otherwise the claim is released and a retry
///    runs again (a 5xx, or a 400/401/404/415/422 refusing the request
///    before anything happened);
/// 5. answers duplicates with the stored response plus
///    `Idempotent-Replayed: true`; a duplicate arriving while the first
///    still runs gets 409 with `Retry-After`, or, with
///    [`wait`](Self::wait), the first one's answer (stored or not); the
///    same key with another body is 422.
///
/// A response body of known length up to
/// [`max_response_bytes`](Self::max_response_bytes) (every `Json` or
/// `String` answer) is sent once its record is written, so a client that
/// has it finds it stored. Any other body is streamed to the client as the
/// handler produces it and captured on the way; its last frame waits for
/// the record. A body larger than the limit, or one that
/// [`capture`](Self::capture) exempts (server-sent events by default), is
/// sent but not stored, and still settles the key: duplicates get the 500
/// `not-stored` problem, never a second run.
///
/// The inner service runs on a task of its own: a client that disconnects
/// or times out does not cancel it (nor the reading of its body), and its
/// answer is stored for the client's retry. A retry meanwhile gets 409
/// with a `Retry-After` of the route's recent run time here, or one
/// second before any run of the route has ended here, at most the
/// remaining lease. A panic in the inner service releases the claim and
/// answers 500. On shutdown, [`Idempotency::drain`] waits for such
/// requests.
///
/// Compression belongs outside the layer
/// (`.layer(IdempotencyLayer::new(idem)).layer(CompressionLayer::new())`):
/// the record keeps the plain body and each replay is encoded for the
/// duplicate's own `Accept-Encoding`. Inside, the encoded body is stored
/// with its `Content-Encoding` and `Vary` and replayed as it is; a
/// duplicate whose `Accept-Encoding` refuses that encoding gets 406.
///
/// Errors are `application/problem+json` ([`Problem`](crate::Problem)). Other methods pass
/// through. Inside the inner service, [`child_key`](idem_core::child_key)
/// derives a key for a downstream API from this request's scope and key,
/// the same on every retry.
///
/// ```
/// use std::time::Duration;
/// use axum::{Router, http::StatusCode, routing::post};
/// use idem::http::IdempotencyLayer;
/// use idem::{Idempotency, MemoryStore};
///
/// let idem = Idempotency::new(MemoryStore::new());
/// let app: Router = Router::new()
///     .route("/orders", post(|| async { (StatusCode::CREATED, "order 1") }))
///     .layer(
///         IdempotencyLayer::new(idem)
///             .ttl(Duration::from_secs(24 * 3600))
///             .wait(Duration::from_secs(5))
///             .principal(|parts| {
///                 let user = parts.headers.get("x-user")?;
///                 Some(user.to_str().ok()?.to_owned())
///             }),
///     );
/// ```
#[derive(Clone)]
pub struct IdempotencyLayer {
    pub(crate) config: Arc<Config>,
}

#[derive(Clone)]
pub(crate) struct Config {
    pub(crate) idem: Idempotency,
    pub(crate) methods: Vec<Method>,
    /// Methods keyed by the resource, with `Mismatch::Rerun`.
    pub(crate) state_updates: Vec<Method>,
    pub(crate) key_required: bool,
    pub(crate) ttl: Duration,
    /// `None`: no tombstone.
    pub(crate) tombstone: Option<Duration>,
    /// `None`: the runtime's default (30 s, or the TTL if shorter).
    pub(crate) lease: Option<Duration>,
    pub(crate) wait: Duration,
    pub(crate) max_body_bytes: usize,
    pub(crate) max_response_bytes: usize,
    pub(crate) stored_headers: Vec<HeaderName>,
    pub(crate) store_status: Arc<StoreStatus>,
    /// Whether a response of a stored status is captured for replay.
    pub(crate) capture: Arc<Capture>,
    pub(crate) json: JsonBodies,
    pub(crate) principal: PrincipalRule,
    /// Token mode: only keys this issuer minted for the caller.
    pub(crate) tokens: Option<TokenIssuer>,
    pub(crate) run_times: Arc<RunTimes>,
    pub(crate) flights: Arc<Flights>,
    /// The transactional mode: a transaction per guarded request.
    pub(crate) transactions: Option<Arc<dyn crate::transaction::Begin>>,
}

impl IdempotencyLayer {
    /// A layer storing its records through `idem`, with the defaults: POST
    /// and PATCH, key required, TTL 24 h, lease 30 s, no wait, request
    /// bodies up to 2 MiB, responses up to 512 KiB stored with their
    /// `Content-Type`, `Content-Encoding`, `Content-Language`,
    /// `Content-Location`, `Location`, `ETag`, `Last-Modified`,
    /// `Cache-Control` and `Vary` headers.
    ///
    /// ```
    /// let layer = idem::http::IdempotencyLayer::new(idem::Idempotency::new(idem::MemoryStore::new()));
    /// # let _ = layer;
    /// ```
    pub fn new(idem: Idempotency) -> Self {
        Self {
            config: Arc::new(Config {
                idem,
                methods: vec![Method::POST, Method::PATCH],
                state_updates: Vec::new(),
                key_required: true,
                ttl: DEFAULT_TTL,
                tombstone: None,
                lease: None,
                wait: Duration::ZERO,
                max_body_bytes: DEFAULT_MAX_BODY_BYTES,
                max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
                stored_headers: vec![
                    header::CONTENT_TYPE,
                    header::CONTENT_ENCODING,
                    header::CONTENT_LANGUAGE,
                    header::CONTENT_LOCATION,
                    header::LOCATION,
                    header::ETAG,
                    header::LAST_MODIFIED,
                    header::CACHE_CONTROL,
                    header::VARY,
                ],
                store_status: Arc::new(stores_by_default),
                capture: Arc::new(captured_by_default),
                json: JsonBodies::Canonical,
                principal: PrincipalRule::default(),
                tokens: None,
                run_times: Arc::default(),
                flights: Arc::default(),
                transactions: None,
            }),
        }
    }

    pub(crate) fn config_mut(&mut self) -> &mut Config {
        Arc::make_mut(&mut self.config)
    }

    /// The methods the layer handles; others pass through. Default: POST
    /// and PATCH.
    ///
    /// ```
    /// # use axum::http::Method;
    /// # let layer = idem::http::IdempotencyLayer::new(idem::Idempotency::new(idem::MemoryStore::new()));
    /// let layer = layer.methods([Method::POST, Method::PATCH, Method::PUT, Method::DELETE]);
    /// ```
    pub fn methods(mut self, methods: impl IntoIterator<Item = Method>) -> Self {
        self.config_mut().methods = methods.into_iter().collect();
        self
    }

    /// Whether a handled request without `Idempotency-Key` is refused with
    /// 400 (`true`, the default) or passed through without idempotency.
    ///
    /// ```
    /// # let layer = idem::http::IdempotencyLayer::new(idem::Idempotency::new(idem::MemoryStore::new()));
    /// let layer = layer.key_required(false); // keyless requests run as before
    /// ```
    pub fn key_required(mut self, required: bool) -> Self {
        self.config_mut().key_required = required;
        self
    }

    /// How long a stored response is replayed. Default: 24 hours.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # let layer = idem::http::IdempotencyLayer::new(idem::Idempotency::new(idem::MemoryStore::new()));
    /// let layer = layer.ttl(Duration::from_secs(7 * 24 * 3600));
    /// ```
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.config_mut().ttl = ttl;
        self
    }

    /// Keeps a tombstone for `tombstone` after the TTL
    /// ([`Call::tombstone`](idem_core::Call::tombstone)): a duplicate that comes
    /// after its stored response expired gets 410 with the
    /// [`expired`](crate#expired) problem instead of running the
    /// handler again. Default: none (after the TTL a duplicate runs as new).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # let layer = idem::http::IdempotencyLayer::new(idem::Idempotency::new(idem::MemoryStore::new()));
    /// let layer = layer.tombstone(Duration::from_secs(30 * 24 * 3600));
    /// ```
    pub fn tombstone(mut self, tombstone: Duration) -> Self {
        self.config_mut().tombstone = Some(tombstone);
        self
    }

    /// How long a claim is held before another request may take over (it
    /// is renewed while the inner service runs). Default: 30 seconds.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # let layer = idem::http::IdempotencyLayer::new(idem::Idempotency::new(idem::MemoryStore::new()));
    /// let layer = layer.lease(Duration::from_secs(10));
    /// ```
    pub fn lease(mut self, lease: Duration) -> Self {
        self.config_mut().lease = Some(lease);
        self
    }

    /// How long a duplicate waits for the first request's answer before
    /// getting 409 with `Retry-After`. Default: zero (409 at once).
    ///
    /// A duplicate that waited on a first request that failed (its answer
    /// is not stored, such as a 5xx, and the key released) gets that
    /// answer too, with `Idempotent-Replayed: true` (or a 409
    /// `attempt-failed` problem when the answer was larger than
    /// [`max_response_bytes`](Self::max_response_bytes)), instead of
    /// running the request again: the handler runs once for a burst of
    /// duplicates. A retry sent after that answer runs again. This holds
    /// for duplicates that reach the same server instance; a duplicate
    /// waiting on another instance (sharing the store) sees the key
    /// released and may run it.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # let layer = idem::http::IdempotencyLayer::new(idem::Idempotency::new(idem::MemoryStore::new()));
    /// let layer = layer.wait(Duration::from_secs(10));
    /// ```
    pub fn wait(mut self, wait: Duration) -> Self {
        self.config_mut().wait = wait;
        self
    }

    /// The largest request body accepted; a larger one is 413 and nothing
    /// is claimed. Default: 2 MiB.
    ///
    /// ```
    /// # let layer = idem::http::IdempotencyLayer::new(idem::Idempotency::new(idem::MemoryStore::new()));
    /// let layer = layer.max_body_bytes(64 * 1024);
    /// ```
    pub fn max_body_bytes(mut self, limit: usize) -> Self {
        self.config_mut().max_body_bytes = limit;
        self
    }

    /// The largest response body stored. Responses are streamed to the
    /// client as the handler produces them and captured on the way up to
    /// this size. A larger one is still sent whole, but not stored; the
    /// key is settled all the same (the handler ran): duplicates get a 500
    /// `not-stored` problem until the TTL ends, never a second run, and a
    /// warning is logged. When the body's length is known up front the
    /// first response says so with `Idempotent-Stored: false`. Keep it
    /// below the handle's
    /// [`max_record_bytes`](idem_core::IdempotencyBuilder::max_record_bytes)
    /// less a third (bodies may be stored as base64); a record that does
    /// not fit is settled the same way (its first response, sent once the
    /// record is written, carries no `Idempotent-Stored` header: the record
    /// limit is the handle's, checked as it stores). Default: 512 KiB.
    ///
    /// ```
    /// # let layer = idem::http::IdempotencyLayer::new(idem::Idempotency::new(idem::MemoryStore::new()));
    /// let layer = layer.max_response_bytes(64 * 1024);
    /// ```
    pub fn max_response_bytes(mut self, limit: usize) -> Self {
        self.config_mut().max_response_bytes = limit;
        self
    }

    /// The response headers stored and replayed, replacing the default set
    /// (`Content-Type`, `Content-Encoding`, `Content-Language`,
    /// `Content-Location`, `Location`, `ETag`, `Last-Modified`,
    /// `Cache-Control`, `Vary`). `Content-Encoding` is kept in any case:
    /// it belongs to the body. Replays also carry `Idempotent-Replayed`.
    ///
    /// ```
    /// # use axum::http::{HeaderName, header};
    /// # let layer = idem::http::IdempotencyLayer::new(idem::Idempotency::new(idem::MemoryStore::new()));
    /// let layer = layer.stored_headers([
    ///     header::CONTENT_TYPE,
    ///     header::LOCATION,
    ///     HeaderName::from_static("x-request-cost"),
    /// ]);
    /// ```
    pub fn stored_headers(mut self, names: impl IntoIterator<Item = HeaderName>) -> Self {
        self.config_mut().stored_headers = names.into_iter().collect();
        self
    }

    /// Which response statuses are stored and replayed; for the others the
    /// claim is released so a retry runs again. Default:
    /// [`stores_by_default`]. 412 and 428 (a failed or missing `If-Match`,
    /// [`IfMatch`](crate::IfMatch)) are never stored, whatever this
    /// says: the corrected retry with the same key must run.
    ///
    /// ```
    /// # use axum::http::StatusCode;
    /// # let layer = idem::http::IdempotencyLayer::new(idem::Idempotency::new(idem::MemoryStore::new()));
    /// // Store only successes: every 4xx may be retried with the same key.
    /// let layer = layer.store_status(|status: StatusCode| status.is_success());
    /// ```
    pub fn store_status(
        mut self,
        stores: impl Fn(StatusCode) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.config_mut().store_status = Arc::new(stores);
        self
    }

    /// Which responses of a stored status are captured for replay; the
    /// others are streamed to the client untouched (a client that goes
    /// away ends them) and the key is settled without a stored answer:
    /// duplicates get the 500 `not-stored` problem until the TTL ends, and
    /// the first response carries `Idempotent-Stored: false`. For routes
    /// whose answer is a stream with no end, or not worth keeping. The
    /// function gets the matched route (or the URI path) and the
    /// response's head. Default: [`captured_by_default`] (all but
    /// `text/event-stream`).
    ///
    /// ```
    /// # let layer = idem::http::IdempotencyLayer::new(idem::Idempotency::new(idem::MemoryStore::new()));
    /// let layer = layer.capture(|route, response| {
    ///     route != "/exports" && idem::http::captured_by_default(route, response)
    /// });
    /// ```
    pub fn capture(
        mut self,
        captures: impl Fn(&str, &response::Parts) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.config_mut().capture = Arc::new(captures);
        self
    }

    /// Fingerprints a JSON request body by its bytes, as every other body,
    /// rather than by its value: the same object with its keys in another
    /// order is then another request (422). By default a body sent as
    /// `application/json` or `…+json` is fingerprinted by the JSON value it
    /// parses as (as `#[idempotent]` hashes a payload, map entries in
    /// sorted order), so a client that rebuilds its request from a map, or
    /// with another serializer, is still recognised.
    ///
    /// Records written by a layer that fingerprinted JSON by its bytes
    /// (this option, or idem before 0.1) still replay: a request whose
    /// value's fingerprint is refused is claimed once more by its bytes'.
    ///
    /// ```
    /// # let layer = idem::http::IdempotencyLayer::new(idem::Idempotency::new(idem::MemoryStore::new()));
    /// let layer = layer.exact_bytes();
    /// ```
    pub fn exact_bytes(mut self) -> Self {
        self.config_mut().json = JsonBodies::Exact;
        self
    }
}

impl fmt::Debug for IdempotencyLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.config;
        f.debug_struct("IdempotencyLayer")
            .field("methods", &c.methods)
            .field("state_updates", &c.state_updates)
            .field("key_required", &c.key_required)
            .field("ttl", &c.ttl)
            .field("tombstone", &c.tombstone)
            .field("lease", &c.lease)
            .field("wait", &c.wait)
            .field("max_body_bytes", &c.max_body_bytes)
            .field("max_response_bytes", &c.max_response_bytes)
            .field("stored_headers", &c.stored_headers)
            .field("json", &c.json)
            .field("principal", &c.principal)
            .field("tokens", &c.tokens)
            .finish_non_exhaustive()
    }
}
