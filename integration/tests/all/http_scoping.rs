//! Keys belong to their caller: with no `principal`, the layer scopes keys
//! by a hash of the request's credentials, so one caller's stored response
//! never reaches another who reuses the key. Over real HTTP.

use crate::support;

use crate::support::captured;

use captured::Captured;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::support::http::{Answer, Server, serve};
use axum::Router;
use axum::http::{Method, StatusCode};
use axum::routing::post;
use idem::http::IdempotencyLayer;
use idem::{Idempotency, MemoryStore, SqliteStore};

/// An orders route behind `layer` whose handler numbers its runs: each
/// caller's answer says which run made it.
fn orders(layer: IdempotencyLayer, runs: Arc<AtomicU32>) -> Router {
    Router::new()
        .route(
            "/orders",
            post(move || async move {
                let n = runs.fetch_add(1, Ordering::SeqCst) + 1;
                (StatusCode::CREATED, format!("order {n}"))
            }),
        )
        .layer(layer)
}

fn memory_layer() -> IdempotencyLayer {
    IdempotencyLayer::new(Idempotency::new(MemoryStore::new()))
}

async fn order(server: &Server, headers: &[(&str, &str)]) -> Answer {
    let mut all = vec![("idempotency-key", "\"k-shared\"")];
    all.extend_from_slice(headers);
    server.send(Method::POST, "/orders", &all, "{}").await
}

fn text(answer: &Answer) -> &str {
    std::str::from_utf8(&answer.body).unwrap()
}

/// Two callers, one key, one body: two runs; each retry replays its own.
async fn two_callers_are_apart(server: &Server, alice: &[(&str, &str)], bob: &[(&str, &str)]) {
    let first = order(server, alice).await;
    assert_eq!(first.status, StatusCode::CREATED);
    assert!(!first.replayed());
    let other = order(server, bob).await;
    assert_eq!(other.status, StatusCode::CREATED);
    assert!(!other.replayed(), "bob got a replay: {:?}", text(&other));
    assert_ne!(text(&first), text(&other));

    let alice_again = order(server, alice).await;
    assert!(alice_again.replayed());
    assert_eq!(text(&alice_again), text(&first));
    let bob_again = order(server, bob).await;
    assert!(bob_again.replayed());
    assert_eq!(text(&bob_again), text(&other));
}

#[tokio::test]
async fn by_default_two_credentials_never_share_a_record() {
    let runs = Arc::new(AtomicU32::new(0));
    let server = serve(orders(memory_layer(), runs.clone())).await;
    two_callers_are_apart(
        &server,
        &[("authorization", "Bearer alice-secret")],
        &[("authorization", "Bearer bob-secret")],
    )
    .await;
    assert_eq!(runs.load(Ordering::SeqCst), 2);

    // No credential at all: the anonymous scope, shared as before.
    let anonymous = order(&server, &[]).await;
    assert!(!anonymous.replayed());
    assert!(order(&server, &[]).await.replayed());
    assert_eq!(runs.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_principal_function_overrides_the_credentials() {
    let runs = Arc::new(AtomicU32::new(0));
    let layer = memory_layer().principal(|parts| {
        let user = parts.headers.get("x-user")?;
        Some(user.to_str().ok()?.to_owned())
    });
    let server = serve(orders(layer, runs.clone())).await;
    two_callers_are_apart(&server, &[("x-user", "alice")], &[("x-user", "bob")]).await;
    assert_eq!(runs.load(Ordering::SeqCst), 2);

    // The function decides alone: another Authorization is the same user.
    let same_user = order(
        &server,
        &[
            ("x-user", "alice"),
            ("authorization", "Bearer another-token"),
        ],
    )
    .await;
    assert!(same_user.replayed());
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn session_cookies_scope_keys_and_other_cookies_do_not() {
    let runs = Arc::new(AtomicU32::new(0));
    let layer = memory_layer().principal_cookies(["session"]);
    let server = serve(orders(layer, runs.clone())).await;
    two_callers_are_apart(
        &server,
        &[("cookie", "session=alice-session; theme=dark")],
        &[("cookie", "theme=dark; session=bob-session")],
    )
    .await;
    assert_eq!(runs.load(Ordering::SeqCst), 2);

    // A cookie that is not named (a tracking id) does not make a new caller.
    let tracked = order(&server, &[("cookie", "session=alice-session; tracking=x9")]).await;
    assert!(tracked.replayed());
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn the_opt_out_shares_keys_across_callers_as_documented() {
    let runs = Arc::new(AtomicU32::new(0));
    let layer = memory_layer().share_keys_across_callers();
    let server = serve(orders(layer, runs.clone())).await;
    let alice = order(&server, &[("authorization", "Bearer alice-secret")]).await;
    let bob = order(&server, &[("authorization", "Bearer bob-secret")]).await;
    assert!(bob.replayed());
    assert_eq!(text(&bob), text(&alice));
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle.as_bytes())
}

/// On a current-thread runtime the server's tasks run on this thread, so a
/// thread-local subscriber sees every event.
#[tokio::test]
async fn no_raw_credential_is_stored_or_logged() {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_writer(captured.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let path = std::env::temp_dir().join(format!("idem-scoping-{}.db", support::http::unique()));
    let store = SqliteStore::open(&path).await.unwrap();
    let layer = IdempotencyLayer::new(Idempotency::new(store)).principal_cookies(["session"]);
    let runs = Arc::new(AtomicU32::new(0));
    let server = serve(orders(layer, runs.clone())).await;
    let secret = [
        ("authorization", "Bearer alice-secret-token"),
        ("cookie", "session=alice-session-cookie"),
    ];
    order(&server, &secret).await;
    assert!(order(&server, &secret).await.replayed());
    // Another body under the key: 422, logged with the scope.
    let mut all = vec![("idempotency-key", "\"k-shared\"")];
    all.extend_from_slice(&secret);
    let mismatch = server
        .send(Method::POST, "/orders", &all, "{\"x\":1}")
        .await;
    assert_eq!(mismatch.status, StatusCode::UNPROCESSABLE_ENTITY);
    drop(server);

    let logs = captured.bytes();
    assert!(
        contains(&logs, "credential "),
        "the scope is logged, hashed: {}",
        String::from_utf8_lossy(&logs)
    );
    let mut stored = Vec::new();
    for suffix in ["", "-wal"] {
        if let Ok(bytes) = std::fs::read(format!("{}{suffix}", path.display())) {
            stored.extend(bytes);
        }
    }
    assert!(contains(&stored, "order 1"), "the response is in the file");
    for raw in ["alice-secret-token", "alice-session-cookie"] {
        assert!(!contains(&logs, raw), "{raw} in the logs");
        assert!(!contains(&stored, raw), "{raw} in the store");
        assert!(!contains(&mismatch.body, raw), "{raw} in the 422");
    }
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}
