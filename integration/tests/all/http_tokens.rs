//! Token mode and versions (SPEC §11) over real HTTP: keys the server
//! issues, bound to the caller and an expiry, and updates that name the
//! version they were made against in `If-Match`.

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::support::http::{Answer, Server, order, payments, quick, serve};
use axum::Router;
use axum::http::{Method, StatusCode};
use axum::routing::post;
use idem::http::{IdempotencyLayer, TokenIssuer};
use idem::{Idempotency, MemoryStore};
use serde_json::json;

const SECRET: &str = "first secret, 32 bytes or more..";
const NEXT_SECRET: &str = "second secret, 32 bytes or more.";

/// `/orders` in token mode, numbering its runs, and `/tokens` issuing
/// tokens; both find the caller by the default rule (a hash of
/// `Authorization`).
fn orders(idem: &Idempotency, issuer: TokenIssuer, runs: Arc<AtomicU32>) -> Router {
    Router::new()
        .route(
            "/orders",
            post(move || async move {
                let n = runs.fetch_add(1, Ordering::SeqCst) + 1;
                (StatusCode::CREATED, format!("order {n}"))
            }),
        )
        .layer(IdempotencyLayer::new(idem.clone()).tokens(issuer.clone()))
        .nest("/tokens", issuer.router())
}

async fn token_server(issuer: TokenIssuer) -> (Server, Arc<AtomicU32>) {
    let runs = Arc::new(AtomicU32::new(0));
    let idem = Idempotency::new(MemoryStore::new());
    (serve(orders(&idem, issuer, runs.clone())).await, runs)
}

fn bearer(user: &str) -> String {
    format!("Bearer {user}")
}

/// A token from `POST /tokens`, as `user`.
async fn mint(server: &Server, user: &str) -> String {
    let answer = server
        .send(
            Method::POST,
            "/tokens",
            &[("authorization", &bearer(user))],
            "",
        )
        .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{:?}", answer.body);
    assert_eq!(answer.headers["cache-control"], "no-store");
    answer.json()["token"].as_str().unwrap().to_owned()
}

async fn order_with(server: &Server, user: &str, key: &str) -> Answer {
    let key = format!("\"{key}\"");
    let headers = [("authorization", bearer(user)), ("idempotency-key", key)];
    let headers: Vec<_> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
    server.send(Method::POST, "/orders", &headers, "{}").await
}

fn text(answer: &Answer) -> &str {
    std::str::from_utf8(&answer.body).unwrap()
}

#[tokio::test]
async fn a_minted_token_works_once_and_replays_after() {
    let (server, runs) = token_server(TokenIssuer::new(SECRET)).await;
    let minted = server
        .send(
            Method::POST,
            "/tokens",
            &[("authorization", "Bearer alice")],
            "",
        )
        .await;
    assert_eq!(minted.status, StatusCode::CREATED);
    assert_eq!(minted.headers["content-type"], "application/json");
    assert_eq!(minted.json()["expires_in"], 3600);
    let token = minted.json()["token"].as_str().unwrap().to_owned();

    let first = order_with(&server, "alice", &token).await;
    assert_eq!(first.status, StatusCode::CREATED, "{:?}", first.body);
    assert!(!first.replayed());
    let again = order_with(&server, "alice", &token).await;
    assert!(again.replayed());
    assert_eq!(text(&again), "order 1");
    assert_eq!(runs.load(Ordering::SeqCst), 1);

    // A second token is a second order.
    let second = order_with(&server, "alice", &mint(&server, "alice").await).await;
    assert_eq!(text(&second), "order 2");
}

#[tokio::test]
async fn keys_not_issued_to_this_caller_are_refused_and_nothing_runs() {
    let (server, runs) = token_server(TokenIssuer::new(SECRET)).await;
    let bobs = mint(&server, "bob").await;
    order_with(&server, "alice", &bobs)
        .await
        .assert_problem(400, "invalid-token");

    let alices = mint(&server, "alice").await;
    for at in [0, 10, alices.len() / 2, alices.len() - 1] {
        let mut forged = alices.clone().into_bytes();
        forged[at] = if forged[at] == b'A' { b'B' } else { b'A' };
        let forged = String::from_utf8(forged).unwrap();
        order_with(&server, "alice", &forged)
            .await
            .assert_problem(400, "invalid-token");
    }
    order_with(&server, "alice", "8e03978e-40d5-43e8-bc93-6894a57f9324")
        .await
        .assert_problem(400, "invalid-token");
    // An anonymous caller's token is no one else's either.
    let anonymous = server.send(Method::POST, "/tokens", &[], "").await;
    let anonymous = anonymous.json()["token"].as_str().unwrap().to_owned();
    order_with(&server, "alice", &anonymous)
        .await
        .assert_problem(400, "invalid-token");
    assert_eq!(runs.load(Ordering::SeqCst), 0, "the handler ran");

    // The genuine one still works: refusals stored nothing.
    let ok = order_with(&server, "alice", &alices).await;
    assert_eq!(ok.status, StatusCode::CREATED);
    // Bob's own token, used by Bob, too.
    assert_eq!(order_with(&server, "bob", &bobs).await.status, 201);
}

#[tokio::test]
async fn an_expired_token_is_refused() {
    // Zero lifetime: expired as soon as it is issued, no clock to wait on.
    let (server, runs) = token_server(TokenIssuer::new(SECRET).ttl(Duration::ZERO)).await;
    let token = mint(&server, "alice").await;
    order_with(&server, "alice", &token)
        .await
        .assert_problem(400, "token-expired");
    // Expired, and another caller's: invalid, not expired (nothing told).
    order_with(&server, "bob", &token)
        .await
        .assert_problem(400, "invalid-token");
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

/// Three deployments over one store: the old secret signs; the new one
/// signs and the old one still verifies; the old one is gone.
#[tokio::test]
async fn rotation_keeps_old_tokens_valid_until_the_secret_is_removed() {
    let idem = Idempotency::new(MemoryStore::new());
    let runs = Arc::new(AtomicU32::new(0));
    let before = serve(orders(&idem, TokenIssuer::new(SECRET), runs.clone())).await;
    let old = mint(&before, "alice").await;
    let old_unused = mint(&before, "alice").await;

    let rotating = TokenIssuer::new(NEXT_SECRET).also_accept(SECRET);
    let during = serve(orders(&idem, rotating, runs.clone())).await;
    assert_eq!(order_with(&during, "alice", &old).await.status, 201);
    let new = mint(&during, "alice").await;
    assert_eq!(order_with(&during, "alice", &new).await.status, 201);
    assert_eq!(runs.load(Ordering::SeqCst), 2);

    let after = serve(orders(&idem, TokenIssuer::new(NEXT_SECRET), runs.clone())).await;
    order_with(&after, "alice", &old_unused)
        .await
        .assert_problem(400, "invalid-token");
    assert_eq!(runs.load(Ordering::SeqCst), 2, "the handler ran");
    let replayed = order_with(&after, "alice", &new).await;
    assert!(replayed.replayed());
    assert_eq!(text(&replayed), "order 2");
    // A server that knows only the old secret refuses the new one's tokens.
    order_with(&before, "alice", &new)
        .await
        .assert_problem(400, "invalid-token");
}

/// A payment of 1000 cents on the example app, and its URL.
async fn paid(server: &Server, user: &str) -> String {
    let key = format!("\"pay-{}\"", support::http::unique());
    let created = server.pay(Some(user), Some(&key), &order(1000)).await;
    assert_eq!(created.status, StatusCode::CREATED, "{:?}", created.body);
    created.headers["location"].to_str().unwrap().to_owned()
}

/// `POST {payment}/refunds` as `user` with a token and maybe `If-Match`.
async fn refund(
    server: &Server,
    payment: &str,
    user: &str,
    token: &str,
    if_match: Option<&str>,
    cents: u64,
) -> Answer {
    let key = format!("\"{token}\"");
    let auth = bearer(user);
    let mut headers = vec![
        ("authorization", auth.as_str()),
        ("idempotency-key", key.as_str()),
        ("content-type", "application/json"),
    ];
    if let Some(if_match) = if_match {
        headers.push(("if-match", if_match));
    }
    let body = json!({ "amount_cents": cents }).to_string();
    server
        .send(Method::POST, &format!("{payment}/refunds"), &headers, &body)
        .await
}

async fn version(server: &Server, payment: &str) -> String {
    let read = server.send(Method::GET, payment, &[], "").await;
    assert_eq!(read.status, StatusCode::OK);
    read.headers["etag"].to_str().unwrap().to_owned()
}

#[tokio::test]
async fn refunds_need_the_current_version() {
    let (server, payments) = payments(quick()).await;
    let payment = paid(&server, "alice").await;
    assert_eq!(version(&server, &payment).await, "\"1\"");
    let token = mint(&server, "alice").await;

    // Each refusal is released, so the same token runs once corrected.
    refund(&server, &payment, "alice", &token, None, 100)
        .await
        .assert_problem(428, "precondition-required");
    refund(&server, &payment, "alice", &token, Some("\"0\""), 100)
        .await
        .assert_problem(412, "precondition-failed");
    refund(&server, &payment, "alice", &token, Some("W/\"1\""), 100)
        .await
        .assert_problem(412, "precondition-failed");
    refund(&server, &payment, "alice", &token, Some("\"1"), 100)
        .await
        .assert_problem(400, "invalid-if-match");
    assert_eq!(version(&server, &payment).await, "\"1\"", "nothing changed");

    let done = refund(
        &server,
        &payment,
        "alice",
        &token,
        Some("\"0\", \"1\""),
        100,
    )
    .await;
    assert_eq!(done.status, StatusCode::CREATED, "{:?}", done.body);
    assert!(!done.replayed());
    assert_eq!(done.headers["etag"], "\"2\"");
    assert_eq!(done.json()["refunded_cents"], 100);
    // 428, two 412s and the 201 ran the handler; the malformed header did not.
    assert_eq!(payments.refund_runs(), 4);

    // `*`: whatever the version is now.
    let any = refund(
        &server,
        &payment,
        "alice",
        &mint(&server, "alice").await,
        Some("*"),
        1,
    )
    .await;
    assert_eq!(any.headers["etag"], "\"3\"");
}

#[tokio::test]
async fn a_completed_refund_replays_after_the_version_moved() {
    let (server, payments) = payments(quick()).await;
    let payment = paid(&server, "alice").await;
    let first_token = mint(&server, "alice").await;
    let first = refund(&server, &payment, "alice", &first_token, Some("\"1\""), 300).await;
    assert_eq!(first.status, StatusCode::CREATED);
    let second = refund(
        &server,
        &payment,
        "alice",
        &mint(&server, "alice").await,
        Some("\"2\""),
        200,
    )
    .await;
    assert_eq!(second.headers["etag"], "\"3\"");

    // The first refund's retry: its version is stale now, yet it gets its
    // stored answer, and refunds nothing again.
    let retry = refund(&server, &payment, "alice", &first_token, Some("\"1\""), 300).await;
    assert_eq!(retry.status, StatusCode::CREATED);
    assert!(retry.replayed());
    assert_eq!(retry.body, first.body);
    assert_eq!(retry.headers["etag"], "\"2\"");
    assert_eq!(payments.refund_runs(), 2);
    assert_eq!(version(&server, &payment).await, "\"3\"");

    // A key of the client's own, or Bob's token, is refused on refunds.
    let own = refund(&server, &payment, "alice", "my-own-uuid", Some("\"3\""), 1).await;
    own.assert_problem(400, "invalid-token");
    let bobs = mint(&server, "bob").await;
    refund(&server, &payment, "alice", &bobs, Some("\"3\""), 1)
        .await
        .assert_problem(400, "invalid-token");
    assert_eq!(payments.refund_runs(), 2);
}

/// Even a layer told to store every status keeps 412 and 428 out: the
/// corrected retry with the same key runs.
#[tokio::test]
async fn precondition_answers_are_never_stored() {
    let calls = Arc::new(AtomicU32::new(0));
    let counted = calls.clone();
    let app = Router::new()
        .route(
            "/things",
            post(move || {
                let n = counted.fetch_add(1, Ordering::SeqCst);
                async move {
                    match n {
                        0 => StatusCode::PRECONDITION_REQUIRED,
                        1 => StatusCode::PRECONDITION_FAILED,
                        _ => StatusCode::CREATED,
                    }
                }
            }),
        )
        .layer(IdempotencyLayer::new(Idempotency::new(MemoryStore::new())).store_status(|_| true));
    let server = serve(app).await;
    let statuses = [428, 412, 201, 201];
    for (i, status) in statuses.into_iter().enumerate() {
        let answer = server.post("/things", "\"thing-1\"", "").await;
        assert_eq!(answer.status.as_u16(), status, "request {i}");
        assert_eq!(answer.replayed(), i == 3, "request {i}");
    }
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}
