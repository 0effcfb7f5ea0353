//! Helpers of the HTTP tests: the example's app on an ephemeral loopback
//! port, and a real HTTP client for it.

#![allow(dead_code)]

#[path = "../../../../examples/axum_payments/app.rs"]
pub(crate) mod app;

use std::time::Duration;

pub(crate) use app::{Options, Payments};
use axum::Router;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use idem::http::PROBLEM_TYPE_BASE;
use idem::{Idempotency, MemoryStore};
use serde_json::{Value, json};

/// A server on 127.0.0.1:0 and a client for it.
pub(crate) struct Server {
    pub base: String,
    pub client: Client<HttpConnector, Full<Bytes>>,
}

/// One answer, read whole.
#[derive(Debug)]
pub(crate) struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Answer {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!("{e}: {:?}", String::from_utf8_lossy(&self.body));
        })
    }

    pub(crate) fn replayed(&self) -> bool {
        match self.headers.get("idempotent-replayed") {
            None => false,
            Some(value) => {
                assert_eq!(value, "true");
                true
            }
        }
    }

    /// Checks an RFC 9457 body of the given status and idem problem type.
    pub(crate) fn assert_problem(&self, status: u16, slug: &str) {
        assert_eq!(self.status.as_u16(), status, "{:?}", self.body);
        assert_eq!(self.headers["content-type"], "application/problem+json");
        let problem = self.json();
        assert_eq!(problem["status"], status);
        assert_eq!(problem["type"], format!("{PROBLEM_TYPE_BASE}{slug}"));
        assert!(problem["title"].as_str().is_some_and(|t| !t.is_empty()));
        assert!(problem["detail"].as_str().is_some_and(|d| !d.is_empty()));
    }

    pub(crate) fn retry_after(&self) -> u64 {
        self.headers["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap()
    }
}

pub(crate) async fn serve(router: Router) -> Server {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    Server {
        base: format!("http://{addr}"),
        client: Client::builder(TokioExecutor::new()).build_http(),
    }
}

/// A client for a server at `base` (`http://127.0.0.1:PORT`) the test
/// started elsewhere.
pub(crate) fn client_for(base: &str) -> Server {
    Server {
        base: base.to_owned(),
        client: Client::builder(TokioExecutor::new()).build_http(),
    }
}

/// The example's app on a fresh memory store.
pub(crate) async fn payments(options: Options) -> (Server, Payments) {
    payments_on(Idempotency::new(MemoryStore::new()), options).await
}

/// The example's app on the given handle: one server instance.
pub(crate) async fn payments_on(idem: Idempotency, options: Options) -> (Server, Payments) {
    let payments = Payments::new(idem, &options);
    let server = serve(app::router(payments.clone(), &options)).await;
    (server, payments)
}

pub(crate) fn quick() -> Options {
    Options {
        gateway_delay: Duration::from_millis(5),
        ..Options::default()
    }
}

impl Server {
    pub(crate) async fn send(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Answer {
        let mut request = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request
            .body(Full::new(Bytes::from(body.to_owned())))
            .unwrap();
        let response = self.client.request(request).await.unwrap();
        let (parts, body) = response.into_parts();
        Answer {
            status: parts.status,
            headers: parts.headers,
            body: body.collect().await.unwrap().to_bytes(),
        }
    }

    /// As [`send`](Self::send), `None` where no whole answer came within
    /// 10 s (a server killed or restarting).
    pub(crate) async fn try_send(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Option<Answer> {
        let mut request = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request.body(Full::new(Bytes::from(body.to_owned()))).ok()?;
        let answer = async {
            let (parts, body) = self.client.request(request).await.ok()?.into_parts();
            let body = body.collect().await.ok()?.to_bytes();
            Some(Answer {
                status: parts.status,
                headers: parts.headers,
                body,
            })
        };
        tokio::time::timeout(Duration::from_secs(10), answer)
            .await
            .ok()?
    }

    /// `POST path` with an `Idempotency-Key` header (a raw header value)
    /// and no other.
    pub(crate) async fn post(&self, path: &str, key: &str, body: &str) -> Answer {
        self.send(Method::POST, path, &[("idempotency-key", key)], body)
            .await
    }

    /// `POST /payments` as `user` (None: anonymous) with a raw
    /// `Idempotency-Key` header value (None: no header).
    pub(crate) async fn pay(&self, user: Option<&str>, key: Option<&str>, body: &Value) -> Answer {
        let bearer = user.map(|user| format!("Bearer {user}"));
        let mut headers = vec![("content-type", "application/json")];
        if let Some(key) = key {
            headers.push(("idempotency-key", key));
        }
        if let Some(bearer) = &bearer {
            headers.push(("authorization", bearer));
        }
        self.send(Method::POST, "/payments", &headers, &body.to_string())
            .await
    }
}

pub(crate) fn order(amount_cents: u64) -> Value {
    json!({ "amount_cents": amount_cents, "currency": "EUR" })
}

/// Two server instances on two ports over one shared store (two handles,
/// as two processes would have): a duplicate sent to the second is
/// replayed from the first, and a race between them runs once.
pub(crate) async fn two_instances_share_records(first: Idempotency, second: Idempotency) {
    let options = Options {
        gateway_delay: Duration::from_millis(400),
        ..Options::default()
    };
    let (a, pay_a) = payments_on(first, options.clone()).await;
    let (b, pay_b) = payments_on(second, options).await;
    assert_ne!(a.base, b.base);
    let key = format!("\"shared-{}\"", unique());

    let created = a.pay(Some("carol"), Some(&key), &order(700)).await;
    assert_eq!(created.status, StatusCode::CREATED, "{:?}", created.body);
    let replayed = b.pay(Some("carol"), Some(&key), &order(700)).await;
    assert_eq!(replayed.status, StatusCode::CREATED);
    assert!(replayed.replayed());
    assert_eq!(replayed.body, created.body);
    assert_eq!(replayed.headers["location"], created.headers["location"]);
    assert_eq!((pay_a.service_runs(), pay_b.handler_runs()), (1, 0));

    // The other body under that key is refused on the second instance too.
    let other = b.pay(Some("carol"), Some(&key), &order(701)).await;
    other.assert_problem(422, "fingerprint-mismatch");

    // A race across the two instances: one runs, the other gets 409.
    let key = format!("\"race-{}\"", unique());
    let body = order(800);
    let (one, two) = tokio::join!(
        a.pay(Some("carol"), Some(&key), &body),
        b.pay(Some("carol"), Some(&key), &body),
    );
    let mut statuses = [one.status.as_u16(), two.status.as_u16()];
    statuses.sort_unstable();
    assert_eq!(statuses, [201, 409], "{:?} / {:?}", one.body, two.body);
    assert_eq!(pay_a.service_runs() + pay_b.service_runs(), 2);
}

/// A value unique to this run, so tests on a shared server never meet.
pub(crate) fn unique() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{}-{nanos}", std::process::id())
}

/// `POST /payments` sent by a client that gives up after `patience`: the
/// request is dropped mid-handler and its connection closed.
pub(crate) async fn pay_and_give_up(server: &Server, key: &str, body: &Value, patience: Duration) {
    let gave_up = tokio::time::timeout(patience, server.pay(Some("dave"), Some(key), body)).await;
    assert!(gave_up.is_err(), "the handler answered within {patience:?}");
}

/// A client times out mid-handler and retries with the same key: the
/// handler ran to completion on its own, ran once in all, and the retry
/// gets the first run's answer, replayed; a retry that arrives while it
/// still runs gets 409 with a `Retry-After` from the route's recent run
/// times (here well under the 30 s lease).
pub(crate) async fn a_client_that_gives_up_gets_the_first_answer(idem: Idempotency) {
    let options = Options {
        gateway_delay: Duration::from_millis(300),
        ..Options::default()
    };
    let (server, payments) = payments_on(idem, options).await;
    // One run of the route first, so its run time is known.
    let warm = server
        .pay(
            Some("dave"),
            Some(&format!("\"warm-{}\"", unique())),
            &order(5),
        )
        .await;
    assert_eq!(warm.status, StatusCode::CREATED);

    let key = format!("\"gave-up-{}\"", unique());
    let body = order(1234);
    pay_and_give_up(&server, &key, &body, Duration::from_millis(100)).await;
    let early = server.pay(Some("dave"), Some(&key), &body).await;
    early.assert_problem(409, "in-progress");
    assert!(
        early.retry_after() <= 2,
        "Retry-After {} s",
        early.retry_after()
    );

    // The detached run ends 300 ms after it began; on a loaded machine its
    // record may land later, so retry as a client would until it has.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let retry = loop {
        tokio::time::sleep(Duration::from_millis(400)).await;
        let retry = server.pay(Some("dave"), Some(&key), &body).await;
        if retry.status != StatusCode::CONFLICT || tokio::time::Instant::now() > deadline {
            break retry;
        }
        retry.assert_problem(409, "in-progress");
    };
    assert_eq!(retry.status, StatusCode::CREATED, "{:?}", retry.body);
    assert!(retry.replayed(), "the retry ran instead of replaying");
    assert_eq!(retry.json()["amount_cents"], 1234);
    // warm-up + the one that was given up on: two runs, two charges.
    assert_eq!(payments.handler_runs(), 2);
    assert_eq!(payments.service_runs(), 2);
    assert_eq!(payments.gateway().requests(), 2);
}
