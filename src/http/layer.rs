//! `IdempotencyLayer`: claim, run, store and replay whole HTTP responses.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::http::request::Parts;
use axum::http::{HeaderName, Method, Request, Response, StatusCode, header, response};
use bytes::Bytes;
use tower::{Layer, Service};

use crate::http::flights::Flights;
use crate::http::principal::PrincipalRule;
use crate::http::request;
use crate::http::run_times::RunTimes;
use crate::{DEFAULT_TTL, Idempotency};

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type StoreStatus = dyn Fn(StatusCode) -> bool + Send + Sync;
type Capture = dyn Fn(&str, &response::Parts) -> bool + Send + Sync;

/// The largest request body buffered by default: 2 MiB, axum's own default
/// body limit, so the layer never refuses what a `Json` extractor accepts.
pub const DEFAULT_MAX_BODY_BYTES: usize = 2 << 20;

/// The largest response body stored by default: 512 KiB, which fits the
/// handle's default record limit of 1 MiB even when written as base64
/// (bodies grow by at most a third in the record).
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 512 << 10;

/// A tower [`Layer`] that makes the unsafe requests of an axum router
/// idempotent, after the IETF draft "The Idempotency-Key HTTP Header Field".
///
/// For each request whose method is one of [`methods`](Self::methods)
/// (POST and PATCH by default) the layer
///
/// 1. reads the `Idempotency-Key` header ([`IdempotencyKey`](crate::http::IdempotencyKey)); a missing
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
///    and query and its body (or its JSON value, with
///    [`canonical_json`](Self::canonical_json));
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
/// with a `Retry-After` of the route's recent run time (at most the
/// remaining lease). A panic in the inner service releases the claim and
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
/// Errors are `application/problem+json` ([`Problem`](crate::http::Problem)). Other methods pass
/// through. Inside the inner service, [`child_key`](crate::child_key)
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
    config: Arc<Config>,
}

#[derive(Clone)]
pub(crate) struct Config {
    pub(crate) idem: Idempotency,
    pub(crate) methods: Vec<Method>,
    pub(crate) key_required: bool,
    pub(crate) ttl: Duration,
    /// `None`: the runtime's default (30 s, or the TTL if shorter).
    pub(crate) lease: Option<Duration>,
    pub(crate) wait: Duration,
    pub(crate) max_body_bytes: usize,
    pub(crate) max_response_bytes: usize,
    pub(crate) stored_headers: Vec<HeaderName>,
    pub(crate) store_status: Arc<StoreStatus>,
    /// Whether a response of a stored status is captured for replay.
    pub(crate) capture: Arc<Capture>,
    pub(crate) canonical_json: bool,
    pub(crate) principal: PrincipalRule,
    pub(crate) run_times: Arc<RunTimes>,
    pub(crate) flights: Arc<Flights>,
}

/// The 4xx answers that mean the request was refused before anything
/// happened (malformed, unauthenticated, forbidden, not found, not
/// acceptable, too large, unsupported media type, invalid, a failed
/// precondition), or that ask the client to try again (408, 409, 425,
/// 429): the key is released, so the corrected request or the retry runs.
const RELEASED_4XX: [u16; 25] = [
    400, 401, 403, 404, 405, 406, 407, 408, 409, 411, 412, 413, 414, 415, 416, 417, 421, 422, 424,
    425, 426, 428, 429, 431, 451,
];

/// The default of [`IdempotencyLayer::store_status`]: what says something
/// happened is stored; what says nothing happened releases the key.
///
/// Stored: every 2xx, `303 See Other` (the usual answer to a POST that
/// created something elsewhere), and the 4xx that are a final answer of
/// the business, such as `402 Payment Required` for a declined card, or
/// `410 Gone`, and any 4xx this list does not know. Released: the 4xx that
/// refuse a request before it is processed (400, 401, 403, 404, 405, 406,
/// 407, 411, 412, 413, 414, 415, 416, 417, 421, 422, 424, 426, 428, 431,
/// 451) or ask to try again (408, 409, 425, 429); other 1xx and 3xx; every
/// 5xx.
///
/// 422 is released because frameworks answer it for a body that does not
/// validate (axum's `Json` for a missing field); idem's own 422 (the key
/// reused with another body) is not a handler's answer and stores nothing.
///
/// ```
/// use axum::http::StatusCode;
/// use idem::http::stores_by_default;
///
/// assert!(stores_by_default(StatusCode::CREATED));
/// assert!(stores_by_default(StatusCode::PAYMENT_REQUIRED));
/// assert!(!stores_by_default(StatusCode::UNSUPPORTED_MEDIA_TYPE));
/// assert!(!stores_by_default(StatusCode::UNPROCESSABLE_ENTITY));
/// assert!(!stores_by_default(StatusCode::TOO_MANY_REQUESTS));
/// assert!(!stores_by_default(StatusCode::INTERNAL_SERVER_ERROR));
/// ```
pub fn stores_by_default(status: StatusCode) -> bool {
    status.is_success()
        || status == StatusCode::SEE_OTHER
        || (status.is_client_error() && !RELEASED_4XX.contains(&status.as_u16()))
}

/// The default of [`IdempotencyLayer::capture`]: every response but a
/// `text/event-stream` (server-sent events), which may never end.
///
/// ```
/// use axum::http::{Response, header};
/// use idem::http::captured_by_default;
///
/// let (sse, _) = Response::builder().header(header::CONTENT_TYPE, "text/event-stream").body(()).unwrap().into_parts();
/// assert!(!captured_by_default("/events", &sse));
/// let (json, _) = Response::builder().header(header::CONTENT_TYPE, "application/json").body(()).unwrap().into_parts();
/// assert!(captured_by_default("/orders", &json));
/// ```
pub fn captured_by_default(_route: &str, response: &response::Parts) -> bool {
    let content_type = response.headers.get(header::CONTENT_TYPE);
    !content_type.is_some_and(|value| {
        value
            .as_bytes()
            .split(|&b| b == b';')
            .next()
            .is_some_and(|essence| {
                essence
                    .trim_ascii()
                    .eq_ignore_ascii_case(b"text/event-stream")
            })
    })
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
                key_required: true,
                ttl: DEFAULT_TTL,
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
                canonical_json: false,
                principal: PrincipalRule::default(),
                run_times: Arc::default(),
                flights: Arc::default(),
            }),
        }
    }

    fn config(&mut self) -> &mut Config {
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
        self.config().methods = methods.into_iter().collect();
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
        self.config().key_required = required;
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
        self.config().ttl = ttl;
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
        self.config().lease = Some(lease);
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
        self.config().wait = wait;
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
        self.config().max_body_bytes = limit;
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
    /// [`max_record_bytes`](crate::IdempotencyBuilder::max_record_bytes)
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
        self.config().max_response_bytes = limit;
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
        self.config().stored_headers = names.into_iter().collect();
        self
    }

    /// Which response statuses are stored and replayed; for the others the
    /// claim is released so a retry runs again. Default:
    /// [`stores_by_default`].
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
        self.config().store_status = Arc::new(stores);
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
        self.config().capture = Arc::new(captures);
        self
    }

    /// Fingerprints a JSON request body by its value rather than its bytes:
    /// the same object with its keys in another order, or other
    /// whitespace, is the same request (as for `#[idempotent]`, whose
    /// fingerprint hashes the parsed value with map entries in sorted
    /// order). A body that is not JSON is still compared byte for byte.
    /// Default: off (bytes).
    ///
    /// ```
    /// # let layer = idem::http::IdempotencyLayer::new(idem::Idempotency::new(idem::MemoryStore::new()));
    /// let layer = layer.canonical_json();
    /// ```
    pub fn canonical_json(mut self) -> Self {
        self.config().canonical_json = true;
        self
    }

    /// Who sends the request, as part of the key's scope: two principals
    /// using the same key never see each other's responses. Typically reads
    /// what an authentication layer (placed outside this one) put into the
    /// request's extensions. `None` is the anonymous principal. Replaces the
    /// default, which scopes keys by a hash of the request's credentials
    /// ([`principal_headers`](Self::principal_headers)).
    ///
    /// ```
    /// #[derive(Clone)]
    /// struct User { id: u64 }
    ///
    /// # let layer = idem::http::IdempotencyLayer::new(idem::Idempotency::new(idem::MemoryStore::new()));
    /// let layer = layer.principal(|parts| parts.extensions.get::<User>().map(|u| u.id.to_string()));
    /// ```
    pub fn principal(
        mut self,
        principal: impl Fn(&Parts) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.config().principal = PrincipalRule::custom(principal);
        self
    }

    /// The request headers whose values identify the caller when no
    /// [`principal`](Self::principal) is set. Default: `Authorization`.
    ///
    /// With no `principal`, the layer scopes every key by a SHA-256 hash of
    /// these headers and of the [`principal_cookies`](Self::principal_cookies),
    /// so a caller who reuses (or guesses) another caller's key gets a
    /// record of their own, never the other's response. The raw values are
    /// neither stored nor logged; logs show a short hash. Requests that carry
    /// none of them share the anonymous scope. Replaces a `principal`
    /// function set before.
    ///
    /// ```
    /// # use axum::http::{HeaderName, header};
    /// # let layer = idem::http::IdempotencyLayer::new(idem::Idempotency::new(idem::MemoryStore::new()));
    /// let layer = layer.principal_headers([header::AUTHORIZATION, HeaderName::from_static("x-api-key")]);
    /// ```
    pub fn principal_headers(mut self, names: impl IntoIterator<Item = HeaderName>) -> Self {
        let config = self.config();
        config.principal = config.principal.with_headers(names.into_iter().collect());
        self
    }

    /// Session cookies whose values identify the caller when no
    /// [`principal`](Self::principal) is set, beside the
    /// [`principal_headers`](Self::principal_headers). Name only the
    /// cookies that carry the session: a cookie that changes between a
    /// request and its retry (a tracking id) would make the retry a new
    /// request. Default: none. Replaces a `principal` function set before.
    ///
    /// ```
    /// # let layer = idem::http::IdempotencyLayer::new(idem::Idempotency::new(idem::MemoryStore::new()));
    /// let layer = layer.principal_cookies(["session"]);
    /// ```
    pub fn principal_cookies<N: Into<String>>(
        mut self,
        names: impl IntoIterator<Item = N>,
    ) -> Self {
        let config = self.config();
        config.principal = config
            .principal
            .with_cookies(names.into_iter().map(Into::into).collect());
        self
    }

    /// Opts out of scoping keys by caller: every caller who sends the same
    /// key (and body) to the same route gets the same stored response,
    /// whoever stored it. Only for routes where that is the point, such as
    /// a public endpoint whose responses hold nothing private; anywhere
    /// else it hands one caller's response to another who reuses the key.
    ///
    /// ```
    /// # let layer = idem::http::IdempotencyLayer::new(idem::Idempotency::new(idem::MemoryStore::new()));
    /// let layer = layer.share_keys_across_callers();
    /// ```
    pub fn share_keys_across_callers(mut self) -> Self {
        self.config().principal = PrincipalRule::SharedAcrossCallers;
        self
    }
}

impl fmt::Debug for IdempotencyLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.config;
        f.debug_struct("IdempotencyLayer")
            .field("methods", &c.methods)
            .field("key_required", &c.key_required)
            .field("ttl", &c.ttl)
            .field("lease", &c.lease)
            .field("wait", &c.wait)
            .field("max_body_bytes", &c.max_body_bytes)
            .field("max_response_bytes", &c.max_response_bytes)
            .field("stored_headers", &c.stored_headers)
            .field("canonical_json", &c.canonical_json)
            .field("principal", &c.principal)
            .finish_non_exhaustive()
    }
}

impl<S> Layer<S> for IdempotencyLayer {
    type Service = IdempotencyService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        IdempotencyService {
            inner,
            config: Arc::clone(&self.config),
        }
    }
}

/// The service made by [`IdempotencyLayer`] around an inner service.
///
/// ```
/// use axum::{Router, routing::post};
/// use idem::http::{IdempotencyLayer, IdempotencyService};
/// use tower::Layer;
///
/// let layer = IdempotencyLayer::new(idem::Idempotency::new(idem::MemoryStore::new()));
/// // Around a whole router (no matched route is known there: the scope
/// // uses the URI path).
/// let service: IdempotencyService<Router> = layer.layer(Router::new().route("/", post(|| async {})));
/// # let _ = service;
/// ```
#[derive(Clone)]
pub struct IdempotencyService<S> {
    inner: S,
    config: Arc<Config>,
}

impl<S: fmt::Debug> fmt::Debug for IdempotencyService<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IdempotencyService")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S, B> Service<Request<Body>> for IdempotencyService<S>
where
    S: Service<Request<Body>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Send,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        // The ready service handles this request; the clone takes its place.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        if !self.config.methods.contains(request.method()) {
            return Box::pin(request::pass(inner, request));
        }
        // On a task of its own: hyper drops this future when the client
        // goes away, and the handler must not stop half-way through with
        // its claim released, or the client's retry would run it again.
        // The task answers as soon as the response's head is known, and
        // goes on reading its body (to the client and into the record).
        let config = Arc::clone(&self.config);
        let (reply, answer) = tokio::sync::oneshot::channel();
        let detached =
            config
                .idem
                .spawn_detached(request::handle(Arc::clone(&config), inner, request, reply));
        Box::pin(async move {
            match answer.await {
                Ok(answer) => answer,
                Err(_) => match detached.await {
                    Err(err) if err.is_panic() => Ok(request::handler_panicked()),
                    _ => Ok(request::runtime_stopped()),
                },
            }
        })
    }
}
