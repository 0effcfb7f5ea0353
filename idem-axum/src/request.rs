//! What the layer does with one request: read its key, scope and
//! fingerprint (`prepare`), run the inner service under a claim (`run`,
//! `attempt`), and answer (`answer`, then the response held back until
//! the key is settled).

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::MatchedPath;
use axum::http::{HeaderValue, Request, Response, StatusCode, header};
use axum::response::IntoResponse;
use bytes::Bytes;
use http_body_util::BodyExt;
use tokio::sync::oneshot;
use tower::Service;

use crate::answers::{failed_attempt, replay, response_failed};
use crate::body::read_body;
use crate::flights::{Ended, Joined};
use crate::layer::Config;
use crate::scope::{HttpScope, fingerprint};
use crate::stored::{Head, Kept, StoredResponse};
use crate::tee::{Captured, Tail, tee};
use crate::{IDEMPOTENT_STORED, IdempotencyKey, idempotency_key};
use idem_core::Failed;
use idem_core::fingerprint::Fingerprint;
use idem_core::{Call, Error, Mismatch, Reported, Store};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Where the answer to the client goes: the layer's future waits on it
/// while the attempt, on a task of its own, may go on reading the body.
pub(crate) type Reply<E> = oneshot::Sender<Result<Response<Body>, E>>;

/// How the inner service's run ended when it has no response to store
/// (idem's own answers are `Failed::Idem`).
enum NotKept<E> {
    /// The inner service answered with a status that is not stored: sent
    /// as it is, claim released. The captured answer, if it fit, is for
    /// the duplicates that waited on this attempt.
    Released(Option<StoredResponse>),
    /// The inner service failed.
    Inner(E),
}

/// The attempt's answer not yet fully sent when the key is settled.
pub(crate) enum Rest {
    /// A whole response, sent after the record is written.
    Whole(Response<Body>),
    /// A streamed response whose last frame waits for the record.
    Streamed(Tail),
}

/// A request ready to be claimed: its key, scope and fingerprint read.
struct Prepared {
    /// The `Idempotency-Key`, or a state update's resource (its path).
    key: String,
    /// A state update ([`IdempotencyLayer::state_updates`](crate::IdempotencyLayer::state_updates)):
    /// another body reruns and replaces the record.
    rerun: bool,
    scope: HttpScope,
    fingerprint: Fingerprint,
    /// The body's bytes' fingerprint, when `fingerprint` is its JSON
    /// value's: what records written before that default hold.
    bytes_fingerprint: Option<Fingerprint>,
    accept_encoding: Option<HeaderValue>,
    request: Request<Body>,
}

/// Serves one request of a method the layer guards.
pub(crate) async fn serve<S, B>(
    config: Arc<Config>,
    inner: S,
    request: Request<Body>,
    reply: Reply<S::Error>,
) where
    S: Service<Request<Body>, Response = Response<B>>,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    match prepare(&config, request).await {
        Ok(Ok(prepared)) => run(&config, inner, prepared, reply).await,
        Ok(Err(keyless)) => {
            let _ = reply.send(crate::transaction::pass(&config, inner, keyless).await);
        }
        Err(refused) => {
            let _ = reply.send(Ok(refused));
        }
    }
}

/// Reads the key, the body, the scope and the fingerprint. `Ok(Err(..))`
/// is a keyless request to pass through; `Err` an answer refusing it.
async fn prepare(
    config: &Config,
    request: Request<Body>,
) -> Result<Result<Prepared, Request<Body>>, Response<Body>> {
    let rerun = config.state_updates.contains(request.method());
    let key = match IdempotencyKey::from_headers(request.headers()) {
        _ if rerun => None,
        Ok(Some(key)) => Some(key),
        Ok(None) if !config.key_required => return Ok(Err(request)),
        Ok(None) => return Err(idempotency_key::missing().into_response()),
        Err(problem) => return Err(problem.into_response()),
    };
    let (parts, body) = request.into_parts();
    let principal = config.principal.of(&parts);
    if let (Some(issuer), Some(key)) = (&config.tokens, &key) {
        let caller = principal.as_deref().unwrap_or_default().as_bytes();
        issuer
            .verify(key.as_str(), caller)
            .map_err(IntoResponse::into_response)?;
    }
    let body = read_body(&parts, body, config.max_body_bytes)
        .await
        .map_err(IntoResponse::into_response)?;
    let route = match parts.extensions.get::<MatchedPath>() {
        Some(matched) => matched.as_str().to_owned(),
        None => parts.uri.path().to_owned(),
    };
    let scope = HttpScope {
        method: parts.method.as_str().to_owned(),
        route,
        principal,
    };
    let (fingerprint, bytes_fingerprint) = fingerprint(config.json, &parts, &body)
        .map_err(|err| Error::Codec(err.into()).into_response())?;
    let key = match key {
        Some(key) => key.as_str().to_owned(),
        None => crate::state_updates::resource(&parts),
    };
    Ok(Ok(Prepared {
        key,
        rerun,
        scope,
        fingerprint,
        bytes_fingerprint,
        accept_encoding: parts.headers.get(header::ACCEPT_ENCODING).cloned(),
        request: Request::from_parts(parts, Body::from(body)),
    }))
}

/// Claims the key and runs the inner service if the claim is won; with
/// `wait`, first follows an attempt of the same key running here.
async fn run<S, B>(config: &Config, inner: S, prepared: Prepared, reply: Reply<S::Error>)
where
    S: Service<Request<Body>, Response = Response<B>>,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let Prepared {
        key,
        rerun,
        scope,
        fingerprint,
        bytes_fingerprint,
        accept_encoding,
        mut request,
    } = prepared;
    let mut started = match crate::transaction::begin(config).await {
        Ok(started) => started,
        Err(refused) => {
            let _ = reply.send(Ok(refused));
            return;
        }
    };
    if let Some(started) = &mut started {
        started.install(request.extensions_mut());
    }
    let on = started.as_ref().map(|started| &*started.store);
    let route = scope.route_key();
    let call = || new_call(config, &scope, &key, rerun, &route);
    let mut wait = config.wait;
    let mut lead = None;
    if !wait.is_zero() {
        match config.flights.join(call().record_key(), fingerprint) {
            Joined::Lead(joined) => lead = Some(joined),
            Joined::Follow(end) => {
                let started = Instant::now();
                match crate::flights::follow(end, wait).await {
                    Some(Ended::Failed(answer)) => {
                        let _ = reply.send(Ok(failed_attempt(answer, accept_encoding.as_ref())));
                        return;
                    }
                    Some(Ended::Settled) => wait = wait.saturating_sub(started.elapsed()),
                    None => wait = Duration::ZERO,
                }
            }
            Joined::Apart => {}
        }
    }
    let mut reply = Some(reply);
    let mut rest = None;
    let mut unsent = Some((inner, request));
    let mut slots = (&mut unsent, &mut reply, &mut rest);
    let claimed = |fingerprint| call().wait(wait).fingerprint_digest(fingerprint);
    let mut reported =
        claim_and_attempt(config, claimed(fingerprint), on, &scope, &mut slots).await;
    let again = bytes_fingerprint.filter(|_| slots.0.is_some() && refused_as_another(&reported));
    if let Some(bytes) = again {
        reported = claim_and_attempt(config, claimed(bytes), on, &scope, &mut slots).await;
    }
    if let Some(started) = &started {
        let verdict = crate::transaction::Verdict::of(slots.0.is_none(), &reported);
        crate::transaction::settle(started, verdict, slots.2).await;
    }
    let ended = answer(
        config,
        &route,
        reported,
        &mut reply,
        rest.is_some(),
        accept_encoding.as_ref(),
    );
    if let Some(lead) = lead {
        lead.end(ended);
    }
    match rest {
        Some(Rest::Whole(response)) => send(&mut reply, Ok(response)),
        Some(Rest::Streamed(tail)) => tail.finish().await,
        None => {}
    }
}

/// The request not yet sent to the inner service, and where its answer
/// goes.
type Slots<'s, S, E> = (
    &'s mut Option<(S, Request<Body>)>,
    &'s mut Option<Reply<E>>,
    &'s mut Option<Rest>,
);

/// Claims the key with `call` (on the request's transaction's store `on`,
/// in the transactional mode) and, if the claim is won, sends the request
/// to the inner service (which it takes from its slot).
async fn claim_and_attempt<S, B>(
    config: &Config,
    call: Call,
    on: Option<&dyn Store>,
    scope: &HttpScope,
    (unsent, reply, rest): &mut Slots<'_, S, S::Error>,
) -> Reported<Result<Kept, Failed<NotKept<S::Error>>>>
where
    S: Service<Request<Body>, Response = Response<B>>,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let body = crate::body::once(|| {
        // A call runs its body at most once, and a second call is made
        // only while the request is still here.
        let (inner, request) = unsent.take().expect("the request is sent once");
        attempt(config, inner, request, scope, reply, rest)
    });
    match on {
        Some(store) => call.on(store).run_apart(body).await,
        None => call.run_apart(body).await,
    }
}

/// The call for a request's key, before its wait and fingerprint.
fn new_call(config: &Config, scope: &HttpScope, key: &str, rerun: bool, route: &str) -> Call {
    let mut call = config
        .idem
        .call(scope, key)
        .ttl(config.ttl)
        .site(crate::sites::site(route));
    if rerun {
        call = call.mismatch(Mismatch::Rerun);
    }
    if let Some(lease) = config.lease {
        call = call.lease(lease);
    }
    if let Some(tombstone) = config.tombstone {
        call = call.tombstone(tombstone);
    }
    call
}

/// Whether the key holds another request's record: then a JSON body is
/// claimed again by its bytes' fingerprint, which a record written before
/// JSON was canonical by default (or with `exact_bytes`) holds.
fn refused_as_another<T, E>(reported: &Reported<Result<T, Failed<E>>>) -> bool {
    matches!(
        reported.result,
        Err(Failed::Idem(Error::FingerprintMismatch { .. }))
    )
}

/// Runs the inner service and captures its answer. The answer reaches the
/// client through `rest` once the key is settled, or, when its body is
/// streamed, through `reply` at once (all but its last frame).
async fn attempt<S, B>(
    config: &Config,
    mut inner: S,
    request: Request<Body>,
    scope: &HttpScope,
    reply: &mut Option<Reply<S::Error>>,
    rest: &mut Option<Rest>,
) -> Result<Kept, NotKept<S::Error>>
where
    S: Service<Request<Body>, Response = Response<B>>,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let started = Instant::now();
    let response = inner.call(request).await.map_err(NotKept::Inner)?;
    let (mut parts, body) = response.into_parts();
    let stores = (config.store_status)(parts.status) && !never_stored(parts.status);
    let limit = config.max_response_bytes;
    let head = Head::capture(&parts, &config.stored_headers);
    let hint = body.size_hint();
    if stores && !(config.capture)(&scope.route, &parts) {
        // Streamed as it is, never read by idem: a client that goes away
        // ends it. The key is settled: duplicates get `not-stored`.
        parts
            .headers
            .insert(IDEMPOTENT_STORED, HeaderValue::from_static("false"));
        send(reply, Ok(Response::from_parts(parts, Body::new(body))));
        config
            .run_times
            .record(&scope.route_key(), started.elapsed());
        return Ok(Kept::Unstorable(
            "the response is streamed without capture".into(),
        ));
    }
    let captured = if hint.exact().is_some_and(|size| size <= limit as u64) {
        // A body of known length that fits (every `Json`, `String`,
        // `Bytes` answer): read whole, sent once the key is settled.
        let collected = body.collect().await.map_err(|err| err.into().to_string());
        let captured = match collected {
            Ok(collected) => Captured::Whole(collected.to_bytes()),
            Err(reason) => Captured::Failed(reason),
        };
        if let Captured::Whole(bytes) = &captured {
            *rest = Some(Rest::Whole(Response::from_parts(
                parts,
                Body::from(bytes.clone()),
            )));
        } else {
            *rest = Some(Rest::Whole(response_failed()));
        }
        captured
    } else {
        if stores && hint.lower() > limit as u64 {
            parts
                .headers
                .insert(IDEMPOTENT_STORED, HeaderValue::from_static("false"));
        }
        let (relay, pump) = tee(body, limit);
        send(reply, Ok(Response::from_parts(parts, Body::new(relay))));
        let (captured, tail) = pump.run().await;
        *rest = Some(Rest::Streamed(tail));
        captured
    };
    config
        .run_times
        .record(&scope.route_key(), started.elapsed());
    kept(stores, head, captured, limit)
}

/// 412 and 428 say a precondition failed or is missing: nothing changed,
/// and the corrected retry with the same key must run.
fn never_stored(status: StatusCode) -> bool {
    matches!(
        status,
        StatusCode::PRECONDITION_FAILED | StatusCode::PRECONDITION_REQUIRED
    )
}

/// What the call stores (or releases) for a captured answer.
fn kept<E>(stores: bool, head: Head, captured: Captured, limit: usize) -> Result<Kept, NotKept<E>> {
    match captured {
        Captured::Whole(body) if stores => Ok(Kept::Response(head.with_body(body))),
        Captured::Whole(body) => Err(NotKept::Released(Some(head.with_body(body)))),
        _ if !stores => Err(NotKept::Released(None)),
        Captured::Over { size } => Ok(Kept::Unstorable(format!(
            "the response body ({size} bytes) is larger than max_response_bytes ({limit})"
        ))),
        Captured::Failed(reason) => Ok(Kept::Unstorable(format!(
            "the response body failed: {reason}"
        ))),
    }
}

/// Answers the client when the attempt has not (a replay, a refusal),
/// and says how the attempt ended for its followers.
fn answer<E>(
    config: &Config,
    route: &str,
    reported: Reported<Result<Kept, Failed<NotKept<E>>>>,
    reply: &mut Option<Reply<E>>,
    ran: bool,
    accept_encoding: Option<&HeaderValue>,
) -> Ended {
    match reported.result {
        Ok(Kept::Response(stored)) if reported.replayed => {
            send(reply, Ok(replay(&stored, accept_encoding)));
            Ended::Settled
        }
        Ok(_) => Ended::Settled,
        // The service ran but its answer could not be stored (the store
        // failed at completion, or the lease was lost): the client still
        // gets what happened.
        Err(Failed::Idem(err)) if ran => {
            tracing::warn!(error = %err, "idem: response sent but not stored");
            Ended::Settled
        }
        Err(Failed::Idem(mut err)) => {
            if let Error::InProgress { retry_after, .. } = &mut err {
                *retry_after = config.run_times.estimate(route, *retry_after);
            }
            send(reply, Ok(err.into_response()));
            Ended::Settled
        }
        Err(Failed::Body { error, .. }) => match error {
            NotKept::Released(captured) => Ended::Failed(captured.map(Arc::new)),
            NotKept::Inner(err) => {
                send(reply, Err(err));
                Ended::Failed(None)
            }
        },
    }
}

fn send<E>(reply: &mut Option<Reply<E>>, answer: Result<Response<Body>, E>) {
    if let Some(reply) = reply.take() {
        // The layer's future is gone when the client is: nobody to answer.
        let _ = reply.send(answer);
    }
}

/// A request the layer does not guard, or sent without a key where none is
/// required.
pub(crate) async fn pass<S, B>(
    mut inner: S,
    request: Request<Body>,
) -> Result<Response<Body>, S::Error>
where
    S: Service<Request<Body>, Response = Response<B>>,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    Ok(inner.call(request).await?.map(Body::new))
}
