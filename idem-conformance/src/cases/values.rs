//! Values: every `Ok` value replays as itself, including the ones plain
//! JSON cannot carry.

use std::collections::{BTreeMap, HashMap};

use idem::{Error, Idempotency};
use serde::{Deserialize, Serialize};

use crate::support::{Receipt, Shape, scope, twice, twice_checked};

/// Every `Ok` value, empty and zero ones included, is stored once and
/// replayed as itself; a replay is reported as one.
pub async fn replays_every_ok_value(idem: Idempotency) {
    twice(&idem, "unit", ()).await;
    twice(&idem, "none", None::<u32>).await;
    twice(&idem, "zero", 0u64).await;
    twice(&idem, "false", false).await;
    twice(&idem, "empty-vec", Vec::<String>::new()).await;
    twice(&idem, "empty-string", String::new()).await;
    twice(
        &idem,
        "struct",
        Receipt {
            id: 7,
            note: "paid".into(),
        },
    )
    .await;
    twice(&idem, "enum-unit", Shape::Empty).await;
    twice(&idem, "enum-struct", Shape::Square { side: 3 }).await;
    twice(&idem, "enum-tuple", Shape::Circle(0)).await;

    // A replay is reported as one.
    let scope = scope("reported");
    let first = idem
        .call(&scope, "k")
        .run_reported(|| async { Ok::<_, Error>(1u8) })
        .await;
    let again = idem
        .call(&scope, "k")
        .run_reported(|| async { Ok::<_, Error>(2u8) })
        .await;
    assert_eq!((first.result.unwrap(), first.replayed), (1, false));
    assert_eq!((again.result.unwrap(), again.replayed), (1, true));
}

/// A PATCH body: absent, cleared (`Some(None)`) or set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Patch {
    pub(crate) email: Option<Option<String>>,
    pub(crate) nick: Option<Option<String>>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(crate) struct Floats {
    pub(crate) a: f64,
    pub(crate) b: f32,
    pub(crate) c: Option<f64>,
}

/// Equal, NaN included (NaN is compared with `is_nan`).
fn floats_match(x: &[f64], y: &[f64]) -> bool {
    x.len() == y.len()
        && x.iter()
            .zip(y)
            .all(|(p, q)| (p.is_nan() && q.is_nan()) || p.to_bits() == q.to_bits())
}

fn floats(v: &Floats) -> Vec<f64> {
    vec![v.a, f64::from(v.b), v.c.unwrap_or(0.5)]
}

/// A struct holding an integer-keyed map of itself: each level nests its
/// record's JSON four deep (`$map`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Tree {
    pub(crate) kids: BTreeMap<u32, Tree>,
}

/// A tree `levels` deep.
pub(crate) fn tree(levels: usize) -> Tree {
    (0..levels).fold(
        Tree {
            kids: BTreeMap::new(),
        },
        |kid, n| Tree {
            kids: BTreeMap::from([(n as u32, kid)]),
        },
    )
}

/// The same float, bit for bit (a NaN's sign and payload included).
fn same_bits(x: &f64, y: &f64) -> bool {
    x.to_bits() == y.to_bits()
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub(crate) enum Slot {
    Morning,
    At(u8, u8),
}

/// Values plain JSON loses (nested `Option`s, NaN and infinities,
/// `u128`, maps with non-string keys, `$`-prefixed keys) replay as
/// themselves; a changed shape is refused, never misread.
pub async fn replays_values_json_cannot_carry(idem: Idempotency) {
    twice(&idem, "some-none", Some(None::<u32>)).await;
    twice(&idem, "some-some-none", Some(Some(None::<u32>))).await;
    twice(&idem, "some-some-one", Some(Some(1u32))).await;
    twice(&idem, "some-unit", Some(())).await;
    twice(
        &idem,
        "patch",
        Patch {
            email: Some(None),
            nick: None,
        },
    )
    .await;
    for (case, a, b) in [
        ("nan", f64::NAN, f32::NAN),
        ("inf", f64::INFINITY, f32::INFINITY),
        ("-inf", f64::NEG_INFINITY, f32::NEG_INFINITY),
    ] {
        let value = Floats { a, b, c: Some(a) };
        twice_checked(&idem, case, value, |x, y| {
            floats_match(&floats(x), &floats(y))
        })
        .await;
    }
    twice_checked(&idem, "nan-f64", f64::NAN, |x, _| x.is_nan()).await;
    twice_checked(&idem, "nan-f32", f32::NAN, |x, _| x.is_nan()).await;
    // A NaN's sign bit and payload replay too.
    twice_checked(&idem, "-nan", -f64::NAN, same_bits).await;
    let payload = f64::from_bits(0xfff0_0000_0000_0001);
    twice_checked(&idem, "nan-payload", payload, same_bits).await;
    twice_checked(&idem, "-nan-f32", -f32::NAN, |x, y| {
        x.to_bits() == y.to_bits()
    })
    .await;
    // Deep values with integer keys: past serde_json's 128 nested levels.
    twice(&idem, "deep-int-keys", tree(40)).await;
    twice(&idem, "u128", u128::MAX).await;

    let tuples: HashMap<(u32, u32), String> =
        HashMap::from([((1, 2), "a".into()), ((3, 4), "b".into())]);
    twice(&idem, "tuple-keys", tuples).await;
    let bytes: BTreeMap<Vec<u8>, u32> = BTreeMap::from([(vec![0, 255], 1), (vec![], 2)]);
    twice(&idem, "byte-keys", bytes).await;
    let slots = BTreeMap::from([(Slot::Morning, 1u8), (Slot::At(9, 30), 2)]);
    twice(&idem, "enum-keys", slots).await;
    twice(&idem, "int-keys", HashMap::from([(7u64, true), (0, false)])).await;
    let dollars: HashMap<String, u8> = ["$some", "$f64", "$map", "$$x", "$", "plain"]
        .into_iter()
        .zip(1..)
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
    twice(&idem, "dollar-keys", dollars).await;

    // A changed shape is still refused, never misread.
    let scope = scope("escaped-shape");
    let first: Result<Option<Option<u8>>, Error> = idem
        .call(&scope, "k")
        .run(|| async { Ok(Some(None)) })
        .await;
    assert_eq!(first.unwrap(), Some(None));
    let changed: Result<Option<u8>, Error> = idem
        .call(&scope, "k")
        .run(|| async { panic!("must not re-run") })
        .await;
    assert!(
        matches!(
            changed,
            Err(Error::Codec(idem::CodecError::ShapeChanged { .. }))
        ),
        "{changed:?}"
    );
}
