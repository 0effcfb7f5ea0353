//! The client half (SPEC §14): a tower layer for a tonic `Channel` that
//! gives each call of the methods it guards one key, made before the first
//! attempt and sent as `idempotency-key` metadata on every retry, with the
//! reqwest middleware's words for its bounds (`max_retries`, `deadline`,
//! `max_retry_after`, `backoff`).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response};
use http_body_util::BodyExt;
use tonic::Code;
use tonic::body::Body;
use tonic_types::StatusExt;
use tower::{Layer, Service, ServiceExt};

use crate::IDEMPOTENCY_KEY;
use crate::stored::Replayed;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A call that ended without an answer: the transport failed on the last
/// attempt (a concrete type rather than a boxed error, so a client behind
/// [`RetryLayer`] can be used in a spawned task).
#[derive(Debug)]
pub struct TransportError(BoxError);

impl std::fmt::Display for TransportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the gRPC call failed without an answer: {}", self.0)
    }
}

impl std::error::Error for TransportError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.0)
    }
}

/// Retries after the first attempt, at most, by default.
pub const DEFAULT_MAX_RETRIES: u32 = 3;

/// The longest `RetryInfo` delay honoured by default.
pub const DEFAULT_MAX_RETRY_AFTER: Duration = Duration::from_secs(10);

/// A tower layer for a tonic client's `Channel`: each call of a guarded
/// unary method gets one `idempotency-key` (a UUID v4, or the caller's
/// own) before its first attempt, and is retried with that key and the
/// same message on `UNAVAILABLE`, on `DEADLINE_EXCEEDED` of one attempt
/// and on a lost connection, and on `ABORTED` / `RESOURCE_EXHAUSTED` after
/// their `RetryInfo` delay (capped); never on `INVALID_ARGUMENT`,
/// `FAILED_PRECONDITION` or the other deterministic codes. Exponential
/// backoff with jitter, bounded by [`max_retries`](Self::max_retries) and
/// [`deadline`](Self::deadline). Other methods pass through untouched.
///
/// ```
/// use std::time::Duration;
///
/// use idem::grpc::client::RetryLayer;
///
/// let layer = RetryLayer::new()
///     .unary("/shop.Payments/Charge")
///     .max_retries(5)
///     .deadline(Duration::from_secs(30));
/// // let channel = tower::ServiceBuilder::new().layer(layer).service(channel);
/// // let client = PaymentsClient::new(channel);
/// # let _ = layer;
/// ```
#[derive(Debug, Clone)]
pub struct RetryLayer {
    config: Arc<Config>,
}

#[derive(Debug, Clone)]
struct Config {
    methods: HashSet<String>,
    max_retries: u32,
    deadline: Option<Duration>,
    max_retry_after: Duration,
    first: Duration,
    max: Duration,
}

impl Default for RetryLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl RetryLayer {
    /// No method guarded yet, [`DEFAULT_MAX_RETRIES`] retries, no deadline,
    /// `RetryInfo` honoured up to [`DEFAULT_MAX_RETRY_AFTER`], backoff from
    /// 100 ms up to 5 s.
    ///
    /// ```
    /// let layer = idem::grpc::client::RetryLayer::new();
    /// # let _ = layer;
    /// ```
    pub fn new() -> Self {
        RetryLayer {
            config: Arc::new(Config {
                methods: HashSet::new(),
                max_retries: DEFAULT_MAX_RETRIES,
                deadline: None,
                max_retry_after: DEFAULT_MAX_RETRY_AFTER,
                first: Duration::from_millis(100),
                max: Duration::from_secs(5),
            }),
        }
    }

    fn config(&mut self) -> &mut Config {
        Arc::make_mut(&mut self.config)
    }

    /// Guards the unary method at `path` (`/package.Service/Method`).
    ///
    /// ```
    /// let layer = idem::grpc::client::RetryLayer::new().unary("/shop.Payments/Charge");
    /// # let _ = layer;
    /// ```
    pub fn unary(mut self, path: &str) -> Self {
        self.config().methods.insert(path.to_owned());
        self
    }

    /// Retries after the first attempt, at most (0: one attempt, still
    /// with a key).
    ///
    /// ```
    /// let layer = idem::grpc::client::RetryLayer::new().max_retries(5);
    /// # let _ = layer;
    /// ```
    pub fn max_retries(mut self, retries: u32) -> Self {
        self.config().max_retries = retries;
        self
    }

    /// How long one logical call may take, all attempts and waits
    /// included: no retry starts when its wait would end past it, and an
    /// attempt still running at it ends with `DEADLINE_EXCEEDED`.
    ///
    /// ```
    /// let layer = idem::grpc::client::RetryLayer::new().deadline(std::time::Duration::from_secs(30));
    /// # let _ = layer;
    /// ```
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.config().deadline = Some(deadline);
        self
    }

    /// The longest `RetryInfo` delay honoured; a longer one is waited for
    /// this long instead.
    ///
    /// ```
    /// let layer = idem::grpc::client::RetryLayer::new().max_retry_after(std::time::Duration::from_secs(2));
    /// # let _ = layer;
    /// ```
    pub fn max_retry_after(mut self, cap: Duration) -> Self {
        self.config().max_retry_after = cap;
        self
    }

    /// The backoff without a `RetryInfo`: the `n`-th retry waits a random
    /// time between half and all of `first · 2^(n-1)`, at most `max`.
    ///
    /// ```
    /// use std::time::Duration;
    /// let layer = idem::grpc::client::RetryLayer::new()
    ///     .backoff(Duration::from_millis(50), Duration::from_secs(2));
    /// # let _ = layer;
    /// ```
    pub fn backoff(mut self, first: Duration, max: Duration) -> Self {
        let config = self.config();
        (config.first, config.max) = (first, max);
        self
    }
}

impl<S> Layer<S> for RetryLayer {
    type Service = RetryService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RetryService {
            inner,
            config: Arc::clone(&self.config),
        }
    }
}

/// The service made by [`RetryLayer`] around a tonic `Channel`.
#[derive(Debug, Clone)]
pub struct RetryService<S> {
    inner: S,
    config: Arc<Config>,
}

type BoxFuture<T> = std::pin::Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, B> Service<Request<Body>> for RetryService<S>
where
    S: Service<Request<Body>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError>,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response<Body>;
    type Error = TransportError;
    type Future = BoxFuture<Result<Response<Body>, TransportError>>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), TransportError>> {
        self.inner
            .poll_ready(cx)
            .map_err(|err| TransportError(err.into()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        if !self.config.methods.contains(request.uri().path()) {
            return Box::pin(async move {
                let response = inner
                    .call(request)
                    .await
                    .map_err(|err| TransportError(err.into()))?;
                Ok(response.map(Body::new))
            });
        }
        let config = Arc::clone(&self.config);
        Box::pin(async move { retry(config, inner, request).await.map_err(TransportError) })
    }
}

/// A whole answer read off the wire: its head, body and trailers.
struct Answer {
    parts: http::response::Parts,
    body: Bytes,
    trailers: Option<HeaderMap>,
}

impl Answer {
    fn status(&self) -> tonic::Status {
        let trailers = self
            .trailers
            .as_ref()
            .filter(|t| t.contains_key("grpc-status"));
        tonic::Status::from_header_map(trailers.unwrap_or(&self.parts.headers))
            .unwrap_or_else(|| tonic::Status::unknown("no grpc-status in the answer"))
    }

    fn into_response(self) -> Response<Body> {
        Response::from_parts(
            self.parts,
            Body::new(Replayed::new(self.body, self.trailers)),
        )
    }
}

/// The loop of one logical call: one key, the same message, every attempt.
async fn retry<S, B>(
    config: Arc<Config>,
    mut inner: S,
    request: Request<Body>,
) -> Result<Response<Body>, BoxError>
where
    S: Service<Request<Body>, Response = Response<B>>,
    S::Error: Into<BoxError>,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let ends = config.deadline.and_then(|d| Instant::now().checked_add(d));
    let (mut parts, body) = request.into_parts();
    if !parts.headers.contains_key(IDEMPOTENCY_KEY) {
        let key = HeaderValue::from_str(&new_key()).expect("a UUID is a valid metadata value");
        parts.headers.insert(IDEMPOTENCY_KEY, key);
    }
    let body = body.collect().await?.to_bytes();
    let mut retries = 0;
    loop {
        let mut attempt = Request::from_parts(
            parts.clone(),
            Body::new(http_body_util::Full::new(body.clone())),
        );
        *attempt.extensions_mut() = http::Extensions::new();
        let sent = async {
            let response = inner
                .ready()
                .await
                .map_err(Into::into)?
                .call(attempt)
                .await
                .map_err(Into::into)?;
            let (parts, body) = response.into_parts();
            let collected = body.collect().await.map_err(Into::into)?;
            let trailers = collected.trailers().cloned();
            Ok::<_, BoxError>(Answer {
                parts,
                body: collected.to_bytes(),
                trailers,
            })
        };
        let outcome = match ends {
            Some(ends) => match tokio::time::timeout_at(ends.into(), sent).await {
                Ok(outcome) => outcome,
                Err(_) => {
                    return Ok(
                        tonic::Status::deadline_exceeded("the call's deadline passed").into_http(),
                    );
                }
            },
            None => sent.await,
        };
        let wait = match &outcome {
            Ok(answer) => wait_for(&config, &answer.status(), retries),
            Err(_) => Some(backoff(&config, retries)),
        };
        let wait = wait.filter(|wait| {
            retries < config.max_retries && ends.is_none_or(|ends| Instant::now() + *wait < ends)
        });
        match (wait, outcome) {
            (Some(wait), _) => {
                tokio::time::sleep(wait).await;
                retries += 1;
            }
            (None, Ok(answer)) => return Ok(answer.into_response()),
            (None, Err(err)) => return Err(err),
        }
    }
}

/// How long to wait before retrying an answer of this status, or `None`
/// when it is final.
fn wait_for(config: &Config, status: &tonic::Status, retries: u32) -> Option<Duration> {
    match status.code() {
        Code::Unavailable | Code::DeadlineExceeded => Some(backoff(config, retries)),
        Code::Aborted | Code::ResourceExhausted => Some(
            match status
                .get_details_retry_info()
                .and_then(|info| info.retry_delay)
            {
                Some(delay) => delay.min(config.max_retry_after) + jitter(config.first),
                None => backoff(config, retries),
            },
        ),
        _ => None,
    }
}

fn backoff(config: &Config, retry: u32) -> Duration {
    let ceiling = config
        .first
        .saturating_mul(2u32.saturating_pow(retry))
        .min(config.max);
    ceiling / 2 + jitter(ceiling / 2)
}

fn jitter(up_to: Duration) -> Duration {
    Duration::try_from_secs_f64(up_to.as_secs_f64() * rand::random::<f64>())
        .map_or(up_to, |jitter| jitter.min(up_to))
}

/// A key for one logical call: a UUID v4, for callers that keep it
/// themselves (in an outbox row, before the send) and set it as the
/// call's `idempotency-key`.
///
/// ```
/// let key = idem::grpc::client::new_key();
/// assert_eq!(key.len(), 36);
/// assert_ne!(key, idem::grpc::client::new_key());
/// ```
pub fn new_key() -> String {
    let mut bytes: [u8; 16] = rand::random();
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}
