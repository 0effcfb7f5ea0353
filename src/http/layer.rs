//! `IdempotencyLayer`: claim, run, store and replay whole HTTP responses.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::http::request::Parts;
use axum::http::{HeaderName, Method, Request, Response, StatusCode, header};
use bytes::Bytes;
use tower::{Layer, Service};

use crate::http::principal::PrincipalRule;
use crate::http::request;
use crate::http::run_times::RunTimes;
use crate::{DEFAULT_TTL, Idempotency};

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type StoreStatus = dyn Fn(StatusCode) -> bool + Send + Sync;

/// The largest request body buffered by default: 2 MiB, axum's own default
/// body limit, so the layer never refuses what a `Json` extractor accepts.
pub const DEFAULT_MAX_BODY_BYTES: usize = 2 << 20;

/// The largest response body stored by default: 512 KiB, which fits the
/// handle's default record limit of 1 MiB even when written as base64.
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
///    and query and its body;
/// 4. claims the key; only the winner runs the inner service. Its response
///    is stored (status, body and the [`stored_headers`](Self::stored_headers))
///    when [`store_status`](Self::store_status) says so (by default 2xx and
///    4xx other than 408, 409, 425 and 429), otherwise the claim is released
///    and a retry runs again (5xx);
/// 5. answers duplicates with the stored response plus
///    `Idempotent-Replayed: true`; a duplicate arriving while the first
///    still runs gets 409 with `Retry-After`, or, with
///    [`wait`](Self::wait), the first one's answer; the same key with
///    another body is 422.
///
/// The inner service runs on a task of its own: a client that disconnects
/// or times out does not cancel it, and its answer is stored for the
/// client's retry. A retry meanwhile gets 409 with a `Retry-After` of the
/// route's recent run time (at most the remaining lease). A panic in the
/// inner service releases the claim and answers 500. On shutdown,
/// [`Idempotency::drain`] waits for such requests.
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
    pub(crate) principal: PrincipalRule,
    pub(crate) run_times: Arc<RunTimes>,
}

/// The default of [`IdempotencyLayer::store_status`]: 2xx, and 4xx other
/// than 408, 409, 425 and 429 (answers that say "try again").
///
/// ```
/// use axum::http::StatusCode;
/// use idem::http::stores_by_default;
///
/// assert!(stores_by_default(StatusCode::CREATED));
/// assert!(stores_by_default(StatusCode::UNPROCESSABLE_ENTITY));
/// assert!(!stores_by_default(StatusCode::TOO_MANY_REQUESTS));
/// assert!(!stores_by_default(StatusCode::INTERNAL_SERVER_ERROR));
/// ```
pub fn stores_by_default(status: StatusCode) -> bool {
    status.is_success()
        || (status.is_client_error() && !matches!(status.as_u16(), 408 | 409 | 425 | 429))
}

impl IdempotencyLayer {
    /// A layer storing its records through `idem`, with the defaults: POST
    /// and PATCH, key required, TTL 24 h, lease 30 s, no wait, request
    /// bodies up to 2 MiB, responses up to 512 KiB stored with their
    /// `Content-Type`, `Content-Language`, `Content-Location`, `Location`,
    /// `ETag` and `Last-Modified` headers.
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
                    header::CONTENT_LANGUAGE,
                    header::CONTENT_LOCATION,
                    header::LOCATION,
                    header::ETAG,
                    header::LAST_MODIFIED,
                ],
                store_status: Arc::new(stores_by_default),
                principal: PrincipalRule::default(),
                run_times: Arc::default(),
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

    /// The largest response body stored. A larger response is sent as it
    /// is but not stored: the claim is released and a retry runs again (a
    /// warning is logged). Keep it below the handle's
    /// [`max_record_bytes`](crate::IdempotencyBuilder::max_record_bytes)
    /// less a third (bodies that are not UTF-8 are stored as base64).
    /// Default: 512 KiB.
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
    /// (`Content-Type`, `Content-Language`, `Content-Location`, `Location`,
    /// `ETag`, `Last-Modified`). Replays also carry `Idempotent-Replayed`.
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
        let config = Arc::clone(&self.config);
        let detached =
            config
                .idem
                .spawn_detached(request::handle(Arc::clone(&config), inner, request));
        Box::pin(async move {
            match detached.await {
                Ok(answer) => answer,
                Err(err) if err.is_panic() => Ok(request::handler_panicked()),
                Err(_) => Ok(request::runtime_stopped()),
            }
        })
    }
}
