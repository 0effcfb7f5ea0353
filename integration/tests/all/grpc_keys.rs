//! The tonic layer's keys and scopes over real HTTP/2 (SPEC §14): a key
//! read from the decoded request's field (AIP-155's `request_id`), and
//! the principal in a key's scope, the default one and the application's.

use idem::grpc::IdempotencyLayer;
use idem::{Idempotency, MemoryStore};
use tonic::Code;
use tonic_types::StatusExt;

use crate::support::grpc::{self, CHARGE, ChargeRequest, order};

fn reason(status: &tonic::Status) -> String {
    status
        .get_details_error_info()
        .map(|info| format!("{}/{}", info.domain, info.reason))
        .unwrap_or_default()
}

fn keyed_by_field() -> IdempotencyLayer {
    IdempotencyLayer::new(Idempotency::new(MemoryStore::new()))
        .key_field(CHARGE, |request: &ChargeRequest| &request.request_id)
}

fn with_id(order_name: &str, request_id: &str) -> ChargeRequest {
    ChargeRequest {
        request_id: request_id.into(),
        ..order(order_name)
    }
}

#[tokio::test]
async fn the_request_id_field_is_the_key_when_the_metadata_is_absent() {
    let (addr, runs) = grpc::serve(keyed_by_field()).await;
    let mut client = grpc::connect(addr).await;
    let first = client.charge(None, with_id("o-1", "r-1")).await.unwrap();
    let again = client.charge(None, with_id("o-1", "r-1")).await.unwrap();
    assert_eq!(runs.started(), 1);
    assert_eq!(first.get_ref(), again.get_ref());
    assert_eq!(again.metadata().get("idempotent-replayed").unwrap(), "true");
    // Another request id is another call; the same one with another
    // message is a reused key.
    client.charge(None, with_id("o-1", "r-2")).await.unwrap();
    assert_eq!(runs.started(), 2);
    let status = client
        .charge(None, with_id("o-2", "r-1"))
        .await
        .unwrap_err();
    assert_eq!(reason(&status), "idemkit/IDEMPOTENCY_KEY_REUSED");
    assert_eq!(runs.started(), 2);
}

#[tokio::test]
async fn the_metadata_key_wins_over_the_field() {
    let (addr, runs) = grpc::serve(keyed_by_field()).await;
    let mut client = grpc::connect(addr).await;
    client
        .charge(Some("k-meta"), with_id("o-1", "r-1"))
        .await
        .unwrap();
    // The same metadata key with another request id: the metadata names
    // the call, and the message (its field included) is another one.
    let status = client
        .charge(Some("k-meta"), with_id("o-1", "r-9"))
        .await
        .unwrap_err();
    assert_eq!(reason(&status), "idemkit/IDEMPOTENCY_KEY_REUSED");
    // The field alone is a key of its own, not the metadata's record.
    let by_field = client.charge(None, with_id("o-1", "r-1")).await.unwrap();
    assert_eq!(by_field.metadata().get("idempotent-replayed"), None);
    assert_eq!(runs.started(), 2);
}

#[tokio::test]
async fn an_empty_field_passes_through_or_is_refused_where_required() {
    let (addr, runs) = grpc::serve(keyed_by_field()).await;
    let mut client = grpc::connect(addr).await;
    client.charge(None, order("o-1")).await.unwrap();
    client.charge(None, order("o-1")).await.unwrap();
    assert_eq!(runs.started(), 2, "no key: not claimed");

    let (addr, runs) = grpc::serve(keyed_by_field().required(CHARGE)).await;
    let mut client = grpc::connect(addr).await;
    let status = client.charge(None, order("o-1")).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(reason(&status), "idemkit/IDEMPOTENCY_KEY_MISSING");
    let long = "r".repeat(256);
    let status = client
        .charge(None, with_id("o-1", &long))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(reason(&status), "idemkit/IDEMPOTENCY_KEY_INVALID");
    let status = client
        .charge(None, with_id("o-1", "has space"))
        .await
        .unwrap_err();
    assert_eq!(reason(&status), "idemkit/IDEMPOTENCY_KEY_INVALID");
    assert_eq!(runs.started(), 0);
    client.charge(None, with_id("o-1", "r-1")).await.unwrap();
    assert_eq!(runs.started(), 1);
}

/// `Charge` with `key` and one more metadata entry.
async fn charge_as(
    client: &mut grpc::Client,
    key: &str,
    name: &'static str,
    value: &str,
) -> Result<tonic::Response<grpc::ChargeReply>, tonic::Status> {
    let mut request = tonic::Request::new(order("o-1"));
    request.metadata_mut().insert(name, value.parse().unwrap());
    client.charge_request(Some(key), request).await
}

#[tokio::test]
async fn by_default_two_credentials_never_share_a_key() {
    let layer = IdempotencyLayer::new(Idempotency::new(MemoryStore::new())).unary(CHARGE);
    let (addr, runs) = grpc::serve(layer).await;
    let mut client = grpc::connect(addr).await;
    let alice = "Bearer alice";
    let first = charge_as(&mut client, "k-1", "authorization", alice)
        .await
        .unwrap();
    let bob = charge_as(&mut client, "k-1", "authorization", "Bearer bob")
        .await
        .unwrap();
    let again = charge_as(&mut client, "k-1", "authorization", alice)
        .await
        .unwrap();
    assert_eq!(runs.started(), 2, "bob's call is his own");
    assert_ne!(first.get_ref(), bob.get_ref());
    assert_eq!(first.get_ref(), again.get_ref());
    assert_eq!(again.metadata().get("idempotent-replayed").unwrap(), "true");
}

#[tokio::test]
async fn a_custom_principal_scopes_keys_by_what_it_returns() {
    // The tenant here comes from metadata; an authentication layer
    // outside this one would put it into the request's extensions.
    let layer = IdempotencyLayer::new(Idempotency::new(MemoryStore::new()))
        .unary(CHARGE)
        .principal(|request| {
            let tenant = request.headers.get("x-tenant")?;
            Some(format!("tenant {}", tenant.to_str().ok()?))
        });
    let (addr, runs) = grpc::serve(layer).await;
    let mut client = grpc::connect(addr).await;
    let acme = charge_as(&mut client, "k-1", "x-tenant", "acme")
        .await
        .unwrap();
    let globex = charge_as(&mut client, "k-1", "x-tenant", "globex")
        .await
        .unwrap();
    assert_eq!(runs.started(), 2);
    assert_ne!(acme.get_ref(), globex.get_ref());
    // The same tenant with another credential: the principal is the
    // tenant, so the answer is replayed.
    let mut request = tonic::Request::new(order("o-1"));
    request
        .metadata_mut()
        .insert("x-tenant", "acme".parse().unwrap());
    request
        .metadata_mut()
        .insert("authorization", "Bearer other".parse().unwrap());
    let again = client.charge_request(Some("k-1"), request).await.unwrap();
    assert_eq!(again.get_ref(), acme.get_ref());
    assert_eq!(runs.started(), 2);
}
