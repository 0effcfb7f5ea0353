//! Records survive deploys: a value is read back by its shape, not by its
//! type's path (which changes with the compiler, a moved module or a
//! renamed crate); a changed shape or an explicit version bump is
//! `Error::Codec` naming both sides; corrupt bytes are `Error::Codec`; and
//! the golden records under `tests/golden/`, written by this version, are
//! read back by every later one.
//!
//! Write the golden files of a new kind: `IDEM_WRITE_GOLDEN=1 cargo test
//! -p idem-integration --test records write_golden`. Files that exist are
//! never rewritten: the format 2 ones (`ok_receipt`, `err_declined`,
//! `not_stored`, `http_response`) stand for records written before format
//! 3, which every later version must still read.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::http::{Method, StatusCode};
use axum::routing::post;
use bytes::Bytes;
use idem::http::IdempotencyLayer;
use idem::key::RecordKey;
use idem::store::{Claim, ClaimOutcome, Fence, Token, async_trait};
use idem::{CodecError, Error, Idempotency, MemoryStore, Store, StoreError, idempotent};
use serde::{Deserialize, Serialize};

#[path = "http_support/mod.rs"]
mod http_support;

mod before_the_move {
    #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    pub(crate) struct Receipt {
        pub id: u64,
        pub note: String,
    }
}

mod after_the_move {
    #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    pub(crate) struct Receipt {
        pub id: u64,
        pub note: String,
        #[serde(default)]
        pub currency: Option<String>,
    }
}

#[derive(Serialize, Deserialize, Debug)]
struct ReceiptWithTextId {
    id: String,
    note: String,
}

#[tokio::test]
async fn the_same_shape_under_another_path_replays() {
    let idem = Idempotency::new(MemoryStore::new());
    let stored: Result<before_the_move::Receipt, Error> = idem
        .call("records", "moved")
        .run(|| async {
            Ok(before_the_move::Receipt {
                id: 7,
                note: "n".into(),
            })
        })
        .await;
    stored.unwrap();
    let read: Result<after_the_move::Receipt, Error> = idem
        .call("records", "moved")
        .run(|| async { panic!("a duplicate ran") })
        .await;
    let read = read.unwrap();
    assert_eq!((read.id, read.note.as_str(), read.currency), (7, "n", None));
}

#[tokio::test]
async fn a_changed_field_type_is_a_codec_error_naming_both() {
    let idem = Idempotency::new(MemoryStore::new());
    let _: Result<before_the_move::Receipt, Error> = idem
        .call("records", "retyped")
        .run(|| async {
            Ok(before_the_move::Receipt {
                id: 7,
                note: "n".into(),
            })
        })
        .await;
    let read: Result<ReceiptWithTextId, Error> = idem
        .call("records", "retyped")
        .run(|| async { panic!("a duplicate ran") })
        .await;
    let Err(Error::Codec(err @ CodecError::ShapeChanged { .. })) = read else {
        panic!("{read:?}")
    };
    let text = err.to_string();
    assert!(
        text.contains("before_the_move::Receipt") && text.contains("ReceiptWithTextId"),
        "{text}"
    );
}

static VERSIONED: std::sync::LazyLock<Idempotency> =
    std::sync::LazyLock::new(|| Idempotency::new(MemoryStore::new()));

#[idempotent(key = order, scope = "amounts", store = VERSIONED)]
async fn amount_v1(order: &str) -> Result<u64, Error> {
    Ok(12)
}

/// Same shape, new meaning (cents instead of euros): the author bumps the
/// version, and records of the old one are refused instead of misread.
#[idempotent(key = order, scope = "amounts", store = VERSIONED, version = 2)]
async fn amount_v2(order: &str) -> Result<u64, Error> {
    Ok(1200)
}

#[tokio::test]
async fn a_bumped_version_refuses_older_records() {
    assert_eq!(amount_v1("o-1").await.unwrap(), 12);
    let read = amount_v2("o-1").await;
    assert!(
        matches!(
            read,
            Err(Error::Codec(CodecError::VersionChanged {
                stored: 0,
                expected: 2,
                ..
            }))
        ),
        "{read:?}"
    );
    // A fresh key under version 2 stores and replays as version 2.
    assert_eq!(amount_v2("o-2").await.unwrap(), 1200);
    assert_eq!(amount_v2("o-2").await.unwrap(), 1200);
}

/// A store whose every claim answers "completed" with the given bytes (and
/// the caller's own fingerprint): feeds raw records to the runtime.
struct Seeded(Bytes);

#[async_trait]
impl Store for Seeded {
    async fn claim(&self, _: &RecordKey, claim: &Claim) -> Result<ClaimOutcome, StoreError> {
        Ok(ClaimOutcome::completed(
            claim.fingerprint,
            self.0.clone(),
            Duration::from_secs(60),
        ))
    }
    async fn complete(
        &self,
        _: &RecordKey,
        _: Token,
        _: &[u8],
        _: Duration,
    ) -> Result<Fence, StoreError> {
        Ok(Fence::Held)
    }
    async fn release(&self, _: &RecordKey, _: Token) -> Result<Fence, StoreError> {
        Ok(Fence::Held)
    }
    async fn renew(&self, _: &RecordKey, _: Token, _: Duration) -> Result<Fence, StoreError> {
        Ok(Fence::Held)
    }
}

fn seeded(bytes: impl Into<Bytes>) -> Idempotency {
    Idempotency::new(Seeded(bytes.into()))
}

#[tokio::test]
async fn corrupt_records_are_codec_errors() {
    let good = std::fs::read(golden("ok_receipt.bin")).unwrap();
    let mut cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty", vec![]),
        ("truncated header", good[..3].to_vec()),
        ("truncated value", good[..good.len() - 3].to_vec()),
        ("unknown format byte", [&[9u8][..], &good[1..]].concat()),
        (
            "unknown kind byte",
            [&good[..1], &[7u8][..], &good[2..]].concat(),
        ),
    ];
    let mut noise = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..64 {
        let bytes = (0..40)
            .map(|_| {
                noise ^= noise << 13;
                noise ^= noise >> 7;
                noise ^= noise << 17;
                noise as u8
            })
            .collect();
        cases.push(("random bytes", bytes));
    }
    for (what, bytes) in cases {
        let out: Result<before_the_move::Receipt, Error> = seeded(bytes)
            .call("records", "corrupt")
            .run(|| async { panic!("a corrupt record ran the body") })
            .await;
        assert!(matches!(out, Err(Error::Codec(_))), "{what}: {out:?}");
    }
}

// ---- golden records ------------------------------------------------------

/// What plain JSON loses, in one value (record format 3).
#[derive(Serialize, Deserialize, Debug, Clone)]
struct Lossless {
    cleared: Option<Option<String>>,
    deeper: Option<Option<Option<u8>>>,
    floats: (f64, f64, f64, f32, f32, f32),
    tuple_keys: std::collections::BTreeMap<(u32, u32), String>,
    byte_keys: std::collections::BTreeMap<Vec<u8>, u8>,
    dollar_keys: std::collections::BTreeMap<String, u8>,
    wide: u128,
}

fn lossless() -> Lossless {
    Lossless {
        cleared: Some(None),
        deeper: Some(Some(None)),
        floats: (
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
        ),
        tuple_keys: [((1, 2), "a".to_owned())].into(),
        byte_keys: [(vec![0, 255], 1)].into(),
        dollar_keys: [("$some", 1), ("$f64", 2), ("$map", 3), ("$$x", 4)]
            .map(|(k, v)| (k.to_owned(), v))
            .into(),
        wide: u128::MAX,
    }
}

fn check_lossless(value: &Lossless) {
    let expected = lossless();
    assert_eq!(value.cleared, Some(None));
    assert_eq!(value.deeper, Some(Some(None)));
    let (a, b, c, d, e, f) = value.floats;
    assert!(a.is_nan() && d.is_nan());
    assert_eq!(
        (b, c, e, f),
        (
            f64::INFINITY,
            f64::NEG_INFINITY,
            f32::INFINITY,
            f32::NEG_INFINITY
        )
    );
    assert_eq!(value.tuple_keys, expected.tuple_keys);
    assert_eq!(value.byte_keys, expected.byte_keys);
    assert_eq!(value.dollar_keys, expected.dollar_keys);
    assert_eq!(value.wide, u128::MAX);
}

/// The format byte of each golden file: the old ones stay format 2.
#[test]
fn golden_files_keep_their_format() {
    for (name, format) in [
        ("ok_receipt.bin", 2),
        ("err_declined.bin", 2),
        ("not_stored.bin", 2),
        ("http_response.bin", 2),
        ("ok_lossless_v3.bin", 3),
        ("err_declined_v3.bin", 3),
    ] {
        assert_eq!(std::fs::read(golden(name)).unwrap()[0], format, "{name}");
    }
}

/// Format 3 records, read back from the committed bytes.
#[tokio::test]
async fn golden_format_3_records_decode() {
    let ok: Result<Lossless, Error> = seeded(std::fs::read(golden("ok_lossless_v3.bin")).unwrap())
        .call("golden", "lossless")
        .run(|| async { panic!("replay expected") })
        .await;
    check_lossless(&ok.unwrap());
    let err: Result<u64, Declined> = seeded(std::fs::read(golden("err_declined_v3.bin")).unwrap())
        .call("golden", "err")
        .errors(idem::replay_errors())
        .run(|| async { panic!("replay expected") })
        .await;
    assert_eq!(
        err.unwrap_err(),
        Declined::Card {
            reason: "$expired".into()
        }
    );
}

fn golden(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name)
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
enum Declined {
    Card { reason: String },
}

/// Every record kind, read back from the committed bytes.
#[tokio::test]
async fn golden_records_of_every_kind_decode() {
    let ok: Result<before_the_move::Receipt, Error> =
        seeded(std::fs::read(golden("ok_receipt.bin")).unwrap())
            .call("golden", "ok")
            .run(|| async { panic!("replay expected") })
            .await;
    assert_eq!(
        ok.unwrap(),
        before_the_move::Receipt {
            id: 42,
            note: "golden".into()
        }
    );

    let err: Result<u64, Declined> = seeded(std::fs::read(golden("err_declined.bin")).unwrap())
        .call("golden", "err")
        .errors(idem::replay_errors())
        .run(|| async { panic!("replay expected") })
        .await;
    assert_eq!(
        err.unwrap_err(),
        Declined::Card {
            reason: "expired".into()
        }
    );

    let not_stored: Result<String, Error> =
        seeded(std::fs::read(golden("not_stored.bin")).unwrap())
            .call("golden", "big")
            .run(|| async { panic!("replay expected") })
            .await;
    assert!(
        matches!(not_stored, Err(Error::Codec(CodecError::NotStored(_)))),
        "{not_stored:?}"
    );

    let response =
        idem::http::fuzz_stored_response(&std::fs::read(golden("http_response.bin")).unwrap())
            .expect("the stored HTTP response decodes");
    assert_eq!(response.status(), StatusCode::CREATED);
    assert_eq!(response.headers()["location"], "/orders/42");
    assert_eq!(response.headers()["idempotent-replayed"], "true");
    let body = http_body_util::BodyExt::collect(response.into_body())
        .await
        .unwrap()
        .to_bytes();
    assert_eq!(&body[..], b"{\"id\":42}");
}

impl From<Error> for Declined {
    fn from(err: Error) -> Self {
        Declined::Card {
            reason: err.to_string(),
        }
    }
}

/// Records what the runtime completes, to write the golden files.
#[derive(Clone, Default)]
struct Recording {
    inner: Arc<MemoryStore>,
    last: Arc<Mutex<Vec<u8>>>,
}

#[async_trait]
impl Store for Recording {
    async fn claim(&self, key: &RecordKey, claim: &Claim) -> Result<ClaimOutcome, StoreError> {
        self.inner.claim(key, claim).await
    }
    async fn complete(
        &self,
        key: &RecordKey,
        token: Token,
        record: &[u8],
        ttl: Duration,
    ) -> Result<Fence, StoreError> {
        *self.last.lock().unwrap() = record.to_vec();
        self.inner.complete(key, token, record, ttl).await
    }
    async fn release(&self, key: &RecordKey, token: Token) -> Result<Fence, StoreError> {
        self.inner.release(key, token).await
    }
    async fn renew(
        &self,
        key: &RecordKey,
        token: Token,
        lease: Duration,
    ) -> Result<Fence, StoreError> {
        self.inner.renew(key, token, lease).await
    }
}

#[tokio::test]
async fn write_golden() {
    if std::env::var_os("IDEM_WRITE_GOLDEN").is_none() {
        return;
    }
    let store = Recording::default();
    let small = Idempotency::builder(store.clone())
        .max_record_bytes(256)
        .build();
    // Never rewrites a file: old formats must stay as they were written.
    let write = |name: &str| {
        if !golden(name).exists() {
            std::fs::write(golden(name), &*store.last.lock().unwrap()).unwrap();
        }
    };

    let _: Result<before_the_move::Receipt, Error> = small
        .call("golden", "ok")
        .run(|| async {
            Ok(before_the_move::Receipt {
                id: 42,
                note: "golden".into(),
            })
        })
        .await;
    write("ok_receipt.bin");
    let _: Result<u64, Declined> = small
        .call("golden", "err")
        .errors(idem::replay_errors())
        .run(|| async {
            Err(Declined::Card {
                reason: "expired".into(),
            })
        })
        .await;
    write("err_declined.bin");
    let _: Result<String, Error> = small
        .call("golden", "big")
        .run(|| async { Ok("x".repeat(1024)) })
        .await;
    write("not_stored.bin");
    let _: Result<Lossless, Error> = Idempotency::new(store.clone())
        .call("golden", "lossless")
        .run(|| async { Ok(lossless()) })
        .await;
    write("ok_lossless_v3.bin");
    let _: Result<u64, Declined> = small
        .call("golden", "err-v3")
        .errors(idem::replay_errors())
        .run(|| async {
            Err(Declined::Card {
                reason: "$expired".into(),
            })
        })
        .await;
    write("err_declined_v3.bin");

    let router = Router::new()
        .route(
            "/orders",
            post(|| async {
                (
                    StatusCode::CREATED,
                    [("location", "/orders/42")],
                    "{\"id\":42}",
                )
            }),
        )
        .layer(IdempotencyLayer::new(Idempotency::new(store.clone())));
    let server = http_support::serve(router).await;
    let answer = server
        .send(
            Method::POST,
            "/orders",
            &[("idempotency-key", "\"g-1\"")],
            "{}",
        )
        .await;
    assert_eq!(answer.status, StatusCode::CREATED);
    write("http_response.bin");
}
