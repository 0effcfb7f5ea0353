//! Records survive deploys: a value is read back by its shape, not by its
//! type's path (which changes with the compiler, a moved module or a
//! renamed crate); a changed shape or an explicit version bump is
//! `Error::Codec` naming both sides; corrupt bytes are `Error::Codec`; and
//! the golden records under `tests/golden/`, in the one record format
//! (3), are read back by every later version.
//!
//! `tests/golden/format_2/` keeps records of format 2, which only builds
//! before 0.1 wrote: they are refused with `CodecError::Format`, and the
//! body does not run.
//!
//! Write the golden files of a new kind: `IDEM_WRITE_GOLDEN=1 cargo test
//! -p idem-integration --test all records::write_golden`. Files that exist are
//! never rewritten: a record written by one release must read in the next.

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

use crate::support;

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
        _: idem::store::Retention,
    ) -> Result<Fence, StoreError> {
        Ok(Fence::Held)
    }
    async fn release(&self, _: &RecordKey, _: Token) -> Result<Fence, StoreError> {
        Ok(Fence::Held)
    }
    async fn renew(&self, _: &RecordKey, _: Token, _: Duration) -> Result<Fence, StoreError> {
        Ok(Fence::Held)
    }
    async fn forget(&self, _: &RecordKey) -> Result<(), StoreError> {
        Ok(())
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

/// The format byte of each golden file: 3 in `golden/`, 2 in
/// `golden/format_2/`, and every record kind is in `golden/`.
#[test]
fn golden_files_keep_their_format() {
    for (dir, format) in [("", 3), ("format_2", 2)] {
        for file in std::fs::read_dir(golden(dir)).unwrap() {
            let path = file.unwrap().path();
            if path.extension().is_some_and(|ext| ext == "bin") {
                let bytes = std::fs::read(&path).unwrap();
                assert_eq!(bytes[0], format, "{}", path.display());
            }
        }
    }
    for kind in KINDS {
        assert!(golden(kind).exists(), "golden/{kind} is missing");
    }
}

/// The record kinds `write_golden` writes.
const KINDS: [&str; 5] = [
    "ok_receipt.bin",
    "ok_lossless.bin",
    "err_declined.bin",
    "not_stored.bin",
    "http_response.bin",
];

fn golden(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name)
}

fn read_golden(name: &str) -> Vec<u8> {
    std::fs::read(golden(name)).unwrap()
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
enum Declined {
    Card { reason: String },
}

/// Every record kind, read back from the committed bytes.
#[tokio::test]
async fn golden_records_of_every_kind_decode() {
    let ok: Result<before_the_move::Receipt, Error> = seeded(read_golden("ok_receipt.bin"))
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

    let ok: Result<Lossless, Error> = seeded(read_golden("ok_lossless.bin"))
        .call("golden", "lossless")
        .run(|| async { panic!("replay expected") })
        .await;
    check_lossless(&ok.unwrap());

    let err: Result<u64, Declined> = seeded(read_golden("err_declined.bin"))
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

    let not_stored: Result<String, Error> = seeded(read_golden("not_stored.bin"))
        .call("golden", "big")
        .run(|| async { panic!("replay expected") })
        .await;
    assert!(
        matches!(not_stored, Err(Error::Codec(CodecError::NotStored(_)))),
        "{not_stored:?}"
    );

    // The stored HTTP response, replayed by the layer.
    let router = Router::new()
        .route(
            "/orders",
            post(|| async { (StatusCode::IM_A_TEAPOT, "ran") }),
        )
        .layer(IdempotencyLayer::new(seeded(read_golden(
            "http_response.bin",
        ))));
    let server = support::http::serve(router).await;
    let response = server
        .send(
            Method::POST,
            "/orders",
            &[("idempotency-key", "\"g-1\"")],
            "{}",
        )
        .await;
    assert_eq!(response.status, StatusCode::CREATED);
    assert_eq!(response.headers["location"], "/orders/42");
    assert_eq!(response.headers["idempotent-replayed"], "true");
    assert_eq!(&response.body[..], b"{\"id\":42}");
}

/// Records of the pre-release formats: the golden format 2 files, and a
/// format 1 record (which had no version field), are each refused with
/// `CodecError::Format` naming their format and the one this build
/// reads; the body never runs.
#[tokio::test]
async fn pre_release_records_are_refused() {
    let mut format_1 = vec![1, 0, 3];
    format_1.extend_from_slice(b"u64");
    format_1.extend_from_slice(b"42");
    let mut cases = vec![(1, "format 1".to_owned(), format_1)];
    for kind in ["ok_receipt.bin", "err_declined.bin", "not_stored.bin"] {
        let bytes = read_golden(&format!("format_2/{kind}"));
        cases.push((2, format!("format_2/{kind}"), bytes));
    }
    for (format, what, bytes) in cases {
        let out: Result<before_the_move::Receipt, Error> = seeded(bytes)
            .call("golden", "pre-release")
            .run(|| async { panic!("a pre-release record ran the body") })
            .await;
        let Err(Error::Codec(err @ CodecError::Format(found))) = out else {
            panic!("{what}: {out:?}")
        };
        assert_eq!(found, format, "{what}");
        let text = err.to_string();
        assert!(
            text.contains(&format!("format version {format}")) && text.contains("only format 3"),
            "{what}: {text}"
        );
    }
    // The format is read before the value's type is: any type will do.
    let http = idem::admin::decode_record::<serde::de::IgnoredAny>(&read_golden(
        "format_2/http_response.bin",
    ));
    assert!(
        matches!(http, Err(CodecError::Format(2))),
        "format_2/http_response.bin: {http:?}"
    );
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
        kept: idem::store::Retention,
    ) -> Result<Fence, StoreError> {
        *self.last.lock().unwrap() = record.to_vec();
        self.inner.complete(key, token, record, kept).await
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
    async fn forget(&self, key: &RecordKey) -> Result<(), StoreError> {
        self.inner.forget(key).await
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
    let _: Result<String, Error> = small
        .call("golden", "big")
        .run(|| async { Ok("x".repeat(1024)) })
        .await;
    write("not_stored.bin");
    let _: Result<Lossless, Error> = Idempotency::new(store.clone())
        .call("golden", "lossless")
        .run(|| async { Ok(lossless()) })
        .await;
    write("ok_lossless.bin");
    let _: Result<u64, Declined> = small
        .call("golden", "err-v3")
        .errors(idem::replay_errors())
        .run(|| async {
            Err(Declined::Card {
                reason: "$expired".into(),
            })
        })
        .await;
    write("err_declined.bin");

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
    let server = support::http::serve(router).await;
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
