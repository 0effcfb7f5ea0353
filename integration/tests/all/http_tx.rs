//! The layer's transactional mode (SPEC §7) on PostgreSQL and MySQL, over
//! real HTTP: the handler inserts an order through
//! `idem::http::Transaction`, and the order and the stored response commit
//! together or not at all. The chaos test of the same is
//! `http_tx_chaos.rs`.

use crate::support::http::{Answer, Server, serve};
use crate::support::sql::SqlServer;
use crate::support::sql::tx::{Fixture, Order, TxServer, fixture};
use crate::support::sql_mysql::{self, MySqlServer as My};
use crate::support::sql_pg::{self, Pg};

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use idem::Store;
use idem::admin::{Admin, ListFilter};
use idem::http::{IdempotencyLayer, TokenIssuer, Transaction};
use idem::transaction::Transactional;
use serde_json::{Value, json};

type Boxed<'c, T> = Pin<Box<dyn Future<Output = T> + Send + 'c>>;

/// A server whose store has the transactional mode, and its orders.
pub(crate) trait HttpTx: TxServer<Store: Transactional<Conn = Self::Conn>> {
    /// The store's connection, as the handler gets it.
    type Conn: Send + 'static;
    /// Inserts the order `key` of `sku` into `orders` on `conn`.
    fn insert<'c>(
        conn: &'c mut Self::Conn,
        orders: &'c str,
        key: &'c str,
        sku: &'c str,
    ) -> Boxed<'c, Order>;
    /// Inserts the order `key` on a connection of `pool`, committed at once.
    fn insert_on_pool<'c>(
        pool: &'c sqlx::Pool<Self::Db>,
        orders: &'c str,
        key: &'c str,
    ) -> Boxed<'c, Order>;
    /// Every order's key and id.
    fn orders_by_key(orders: &str) -> Boxed<'_, Vec<(String, i64)>>;
}

/// `HttpTx` for a server whose orders are inserted by `$insert` on a
/// `$conn`; `$id` reads an order's id as a signed integer.
macro_rules! http_tx {
    ($server:ty, $conn:ty, $insert:path, $id:literal) => {
        impl HttpTx for $server {
            type Conn = $conn;

            fn insert<'c>(
                conn: &'c mut Self::Conn,
                orders: &'c str,
                key: &'c str,
                sku: &'c str,
            ) -> Boxed<'c, Order> {
                Box::pin($insert(conn, orders, key, sku))
            }

            fn insert_on_pool<'c>(
                pool: &'c sqlx::Pool<Self::Db>,
                orders: &'c str,
                key: &'c str,
            ) -> Boxed<'c, Order> {
                Box::pin(async move {
                    let mut conn = pool.acquire().await.unwrap();
                    $insert(&mut conn, orders, key, "tea").await
                })
            }

            fn orders_by_key(orders: &str) -> Boxed<'_, Vec<(String, i64)>> {
                Box::pin(async move {
                    let pool = sqlx::Pool::<Self::Db>::connect(&Self::url().await)
                        .await
                        .unwrap();
                    let select = format!(concat!("SELECT order_key, ", $id, " FROM {}"), orders);
                    sqlx::query_as(&select).fetch_all(&pool).await.unwrap()
                })
            }
        }
    };
}

http_tx!(Pg, sqlx::PgConnection, sql_pg::insert_order, "id");
http_tx!(
    My,
    sqlx::MySqlConnection,
    sql_mysql::insert_order,
    "CAST(id AS SIGNED)"
);

/// What the handler writes to, and the store whose claims `x-forget`
/// removes.
struct Shop<S: TxServer> {
    orders: String,
    store: S::Store,
}

/// `POST /orders {"ref", "sku"}`: inserts the order in the request's
/// transaction and answers 201 with it. After the insert, `x-forget`
/// removes every claim (as an operator's `forget` would, so the
/// completion finds no claim of its own), `x-slow: MS` sleeps and
/// `x-fail` answers 500.
async fn create<S: HttpTx>(
    State(shop): State<Arc<Shop<S>>>,
    tx: Transaction<S::Conn>,
    headers: HeaderMap,
    Json(order): Json<Value>,
) -> Response {
    let (key, sku) = (
        order["ref"].as_str().unwrap(),
        order["sku"].as_str().unwrap(),
    );
    let order = S::insert(&mut *tx.conn().await.unwrap(), &shop.orders, key, sku).await;
    if headers.contains_key("x-forget") {
        for record in shop.store.list(&ListFilter::default()).await.unwrap() {
            shop.store.forget(&record.key).await.unwrap();
        }
    }
    if let Some(ms) = headers.get("x-slow") {
        let ms: u64 = ms.to_str().unwrap().parse().unwrap();
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
    if headers.contains_key("x-fail") {
        return (StatusCode::INTERNAL_SERVER_ERROR, "failed after the insert").into_response();
    }
    (
        StatusCode::CREATED,
        Json(json!({ "id": order.id, "sku": order.sku })),
    )
        .into_response()
}

/// The orders API in the transactional mode, on a server of its own.
async fn shop<S: HttpTx>(f: &Fixture<S>, key_required: bool) -> Server {
    shop_with(
        f,
        IdempotencyLayer::new(f.idem.clone()).key_required(key_required),
    )
    .await
}

/// The orders API behind `layer` set to the transactional mode.
async fn shop_with<S: HttpTx>(f: &Fixture<S>, layer: IdempotencyLayer) -> Server {
    let shop = Arc::new(Shop::<S> {
        orders: f.orders.clone(),
        store: f.store.clone(),
    });
    let layer = layer.transactional(f.store.clone());
    serve(
        Router::new()
            .route("/orders", post(create::<S>))
            .with_state(shop)
            .layer(layer),
    )
    .await
}

async fn order(
    server: &Server,
    key: Option<&str>,
    reference: &str,
    extra: &[(&str, &str)],
) -> Answer {
    let key = key.map(|key| format!("\"{key}\""));
    let mut headers = vec![("content-type", "application/json")];
    if let Some(key) = &key {
        headers.push(("idempotency-key", key));
    }
    headers.extend_from_slice(extra);
    let body = json!({ "ref": reference, "sku": "tea" }).to_string();
    server.send(Method::POST, "/orders", &headers, &body).await
}

async fn one_order_and_its_response_commit_together<S: HttpTx>() {
    let f = fixture::<S>("http_tx_once").await;
    let server = shop(&f, true).await;
    let first = order(&server, Some("o-1"), "o-1", &[]).await;
    assert_eq!(first.status, StatusCode::CREATED, "{:?}", first.body);
    let again = order(&server, Some("o-1"), "o-1", &[]).await;
    assert!(again.replayed());
    assert_eq!((again.status, again.json()), (first.status, first.json()));
    assert_eq!((f.orders().await, f.completed().await), (1, 1));
}

async fn a_5xx_rolls_the_order_back_and_the_retry_runs<S: HttpTx>() {
    let f = fixture::<S>("http_tx_5xx").await;
    let server = shop(&f, true).await;
    let failed = order(&server, Some("o-1"), "o-1", &[("x-fail", "1")]).await;
    assert_eq!(failed.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!((f.orders().await, f.records().await), (0, 0));
    let retry = order(&server, Some("o-1"), "o-1", &[]).await;
    assert_eq!(retry.status, StatusCode::CREATED);
    assert!(!retry.replayed());
    assert_eq!((f.orders().await, f.completed().await), (1, 1));
}

async fn a_completion_without_its_claim_rolls_the_order_back<S: HttpTx>() {
    let f = fixture::<S>("http_tx_lost").await;
    let server = shop(&f, true).await;
    let lost = order(&server, Some("o-1"), "o-1", &[("x-forget", "1")]).await;
    assert!(
        lost.status.is_client_error() || lost.status.is_server_error(),
        "{lost:?}"
    );
    assert_eq!(lost.headers["content-type"], "application/problem+json");
    assert_eq!((f.orders().await, f.records().await), (0, 0));
    let retry = order(&server, Some("o-1"), "o-1", &[]).await;
    assert_eq!(retry.status, StatusCode::CREATED);
    assert_eq!((f.orders().await, f.completed().await), (1, 1));
}

async fn a_duplicate_meanwhile_gets_409_then_the_replay<S: HttpTx>() {
    let f = fixture::<S>("http_tx_dup").await;
    let server = Arc::new(shop(&f, true).await);
    let first = tokio::spawn({
        let server = Arc::clone(&server);
        async move { order(&server, Some("o-1"), "o-1", &[("x-slow", "1500")]).await }
    });
    // The claim commits at once, before the handler's insert.
    while f.records().await == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let meanwhile = order(&server, Some("o-1"), "o-1", &[]).await;
    assert_eq!(meanwhile.status, StatusCode::CONFLICT, "{meanwhile:?}");
    let first = first.await.unwrap();
    assert_eq!(first.status, StatusCode::CREATED);
    let after = order(&server, Some("o-1"), "o-1", &[]).await;
    assert!(after.replayed());
    assert_eq!(f.orders().await, 1);
}

async fn a_client_that_goes_away_still_gets_its_order_on_retry<S: HttpTx>() {
    let f = fixture::<S>("http_tx_gone").await;
    let server = shop(&f, true).await;
    let slow = order(&server, Some("o-1"), "o-1", &[("x-slow", "800")]);
    let gone = tokio::time::timeout(Duration::from_millis(200), slow).await;
    assert!(gone.is_err(), "the client gave up before the answer");
    // The handler runs on and commits; the retry waits for it.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let retry = loop {
        let answer = order(&server, Some("o-1"), "o-1", &[]).await;
        if answer.status != StatusCode::CONFLICT || std::time::Instant::now() > deadline {
            break answer;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(retry.replayed(), "{retry:?}");
    assert_eq!(retry.status, StatusCode::CREATED);
    assert_eq!((f.orders().await, f.completed().await), (1, 1));
}

async fn server_issued_keys_work_in_the_mode<S: HttpTx>() {
    let f = fixture::<S>("http_tx_tokens").await;
    let issuer = TokenIssuer::new("a secret of 32 bytes or more.....");
    let server = shop_with(
        &f,
        IdempotencyLayer::new(f.idem.clone()).tokens(issuer.clone()),
    )
    .await;
    // An anonymous caller's token (the default principal: none).
    let token = issuer.issue(b"");
    let first = order(&server, Some(&token), "o-1", &[]).await;
    assert_eq!(first.status, StatusCode::CREATED, "{first:?}");
    let again = order(&server, Some(&token), "o-1", &[]).await;
    assert!(again.replayed());
    let forged = order(&server, Some("not-a-token"), "o-2", &[]).await;
    assert!(forged.status.is_client_error(), "{forged:?}");
    assert_eq!((f.orders().await, f.completed().await), (1, 1));
}

async fn a_keyless_request_commits_its_own_transaction<S: HttpTx>() {
    let f = fixture::<S>("http_tx_keyless").await;
    let server = shop(&f, false).await;
    let created = order(&server, None, "o-1", &[]).await;
    assert_eq!(created.status, StatusCode::CREATED);
    let failed = order(&server, None, "o-2", &[("x-fail", "1")]).await;
    assert_eq!(failed.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!((f.orders().await, f.records().await), (1, 0));
}

macro_rules! on_each_server {
    ($($case:ident),* $(,)?) => {
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case::<super::Pg>().await;
                }
            )*
        }
        mod mysql {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case::<super::My>().await;
                }
            )*
        }
    };
}

on_each_server!(
    one_order_and_its_response_commit_together,
    a_5xx_rolls_the_order_back_and_the_retry_runs,
    a_completion_without_its_claim_rolls_the_order_back,
    a_duplicate_meanwhile_gets_409_then_the_replay,
    a_keyless_request_commits_its_own_transaction,
    a_client_that_goes_away_still_gets_its_order_on_retry,
    server_issued_keys_work_in_the_mode,
);

/// A handler that takes `Transaction` behind a layer without the mode is
/// answered 500, naming the misconfiguration; it never runs.
#[tokio::test]
async fn a_transaction_outside_the_mode_is_a_500_that_says_so() {
    async fn handler(_: Transaction<sqlx::PgConnection>) -> &'static str {
        unreachable!("no transaction to give it")
    }
    let idem = idem::Idempotency::new(idem::MemoryStore::new());
    let app = Router::new()
        .route("/orders", post(handler))
        .layer(IdempotencyLayer::new(idem));
    let server = serve(app).await;
    let answer = order(&server, Some("o-1"), "o-1", &[]).await;
    answer.assert_problem(500, "no-transaction");
}
