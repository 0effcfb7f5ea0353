//! `IdempotencyMiddleware`: one key per logical request, the same request
//! re-sent with it until an answer, the budget or the deadline.

use std::time::Duration;

use http::Extensions;
use reqwest::{Method, Request, Response};
use reqwest_middleware::{Middleware, Next};
use tokio::time::Instant;
use tracing::Instrument as _;

use crate::DeadlineExceeded;
use crate::attempt::{self, Then};
use crate::backoff::Backoff;
use crate::new_key::{IDEMPOTENCY_KEY, header_value, key_hash, new_key};
use crate::retry;

/// Retries by default after the first attempt.
pub const DEFAULT_MAX_RETRIES: u32 = 3;

/// The longest `Retry-After` honoured by default; a longer one is cut to
/// this.
pub const DEFAULT_MAX_RETRY_AFTER: Duration = Duration::from_secs(10);

/// A [`reqwest_middleware::Middleware`] that makes a client's unsafe
/// requests safe to retry, and retries them: the client half of
/// [`IdempotencyLayer`](https://docs.rs/idemkit/latest/idem/http/struct.IdempotencyLayer.html), or of any server
/// that honours `Idempotency-Key`.
///
/// For each request whose method is one of [`methods`](Self::methods)
/// (POST and PATCH by default) it
///
/// 1. adds an `Idempotency-Key` unless the caller set one (which is kept
///    as is): a new UUID v4 as a structured-field string, made **once per
///    logical request, before the first attempt**;
/// 2. sends the request, and re-sends the same request — same key, same
///    body — on a connection error or a timeout, on a 5xx (but 501 and
///    505), on 429, and on 409 with `Retry-After` (the key's first request
///    still runs), waiting the `Retry-After` when there is one (at most
///    [`max_retry_after`](Self::max_retry_after)), else an exponential
///    backoff with jitter ([`backoff`](Self::backoff));
/// 3. stops after [`max_retries`](Self::max_retries) retries or when the
///    [`deadline`](Self::deadline) would pass, answering with the last
///    response or error; an attempt still running at the deadline is cut
///    short with [`DeadlineExceeded`];
/// 4. never retries another 4xx: a 422 (the key was used before with
///    another body) or a 400 is the caller's to read;
/// 5. sends a body that cannot be cloned (a stream) once, never again.
///
/// Other methods pass through untouched. Each attempt runs in an
/// `idem.client.attempt` span with `key_hash` (8 hex digits of the key's
/// SHA-256, never the key), `attempt` (from 1), `method`, and once known
/// `status` or `error` and `retry` (why the next attempt is sent).
///
/// ```
/// use std::time::Duration;
/// use idem::client::IdempotencyMiddleware;
/// use reqwest_middleware::ClientBuilder;
///
/// let client = ClientBuilder::new(reqwest::Client::new())
///     .with(
///         IdempotencyMiddleware::new()
///             .max_retries(5)
///             .deadline(Duration::from_secs(30)),
///     )
///     .build();
/// # drop(client);
/// ```
///
/// Put it before (outside) other retrying middleware, or use it instead:
/// two retry loops multiply their attempts.
#[derive(Debug, Clone)]
pub struct IdempotencyMiddleware {
    methods: Vec<Method>,
    max_retries: u32,
    deadline: Option<Duration>,
    max_retry_after: Duration,
    backoff: Backoff,
}

impl Default for IdempotencyMiddleware {
    fn default() -> Self {
        Self::new()
    }
}

impl IdempotencyMiddleware {
    /// POST and PATCH, [`DEFAULT_MAX_RETRIES`] retries, no deadline,
    /// `Retry-After` honoured up to [`DEFAULT_MAX_RETRY_AFTER`], backoff
    /// from 100 ms up to 5 s.
    pub fn new() -> Self {
        Self {
            methods: vec![Method::POST, Method::PATCH],
            max_retries: DEFAULT_MAX_RETRIES,
            deadline: None,
            max_retry_after: DEFAULT_MAX_RETRY_AFTER,
            backoff: Backoff {
                first: Duration::from_millis(100),
                max: Duration::from_secs(5),
            },
        }
    }

    /// The methods that get a key and retries (the server's layer must
    /// cover the same ones); other requests pass through untouched.
    pub fn methods(mut self, methods: impl IntoIterator<Item = Method>) -> Self {
        self.methods = methods.into_iter().collect();
        self
    }

    /// Retries after the first attempt, at most (0: one attempt, still
    /// with a key).
    pub fn max_retries(mut self, retries: u32) -> Self {
        self.max_retries = retries;
        self
    }

    /// How long one logical request may take, all attempts and waits
    /// included, counted from its first attempt. No retry starts when its
    /// wait would end past it (however long the `Retry-After`: the last
    /// answer is returned at once), and an attempt still running at it is
    /// cut short ([`DeadlineExceeded`]). Without one, or with one too far
    /// off for the clock to hold (`Duration::MAX`), only
    /// [`max_retries`](Self::max_retries) and the client's own timeouts
    /// bound the loop.
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// The longest `Retry-After` honoured; a longer one is waited for this
    /// long instead.
    pub fn max_retry_after(mut self, cap: Duration) -> Self {
        self.max_retry_after = cap;
        self
    }

    /// The backoff when the server gave no `Retry-After`: the `n`-th retry
    /// waits a random time between half and all of `first · 2^(n-1)`,
    /// which is at most `max`.
    pub fn backoff(mut self, first: Duration, max: Duration) -> Self {
        self.backoff = Backoff { first, max };
        self
    }

    /// What follows attempt `attempt`, given its outcome, whether a copy
    /// of the request is left to send, whether the body is a stream and
    /// when the deadline ends.
    fn then(
        &self,
        outcome: &reqwest_middleware::Result<Response>,
        attempt: u32,
        kept: bool,
        stream: bool,
        ends: Option<Instant>,
    ) -> Then {
        let Some(retry) = retry::classify(outcome) else {
            return Then::Answer;
        };
        if stream {
            return Then::GiveUp(retry, "the body is a stream, sent once");
        }
        if !kept {
            return Then::GiveUp(retry, "max_retries reached");
        }
        let wait = match retry.after {
            Some(asked) => self.backoff.after(asked, self.max_retry_after),
            None => self.backoff.delay(attempt - 1),
        };
        // A wait the clock cannot add (a `Retry-After` of u64::MAX seconds
        // under `max_retry_after(Duration::MAX)`) ends past any deadline.
        let past_deadline = |ends| Instant::now().checked_add(wait).is_none_or(|at| at >= ends);
        if ends.is_some_and(past_deadline) {
            return Then::GiveUp(retry, "the deadline ends before the next attempt");
        }
        Then::Retry(retry, wait)
    }

    /// One attempt, cut short at the deadline.
    async fn send(
        &self,
        next: Next<'_>,
        request: Request,
        extensions: &mut Extensions,
        ends: Option<Instant>,
        attempt: u32,
    ) -> reqwest_middleware::Result<Response> {
        let sent = next.run(request, extensions);
        match ends {
            None => sent.await,
            Some(ends) => match tokio::time::timeout_at(ends, sent).await {
                Ok(outcome) => outcome,
                Err(_) => Err(reqwest_middleware::Error::middleware(
                    DeadlineExceeded::new(attempt),
                )),
            },
        }
    }
}

#[async_trait::async_trait]
impl Middleware for IdempotencyMiddleware {
    async fn handle(
        &self,
        mut request: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        if !self.methods.contains(request.method()) {
            return next.run(request, extensions).await;
        }
        let key = request
            .headers_mut()
            .entry(IDEMPOTENCY_KEY)
            .or_insert_with(|| header_value(&new_key()));
        let key_hash = key_hash(key);
        let stream = request.try_clone().is_none();
        let ends = self
            .deadline
            .and_then(|deadline| Instant::now().checked_add(deadline));
        let mut attempt = 0;
        loop {
            attempt += 1;
            // Every attempt but the last sends a copy; the last (or only,
            // for a stream) sends the request itself.
            let last = stream || attempt > self.max_retries;
            let (sent, kept) = match (last, request.try_clone()) {
                (false, Some(copy)) => (copy, Some(request)),
                _ => (request, None),
            };
            let span = attempt::span(&key_hash, attempt, &sent);
            let outcome = self
                .send(next.clone(), sent, extensions, ends, attempt)
                .instrument(span.clone())
                .await;
            let then = self.then(&outcome, attempt, kept.is_some(), stream, ends);
            attempt::ended(&span, &outcome, then);
            match (then, kept) {
                (Then::Retry(_, wait), Some(kept)) => {
                    tokio::time::sleep(wait).await;
                    request = kept;
                }
                _ => return outcome,
            }
        }
    }
}
