//! The payments service of the `axum_payments` example: its router, its
//! `#[idempotent]` service function, refunds in token mode with `If-Match`
//! versions, and a fake card gateway. The tests in
//! `tests/http*.rs` include this file to run the same app over real HTTP.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, Request, State};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use idem::http::{
    ETag, IdempotencyKey, IdempotencyLayer, IfMatch, Problem, TokenIssuer, require_if_match,
};
use idem::{Idempotency, idempotent};
use serde::{Deserialize, Serialize};

/// What a client posts to `POST /payments`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct PaymentRequest {
    pub amount_cents: u64,
    pub currency: String,
}

/// What `POST /payments` answers (201) and `GET /payments/{id}` reads back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Receipt {
    pub id: String,
    pub amount_cents: u64,
    pub currency: String,
    pub gateway_charge: String,
}

/// How the app is set up; the example uses the defaults.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    /// How long a duplicate waits for an in-flight first request (zero:
    /// 409 at once).
    pub wait: Duration,
    /// How long the fake gateway takes to charge a card.
    pub gateway_delay: Duration,
    /// The largest request body the idempotency layer buffers.
    pub max_body_bytes: usize,
    /// The secret that signs refund tokens (`IDEM_TOKEN_SECRET` in the
    /// example): at least 32 random bytes in a real deployment.
    pub token_secret: String,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            wait: Duration::ZERO,
            gateway_delay: Duration::from_millis(200),
            max_body_bytes: 64 * 1024,
            token_secret: "demo only: set IDEM_TOKEN_SECRET to 32+ random bytes".into(),
        }
    }
}

/// The authenticated user. Demo authentication: `Authorization: Bearer
/// NAME` makes you NAME; no header makes you `anonymous`.
#[derive(Debug, Clone)]
pub(crate) struct User(pub String);

/// Where this app's own problem types would be documented.
const PROBLEMS: &str = "https://payments.example/problems/";

/// Charges above this are declined by the fake gateway (402).
pub(crate) const DECLINE_ABOVE_CENTS: u64 = 1_000_000;

/// A stand-in for a card network that honours idempotency keys: a charge
/// sent twice with the same key is charged once.
#[derive(Debug, Default)]
pub(crate) struct Gateway {
    delay: Duration,
    charges: Mutex<HashMap<String, String>>,
    requests: AtomicU64,
    fail_next: AtomicU32,
}

impl Gateway {
    async fn charge(&self, key: &str, amount_cents: u64) -> Result<String, PaymentError> {
        self.requests.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(self.delay).await;
        let failing = self
            .fail_next
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        if failing.is_ok() {
            return Err(PaymentError::GatewayUnavailable);
        }
        if amount_cents > DECLINE_ABOVE_CENTS {
            return Err(PaymentError::Declined {
                reason: format!("amount over the limit of {DECLINE_ABOVE_CENTS} cents"),
            });
        }
        let mut charges = self.charges.lock().unwrap();
        let next = charges.len() + 1;
        Ok(charges
            .entry(key.to_owned())
            .or_insert_with(|| format!("ch_{next}"))
            .clone())
    }

    /// Makes the next `n` charges fail as if the gateway were down.
    pub(crate) fn fail_next(&self, n: u32) {
        self.fail_next.store(n, Ordering::SeqCst);
    }

    /// How many requests reached the gateway.
    pub(crate) fn requests(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }

    /// The idempotency keys the gateway was sent, one per distinct charge.
    pub(crate) fn keys(&self) -> Vec<String> {
        self.charges.lock().unwrap().keys().cloned().collect()
    }
}

/// What a client posts to `POST /payments/{id}/refunds`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct RefundRequest {
    pub amount_cents: u64,
}

/// What `POST /payments/{id}/refunds` answers (201).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Refund {
    pub payment: String,
    pub amount_cents: u64,
    /// All refunds of the payment so far, this one included.
    pub refunded_cents: u64,
}

/// A payment as the service keeps it: its receipt, what was refunded, and
/// its version, which every change moves on.
#[derive(Debug, Clone)]
struct Payment {
    receipt: Receipt,
    refunded_cents: u64,
    version: u64,
}

impl Payment {
    fn etag(&self) -> ETag {
        ETag::strong(self.version)
    }
}

/// Why a payment failed.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum PaymentError {
    /// The card was declined: a final answer, stored and replayed.
    Declined { reason: String },
    /// The gateway could not be reached: released, so a retry charges.
    GatewayUnavailable,
    /// The idempotency runtime answered (never stored).
    #[serde(skip)]
    Idem(idem::Error),
}

impl From<idem::Error> for PaymentError {
    fn from(err: idem::Error) -> Self {
        PaymentError::Idem(err)
    }
}

/// The service function's error policy: a decline is final, the rest is
/// retried.
fn is_final(err: &PaymentError) -> bool {
    matches!(err, PaymentError::Declined { .. })
}

impl IntoResponse for PaymentError {
    fn into_response(self) -> Response {
        match self {
            PaymentError::Declined { reason } => Problem::new(
                402,
                "declined",
                "Payment declined",
                format!("The card was declined: {reason}."),
            )
            .with_type(PROBLEMS.to_owned() + "declined")
            .into_response(),
            PaymentError::GatewayUnavailable => Problem::new(
                502,
                "gateway-unavailable",
                "Payment gateway unavailable",
                "The card gateway could not be reached; nothing was charged. Retry with the same Idempotency-Key.",
            )
            .with_type(PROBLEMS.to_owned() + "gateway-unavailable")
            .into_response(),
            PaymentError::Idem(err) => err.into_response(),
        }
    }
}

/// The service: its idempotency handle, its gateway and its receipts.
#[derive(Clone)]
pub(crate) struct Payments {
    inner: Arc<Inner>,
}

struct Inner {
    idem: Idempotency,
    gateway: Gateway,
    payments: Mutex<HashMap<String, Payment>>,
    handler_runs: AtomicU64,
    service_runs: AtomicU64,
    refund_runs: AtomicU64,
}

impl Payments {
    /// A service storing its records through `idem`.
    pub(crate) fn new(idem: Idempotency, options: &Options) -> Self {
        Self {
            inner: Arc::new(Inner {
                idem,
                gateway: Gateway {
                    delay: options.gateway_delay,
                    ..Gateway::default()
                },
                payments: Mutex::default(),
                handler_runs: AtomicU64::new(0),
                service_runs: AtomicU64::new(0),
                refund_runs: AtomicU64::new(0),
            }),
        }
    }

    /// The fake gateway.
    pub(crate) fn gateway(&self) -> &Gateway {
        &self.inner.gateway
    }

    /// How many times the `POST /payments` handler ran.
    pub(crate) fn handler_runs(&self) -> u64 {
        self.inner.handler_runs.load(Ordering::SeqCst)
    }

    /// How many times the `POST /payments/{id}/refunds` handler ran.
    pub(crate) fn refund_runs(&self) -> u64 {
        self.inner.refund_runs.load(Ordering::SeqCst)
    }

    /// How many times the body of [`Payments::charge`] ran.
    pub(crate) fn service_runs(&self) -> u64 {
        self.inner.service_runs.load(Ordering::SeqCst)
    }

    /// Charges a card once per user and key, whoever calls it (the HTTP
    /// handler here; a queue consumer could call it with the same key).
    /// The gateway is sent a key derived from ours, so a retry after an
    /// outage cannot charge twice either.
    #[idempotent(
        key = key,
        scope = ("payments", user),
        store = self.inner.idem,
        fingerprint = request,
        errors = is_final,
        ttl = "24h",
    )]
    pub(crate) async fn charge(
        &self,
        user: &str,
        key: &IdempotencyKey,
        request: &PaymentRequest,
    ) -> Result<Receipt, PaymentError> {
        self.inner.service_runs.fetch_add(1, Ordering::SeqCst);
        let gateway_key = idem::child_key("gateway").expect("inside an idempotent call");
        let gateway_charge = self
            .inner
            .gateway
            .charge(&gateway_key, request.amount_cents)
            .await?;
        let receipt = Receipt {
            id: format!("pay_{:016x}", RandomState::new().hash_one(&gateway_key)),
            amount_cents: request.amount_cents,
            currency: request.currency.clone(),
            gateway_charge,
        };
        let payment = Payment {
            receipt: receipt.clone(),
            refunded_cents: 0,
            version: 1,
        };
        self.inner
            .payments
            .lock()
            .unwrap()
            .insert(receipt.id.clone(), payment);
        Ok(receipt)
    }
}

/// The app: `POST /payments` behind the idempotency layer (client keys),
/// `GET /payments/{id}` with the payment's version in `ETag`, `POST
/// /payments/{id}/refunds` in token mode and with `If-Match`, `POST
/// /tokens` issuing refund tokens, and the demo authentication outside all.
pub(crate) fn router(payments: Payments, options: &Options) -> Router {
    let idempotency = IdempotencyLayer::new(payments.inner.idem.clone())
        .wait(options.wait)
        .max_body_bytes(options.max_body_bytes)
        .principal(user_of);
    // Refunds take only keys the server issued to the same user: a refund
    // button gets its token when the page is shown.
    let tokens = TokenIssuer::new(&options.token_secret).principal(user_of);
    let refunds = Router::new()
        .route("/payments/{id}/refunds", post(refund_payment))
        .layer(
            IdempotencyLayer::new(payments.inner.idem.clone())
                .max_body_bytes(options.max_body_bytes)
                .principal(user_of)
                .tokens(tokens.clone()),
        );
    Router::new()
        .route("/payments", post(create_payment))
        .route("/payments/{id}", get(read_payment))
        .layer(idempotency)
        .merge(refunds)
        .nest("/tokens", tokens.router())
        .layer(middleware::from_fn(authenticate))
        .with_state(payments)
}

/// The principal of both layers and of the token issuer: the user that
/// `authenticate` found.
fn user_of(parts: &Parts) -> Option<String> {
    parts.extensions.get::<User>().map(|user| user.0.clone())
}

async fn authenticate(mut request: Request, next: Next) -> Response {
    let user = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok()?.strip_prefix("Bearer "))
        .unwrap_or("anonymous")
        .to_owned();
    request.extensions_mut().insert(User(user));
    next.run(request).await
}

async fn create_payment(
    State(payments): State<Payments>,
    Extension(User(user)): Extension<User>,
    key: IdempotencyKey,
    Json(request): Json<PaymentRequest>,
) -> Result<impl IntoResponse, PaymentError> {
    payments.inner.handler_runs.fetch_add(1, Ordering::SeqCst);
    let receipt = payments.charge(&user, &key, &request).await?;
    let location = format!("/payments/{}", receipt.id);
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        Json(receipt),
    ))
}

async fn read_payment(
    State(payments): State<Payments>,
    Path(id): Path<String>,
) -> Result<(ETag, Json<Receipt>), Problem> {
    let all = payments.inner.payments.lock().unwrap();
    let payment = all.get(&id).ok_or_else(|| not_found(&id))?;
    Ok((payment.etag(), Json(payment.receipt.clone())))
}

/// Refunds part of a payment, against the version the client read: a
/// refund made while another changed the payment is refused (412), and the
/// client reloads. A retry of a refund that went through (same token)
/// replays its answer, whatever the version is by then.
async fn refund_payment(
    State(payments): State<Payments>,
    Path(id): Path<String>,
    if_match: Option<IfMatch>,
    Json(request): Json<RefundRequest>,
) -> Result<impl IntoResponse, Problem> {
    payments.inner.refund_runs.fetch_add(1, Ordering::SeqCst);
    let if_match = require_if_match(if_match)?;
    let mut all = payments.inner.payments.lock().unwrap();
    let payment = all.get_mut(&id).ok_or_else(|| not_found(&id))?;
    if_match.check(&payment.etag())?;
    let refunded_cents = payment.refunded_cents + request.amount_cents;
    if refunded_cents > payment.receipt.amount_cents {
        return Err(Problem::new(
            422,
            "refund-too-large",
            "Refund too large",
            format!(
                "Payment {id} has {} cents left to refund.",
                payment.receipt.amount_cents - payment.refunded_cents
            ),
        )
        .with_type(PROBLEMS.to_owned() + "refund-too-large"));
    }
    // The change and its new version together, under one lock.
    payment.refunded_cents = refunded_cents;
    payment.version += 1;
    let refund = Refund {
        payment: id,
        amount_cents: request.amount_cents,
        refunded_cents,
    };
    Ok((StatusCode::CREATED, payment.etag(), Json(refund)))
}

fn not_found(id: &str) -> Problem {
    Problem::new(
        404,
        "not-found",
        "No such payment",
        format!("There is no payment {id}."),
    )
    .with_type(PROBLEMS.to_owned() + "not-found")
}
