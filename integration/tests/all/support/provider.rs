//! A fake payment provider on loopback for the chaos test of unknown
//! outcomes: it books **every** charge it receives (it does not
//! deduplicate by reference, as many providers do not), and it answers
//! "is there a charge with reference R?".
//!
//! The test holds the provider's answer to one chosen booking ([`Provider::hold`]),
//! so it can SIGKILL the worker exactly in the ambiguous window: the charge
//! booked, the worker's record not yet complete.

#![allow(dead_code)]

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

/// What a worker asks the provider to charge.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ChargeRequest {
    /// The worker's reference for this charge: the call's child key.
    pub reference: String,
    pub payment: String,
    pub cents: u32,
}

/// A booked charge, as the provider answers it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Charge {
    /// The provider's id: its booking number, from 1.
    pub id: u64,
    pub reference: String,
    pub payment: String,
    pub cents: u32,
}

/// How long a held answer waits for the test to release it at most.
const HOLD_LIMIT: Duration = Duration::from_secs(10);

#[derive(Default)]
struct Ledger {
    charges: Mutex<Vec<Charge>>,
    /// The booking number whose answer is held, if any.
    hold_at: Mutex<Option<u64>>,
    /// The last booking number held (0: none yet).
    held: watch::Sender<u64>,
    /// Bumped to let a held answer go.
    released: watch::Sender<u64>,
    in_flight: AtomicU32,
    lookups: AtomicU32,
    found: AtomicU32,
}

/// The provider, serving on loopback until dropped.
pub(crate) struct Provider {
    ledger: Arc<Ledger>,
    pub(crate) url: String,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for Provider {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl Provider {
    /// Starts the provider on a loopback port of its own (bound here and
    /// held, so no other test can take it).
    pub(crate) async fn start() -> Provider {
        let ledger = Arc::new(Ledger::default());
        let app = Router::new()
            .route("/charges", post(book))
            .route("/charges/{reference}", get(lookup))
            .with_state(ledger.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Provider {
            ledger,
            url,
            server,
        }
    }

    /// How many charges were booked.
    pub(crate) fn booked(&self) -> u64 {
        self.ledger.charges.lock().unwrap().len() as u64
    }

    /// Every booked charge.
    pub(crate) fn charges(&self) -> Vec<Charge> {
        self.ledger.charges.lock().unwrap().clone()
    }

    /// Holds the answer to booking number `at` (the charge is booked, its
    /// answer not sent) until [`release`](Self::release).
    pub(crate) fn hold(&self, at: u64) {
        *self.ledger.hold_at.lock().unwrap() = Some(at);
    }

    /// Waits until booking number `at` is booked and its answer held;
    /// `false` if `give_up` says so first (polled every millisecond).
    pub(crate) async fn held(&self, at: u64, mut give_up: impl FnMut() -> bool) -> bool {
        let mut held = self.ledger.held.subscribe();
        loop {
            if *held.borrow_and_update() >= at {
                return true;
            }
            if give_up() {
                return false;
            }
            let _ = tokio::time::timeout(Duration::from_millis(1), held.changed()).await;
        }
    }

    /// Lets a held answer go, and holds no other.
    pub(crate) fn release(&self) {
        *self.ledger.hold_at.lock().unwrap() = None;
        self.ledger.released.send_modify(|n| *n += 1);
    }

    /// Waits until no request is in progress, twice 20 ms apart, so a
    /// request a killed worker left in the socket is booked before the
    /// next worker starts (at most `limit`).
    pub(crate) async fn settle(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        for _ in 0..2 {
            while self.ledger.in_flight.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// (lookups asked, lookups that found a charge).
    pub(crate) fn lookups(&self) -> (u32, u32) {
        (
            self.ledger.lookups.load(Ordering::SeqCst),
            self.ledger.found.load(Ordering::SeqCst),
        )
    }
}

/// Counts a request in progress while it lives.
struct InFlight(Arc<Ledger>);

impl InFlight {
    fn new(ledger: &Arc<Ledger>) -> InFlight {
        ledger.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(ledger.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Books the charge, whatever its reference, then answers (or holds the
/// answer, if this is the booking the test chose).
async fn book(State(ledger): State<Arc<Ledger>>, Json(req): Json<ChargeRequest>) -> Json<Charge> {
    let _in_flight = InFlight::new(&ledger);
    let charge = {
        let mut charges = ledger.charges.lock().unwrap();
        let charge = Charge {
            id: charges.len() as u64 + 1,
            reference: req.reference,
            payment: req.payment,
            cents: req.cents,
        };
        charges.push(charge.clone());
        charge
    };
    if *ledger.hold_at.lock().unwrap() == Some(charge.id) {
        let mut released = ledger.released.subscribe();
        released.borrow_and_update();
        ledger.held.send_replace(charge.id);
        let _ = tokio::time::timeout(HOLD_LIMIT, released.changed()).await;
    }
    Json(charge)
}

/// "Is there a charge with this reference?"
async fn lookup(
    State(ledger): State<Arc<Ledger>>,
    Path(reference): Path<String>,
) -> Result<Json<Charge>, StatusCode> {
    let _in_flight = InFlight::new(&ledger);
    ledger.lookups.fetch_add(1, Ordering::SeqCst);
    let charges = ledger.charges.lock().unwrap();
    let found = charges.iter().find(|c| c.reference == reference).cloned();
    drop(charges);
    let charge = found.ok_or(StatusCode::NOT_FOUND)?;
    ledger.found.fetch_add(1, Ordering::SeqCst);
    Ok(Json(charge))
}

/// The worker's side: a client of the provider.
#[derive(Clone)]
pub(crate) struct Client {
    http: reqwest::Client,
    url: String,
}

/// A provider call that failed (unreachable, or an unexpected answer).
#[derive(Debug)]
pub(crate) struct ProviderError(pub String);

impl Client {
    pub(crate) fn new(url: &str) -> Client {
        Client {
            http: reqwest::Client::builder().no_proxy().build().unwrap(),
            url: url.to_owned(),
        }
    }

    /// Asks for a charge; the provider books it, every time.
    pub(crate) async fn charge(&self, req: &ChargeRequest) -> Result<Charge, ProviderError> {
        let body = serde_json::to_vec(req).map_err(text)?;
        let response = self
            .http
            .post(format!("{}/charges", self.url))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .map_err(text)?;
        decode(response).await
    }

    /// The charge booked under `reference`, if any.
    pub(crate) async fn find(&self, reference: &str) -> Result<Option<Charge>, ProviderError> {
        let response = self
            .http
            .get(format!("{}/charges/{reference}", self.url))
            .send()
            .await
            .map_err(text)?;
        if response.status() == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        decode(response).await.map(Some)
    }
}

fn text(err: impl std::fmt::Display) -> ProviderError {
    ProviderError(err.to_string())
}

async fn decode(response: reqwest::Response) -> Result<Charge, ProviderError> {
    if !response.status().is_success() {
        return Err(ProviderError(format!(
            "provider answered {}",
            response.status()
        )));
    }
    let bytes = response.bytes().await.map_err(text)?;
    serde_json::from_slice(&bytes).map_err(text)
}
