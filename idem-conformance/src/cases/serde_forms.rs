//! Every serde form (tagged enums, flattening, text and bytes) replays as
//! itself, and a value that cannot be encoded settles its key.

use std::collections::{BTreeMap, HashMap};

use idem::{CodecError, Error, Idempotency};
use serde::{Deserialize, Serialize};

use super::values::{Slot, tree};
use crate::support::{Counter, scope, twice};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub(crate) enum Untagged {
    Amount(f64),
    Cleared(Option<Option<u8>>),
    Text(String),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind")]
pub(crate) enum Internal {
    Paid {
        cents: u64,
        note: Option<Option<String>>,
    },
    Voided,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "t", content = "c")]
pub(crate) enum Adjacent {
    Cleared(Option<Option<u8>>),
    Keys(BTreeMap<Slot, u8>),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Envelope {
    pub(crate) id: u32,
    #[serde(flatten)]
    pub(crate) meta: Meta,
    #[serde(flatten)]
    pub(crate) rest: BTreeMap<String, serde_json::Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Meta {
    #[serde(rename = "$schema")]
    pub(crate) schema: String,
    pub(crate) cleared: Option<Option<u8>>,
}

/// Written and read as text through `collect_str` and `deserialize_str`,
/// the way `chrono` and `uuid` types are.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Stamp(u64);

impl Serialize for Stamp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&format_args!("T{}", self.0))
    }
}

impl<'de> Deserialize<'de> for Stamp {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Text;
        impl serde::de::Visitor<'_> for Text {
            type Value = Stamp;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("T<number>")
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Stamp, E> {
                text.strip_prefix('T')
                    .and_then(|n| n.parse().ok())
                    .map(Stamp)
                    .ok_or_else(|| E::custom("not a stamp"))
            }
        }
        d.deserialize_str(Text)
    }
}

/// Bytes through `serialize_bytes`, as `serde_bytes` writes them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Blob(Vec<u8>);

impl Serialize for Blob {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.0)
    }
}

impl<'de> Deserialize<'de> for Blob {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Bytes;
        impl<'de> serde::de::Visitor<'de> for Bytes {
            type Value = Blob;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("bytes")
            }
            fn visit_bytes<E>(self, bytes: &[u8]) -> Result<Blob, E> {
                Ok(Blob(bytes.to_vec()))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Blob, A::Error> {
                let mut out = Vec::new();
                while let Some(b) = seq.next_element()? {
                    out.push(b);
                }
                Ok(Blob(out))
            }
        }
        d.deserialize_bytes(Bytes)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Everyday {
    pub(crate) unit: (),
    pub(crate) none: Option<u8>,
    pub(crate) zero: i64,
    pub(crate) no: bool,
    pub(crate) empty: Vec<u8>,
    pub(crate) empty_map: HashMap<String, u8>,
    pub(crate) json: serde_json::Value,
    pub(crate) at: Stamp,
    pub(crate) bytes: Vec<u8>,
    pub(crate) blob: Blob,
}

/// Untagged, internally and adjacently tagged enums, flattened maps, text
/// and byte forms replay as themselves.
pub async fn replays_every_serde_form(idem: Idempotency) {
    for (case, value) in [
        ("untagged-amount", Untagged::Amount(f64::INFINITY)),
        ("untagged-cleared", Untagged::Cleared(Some(None))),
        ("untagged-none", Untagged::Cleared(None)),
        ("untagged-text", Untagged::Text("$some".into())),
    ] {
        twice(&idem, case, value).await;
    }
    for (case, value) in [
        (
            "internal-paid",
            Internal::Paid {
                cents: 0,
                note: Some(None),
            },
        ),
        ("internal-voided", Internal::Voided),
    ] {
        twice(&idem, case, value).await;
    }
    twice(&idem, "adjacent-cleared", Adjacent::Cleared(Some(None))).await;
    let keys = BTreeMap::from([(Slot::At(1, 2), 3)]);
    twice(&idem, "adjacent-keys", Adjacent::Keys(keys)).await;
    let envelope = Envelope {
        id: 1,
        meta: Meta {
            schema: "v1".into(),
            cleared: Some(None),
        },
        rest: [
            ("$ref".to_owned(), serde_json::json!("#/x")),
            ("n".to_owned(), serde_json::json!([1.5, null, {"$map": 1}])),
        ]
        .into(),
    };
    twice(&idem, "flatten", envelope).await;
    let everyday = Everyday {
        unit: (),
        none: None,
        zero: 0,
        no: false,
        empty: vec![],
        empty_map: Default::default(),
        json: serde_json::json!({"a": [1, "b", null, {"$some": true}]}),
        at: Stamp(1_764_000_000),
        bytes: vec![0, 1, 255],
        blob: Blob(vec![7, 0, 255]),
    };
    twice(&idem, "everyday", everyday).await;
}

/// A value whose `Serialize` fails (a map with a key it refuses, a broken
/// hand-written impl), after the body ran.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(crate) struct Unencodable(pub(crate) u8);

impl Serialize for Unencodable {
    fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
        Err(serde::ser::Error::custom(
            "this value refuses to be encoded",
        ))
    }
}

/// A `u128` inside an untagged enum: serde buffers it through a form
/// without 128-bit integers, so it would never replay, whatever its value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub(crate) enum Wide {
    Amount { cents: u128 },
}

/// An `i128` inside a flattened struct.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Flat {
    #[serde(flatten)]
    pub(crate) inner: Ledger,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Ledger {
    pub(crate) balance: i128,
}

/// The body ran and its value cannot be stored, or could be but would not
/// replay (nested deeper than a record is read back, a wide integer where
/// serde buffers): the caller gets the value, the key is settled, and
/// duplicates are told why instead of running the body again.
pub async fn unencodable_value_settles_the_key(idem: Idempotency) {
    settles(
        &idem,
        "unencodable",
        Unencodable(7),
        "refuses to be encoded",
    )
    .await;
    settles(&idem, "too-deep", tree(64), "levels deep").await;
    for (case, cents) in [("untagged-u128", u128::MAX), ("untagged-small-u128", 7)] {
        settles(&idem, case, Wide::Amount { cents }, "would not replay").await;
    }
    for (case, balance) in [("flatten-i128", i128::MIN), ("flatten-small-i128", -7)] {
        let flat = Flat {
            inner: Ledger { balance },
        };
        settles(&idem, case, flat, "would not replay").await;
    }
    // Outside such forms they replay, and so do deep trees that fit.
    twice(&idem, "plain-i128", Ledger { balance: i128::MIN }).await;
    twice(&idem, "deepest-tree", tree(63)).await;
}

/// `value` is returned to its caller and settles the key: each duplicate
/// gets `NotStored` naming `why`, and the body ran once.
async fn settles<T>(idem: &Idempotency, case: &str, value: T, why: &str)
where
    T: Serialize + serde::de::DeserializeOwned + Clone + PartialEq + std::fmt::Debug + Send,
{
    let scope = scope(case);
    let runs = Counter::default();
    let body = || async {
        runs.bump();
        Ok::<_, Error>(value.clone())
    };
    let first = idem.call(&scope, "k").run(body).await;
    assert_eq!(first.unwrap(), value, "{case}");
    for _ in 0..2 {
        let retry = idem.call(&scope, "k").run(body).await;
        assert!(
            matches!(retry, Err(Error::Codec(CodecError::NotStored(ref reason))) if reason.contains(why)),
            "{case}: {retry:?}"
        );
    }
    assert_eq!(runs.get(), 1, "{case}: the body ran once");
}
