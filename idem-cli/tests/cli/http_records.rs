//! An HTTP layer's record, found from what its client knows (issue 47):
//! the method and route, the `Idempotency-Key`, and the credential the
//! request carried, as the layer derives its principal; shown as status,
//! headers and body, under a line naming the store it was read from.

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::routing::post;
use idem::Idempotency;
use idem::http::IdempotencyLayer;
use tower::ServiceExt;

use crate::commands::run;

/// Sends `POST path` with `key` (and `authorization`, when given) through
/// `app`; the handler must answer 201.
async fn send(app: &Router, path: &str, key: &str, authorization: Option<&str>) {
    let mut request = Request::post(path)
        .header("idempotency-key", format!("\"{key}\""))
        .header("content-type", "application/json");
    if let Some(credential) = authorization {
        request = request.header("authorization", credential);
    }
    let request = request.body(Body::from(r#"{"sku":"tea"}"#)).unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
}

fn app(idem: &Idempotency) -> Router {
    let created = || async { (StatusCode::CREATED, "{\"order\":\"o-7\"}") };
    let by_credentials = Router::new()
        .route("/orders/{id}", post(created))
        .layer(IdempotencyLayer::new(idem.clone()));
    let own_principal = Router::new()
        .route("/refunds", post(created))
        .layer(IdempotencyLayer::new(idem.clone()).principal(|_| Some("user-9".to_owned())));
    by_credentials.merge(own_principal)
}

/// `idem inspect --http …` on `target`: exit code, stdout, stderr.
fn inspect(target: &[&str], http: &str, key: &str, extra: &[&str]) -> (i32, String, String) {
    let args = [target, &["inspect", "--http", http, "--key", key], extra].concat();
    run(&args)
}

/// Requests through the layer, then each record found by the CLI from
/// the request's method, route, key and credential; a wrong credential or
/// a path in place of the route finds nothing, and says how to name it;
/// `forget` takes the same words.
pub(crate) async fn found_from_what_the_client_knows(target: &[&str], idem: &Idempotency) {
    let app = app(idem);
    let suffix = format!("{:x}", idem::store::Token::random().to_u128() as u32);
    let (alice, anonymous, refund) = (
        format!("ord-a1-{suffix}"),
        format!("ord-b2-{suffix}"),
        format!("ref-{suffix}"),
    );
    send(&app, "/orders/7", &alice, Some("Bearer alice")).await;
    send(&app, "/orders/7", &anonymous, None).await;
    send(&app, "/refunds", &refund, Some("Bearer ignored")).await;

    let route = "POST /orders/{id}";
    let credential = ["--header", "authorization: Bearer alice"];
    let (code, text, err) = inspect(target, route, &alice, &credential);
    assert_eq!(code, 0, "{err}");
    assert!(text.starts_with("store        "), "{text}");
    assert!(text.contains("status       201"), "{text}");
    assert!(text.contains("body         {\"order\":\"o-7\"}"), "{text}");
    assert!(!text.contains("Kept") && !text.contains("type "), "{text}");

    let (code, _, err) = inspect(
        target,
        route,
        &alice,
        &["--header", "authorization: Bearer bob"],
    );
    assert_eq!(code, 1, "another credential is another caller: {err}");
    assert!(
        err.contains("no record under") && err.contains("--header"),
        "{err}"
    );
    let (code, _, err) = inspect(target, "POST /orders/7", &alice, &credential);
    assert_eq!(code, 1, "the path is not the route: {err}");

    let (code, text, err) = inspect(target, route, &anonymous, &[]);
    assert_eq!(code, 0, "an anonymous request: {err}");
    assert!(text.contains("status       201"), "{text}");

    let (code, _, err) = inspect(target, "POST /refunds", &refund, &["--principal", "user-9"]);
    assert_eq!(code, 0, "the layer's own principal: {err}");
    let forgot = [
        target,
        &["forget", "--http", route, "--key", &alice],
        &credential[..],
    ]
    .concat();
    assert_eq!(run(&forgot).0, 0);
    assert_eq!(
        inspect(target, route, &alice, &credential).0,
        1,
        "forgotten"
    );
    // The store's other tests count its records: these leave none.
    for (http, key, extra) in [
        (route, &anonymous, &[][..]),
        ("POST /refunds", &refund, &["--principal", "user-9"][..]),
    ] {
        let forget = [target, &["forget", "--http", http, "--key", key], extra].concat();
        assert_eq!(run(&forget).0, 0);
    }
}
