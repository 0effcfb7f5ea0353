use std::collections::{BTreeMap, HashMap};
use std::fmt::Debug;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::{MAX_DEPTH, from_slice, to_writer};

fn encode<T: Serialize + ?Sized>(value: &T) -> String {
    let mut out = Vec::new();
    to_writer(&mut out, value).unwrap();
    String::from_utf8(out).unwrap()
}

/// Encodes, checks the JSON, decodes and compares.
#[track_caller]
fn exact<T: Serialize + DeserializeOwned + PartialEq + Debug>(value: T, json: &str) {
    let text = encode(&value);
    assert_eq!(text, json);
    serde_json::from_str::<serde_json::Value>(&text).expect("the record is JSON");
    assert_eq!(from_slice::<T>(text.as_bytes()).unwrap(), value, "{json}");
}

#[test]
fn nested_options_keep_every_level() {
    exact(None::<Option<u8>>, "null");
    exact(Some(None::<u8>), r#"{"$some":null}"#);
    exact(Some(Some(3u8)), "3");
    exact(Some(Some(None::<u8>)), r#"{"$some":{"$some":null}}"#);
    exact(
        Some(Some(Some(None::<u8>))),
        r#"{"$some":{"$some":{"$some":null}}}"#,
    );
    exact(Some(()), r#"{"$some":null}"#);
    exact(Some(Some(())), r#"{"$some":{"$some":null}}"#);
    exact(Some(String::new()), r#""""#);
    exact(
        vec![None, Some(None), Some(Some(1u8))],
        r#"[null,{"$some":null},1]"#,
    );
}

#[test]
fn non_finite_floats_keep_their_value() {
    exact(f64::INFINITY, r#"{"$f64":"Infinity"}"#);
    exact(f64::NEG_INFINITY, r#"{"$f64":"-Infinity"}"#);
    exact(f32::INFINITY, r#"{"$f32":"Infinity"}"#);
    exact(f32::NEG_INFINITY, r#"{"$f32":"-Infinity"}"#);
    exact(Some(f64::INFINITY), r#"{"$f64":"Infinity"}"#);
    exact(-0.0f64, "-0.0");
    exact(0.1f32, "0.1");
    exact(1.5f64, "1.5");
    assert_eq!(encode(&f64::NAN), r#"{"$f64":"NaN"}"#);
    assert!(
        from_slice::<f64>(encode(&f64::NAN).as_bytes())
            .unwrap()
            .is_nan()
    );
    assert_eq!(encode(&f32::NAN), r#"{"$f32":"NaN"}"#);
    assert!(
        from_slice::<f32>(encode(&f32::NAN).as_bytes())
            .unwrap()
            .is_nan()
    );
    let both: (Option<f64>, f32) =
        from_slice(encode(&(Some(f64::NAN), f32::NAN)).as_bytes()).unwrap();
    assert!(both.0.unwrap().is_nan() && both.1.is_nan());
}

#[test]
fn wide_integers_are_exact() {
    exact(
        u128::MAX,
        r#"{"$u128":"340282366920938463463374607431768211455"}"#,
    );
    exact(
        i128::MIN,
        r#"{"$i128":"-170141183460469231731687303715884105728"}"#,
    );
    exact(7u128, "7");
    exact(-7i128, "-7");
    exact(u64::MAX, "18446744073709551615");
}

#[test]
fn maps_with_keys_that_are_not_strings() {
    let mut tuples = BTreeMap::new();
    tuples.insert((1u32, 2u32), "a".to_owned());
    tuples.insert((3, 4), "b".to_owned());
    exact(tuples, r#"{"$map":[[[1,2],"a"],[[3,4],"b"]]}"#);
    let mut bytes = BTreeMap::new();
    bytes.insert(vec![0u8, 255], 1u8);
    exact(bytes, r#"{"$map":[[[0,255],1]]}"#);
    exact(BTreeMap::from([(1u64, true)]), r#"{"$map":[[1,true]]}"#);
    exact(BTreeMap::from([(false, 1u8)]), r#"{"$map":[[false,1]]}"#);
    exact(
        BTreeMap::from([(Some(1u8), 1u8), (None, 2)]),
        r#"{"$map":[[null,2],[1,1]]}"#,
    );
    let mut hashed = HashMap::new();
    hashed.insert((9u32, 9u32), vec![1u8]);
    exact(hashed, r#"{"$map":[[[9,9],[1]]]}"#);
    exact(BTreeMap::<u8, u8>::new(), "{}");
}

#[derive(Serialize, Deserialize, Debug, PartialEq, Eq, PartialOrd, Ord, Clone)]
enum Key {
    Plain,
    Pair(u8, u8),
}

#[test]
fn enum_keys_are_strings_while_they_can_be() {
    exact(BTreeMap::from([(Key::Plain, 1u8)]), r#"{"Plain":1}"#);
    exact(
        BTreeMap::from([(Key::Plain, 1u8), (Key::Pair(1, 2), 2)]),
        r#"{"$map":[["Plain",1],[{"Pair":[1,2]},2]]}"#,
    );
    exact(BTreeMap::from([('c', 1u8)]), r#"{"c":1}"#);
}

#[test]
fn user_keys_that_look_like_escapes_are_escaped() {
    let keys = BTreeMap::from([
        ("$some".to_owned(), 1u8),
        ("$f64".to_owned(), 2),
        ("$map".to_owned(), 3),
        ("$$x".to_owned(), 4),
        ("$".to_owned(), 5),
        ("x$".to_owned(), 6),
    ]);
    exact(
        keys,
        r#"{"$$":5,"$$$x":4,"$$f64":2,"$$map":3,"$$some":1,"x$":6}"#,
    );
    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Schema {
        #[serde(rename = "$ref")]
        reference: String,
    }
    exact(
        Schema {
            reference: "#/a".into(),
        },
        r##"{"$$ref":"#/a"}"##,
    );
    let value = serde_json::json!({"$some": null, "$f64": "NaN", "n": [1.5, null]});
    exact(value, r#"{"$$f64":"NaN","$$some":null,"n":[1.5,null]}"#);
}

#[derive(Serialize, Deserialize, Debug, PartialEq, Clone)]
#[serde(untagged)]
enum Untagged {
    Number(f64),
    Nested(Option<Option<u8>>),
    Keyed(BTreeMap<(u8, u8), String>),
    Text(String),
}

#[derive(Serialize, Deserialize, Debug, PartialEq, Clone)]
#[serde(tag = "type")]
enum Internal {
    Paid {
        amount: f64,
        patch: Option<Option<String>>,
    },
    Refunded,
}

#[derive(Serialize, Deserialize, Debug, PartialEq, Clone)]
#[serde(tag = "t", content = "c")]
enum Adjacent {
    Cleared(Option<Option<u8>>),
    Scaled(f32),
}

#[derive(Serialize, Deserialize, Debug, PartialEq, Clone)]
struct Flattened {
    id: u32,
    // First, so that the map gets only the keys the struct leaves.
    #[serde(flatten)]
    inner: Inner,
    #[serde(flatten)]
    extra: BTreeMap<String, Option<Option<u8>>>,
}

#[derive(Serialize, Deserialize, Debug, PartialEq, Clone)]
struct Inner {
    limit: f64,
    #[serde(rename = "$id")]
    dollar: u8,
}

#[test]
fn untagged_and_tagged_enums_go_through_deserialize_any() {
    exact(Untagged::Number(f64::INFINITY), r#"{"$f64":"Infinity"}"#);
    exact(Untagged::Number(1.5), "1.5");
    exact(Untagged::Text("x".into()), r#""x""#);
    exact(
        Untagged::Keyed(BTreeMap::from([((1, 2), "a".into())])),
        r#"{"$map":[[[1,2],"a"]]}"#,
    );
    exact(
        Internal::Paid {
            amount: f64::NEG_INFINITY,
            patch: Some(None),
        },
        r#"{"type":"Paid","amount":{"$f64":"-Infinity"},"patch":{"$some":null}}"#,
    );
    exact(Internal::Refunded, r#"{"type":"Refunded"}"#);
    exact(
        Adjacent::Cleared(Some(None)),
        r#"{"t":"Cleared","c":{"$some":null}}"#,
    );
    exact(
        Adjacent::Scaled(f32::INFINITY),
        r#"{"t":"Scaled","c":{"$f32":"Infinity"}}"#,
    );
    exact(
        Flattened {
            id: 1,
            inner: Inner {
                limit: f64::INFINITY,
                dollar: 3,
            },
            extra: BTreeMap::from([
                ("cleared".into(), Some(None)),
                ("set".into(), Some(Some(2))),
            ]),
        },
        r#"{"id":1,"limit":{"$f64":"Infinity"},"$$id":3,"cleared":{"$some":null},"set":2}"#,
    );
}

#[test]
fn a_nested_none_inside_an_untagged_enum_is_told_apart() {
    // Serde tries the variants in order over buffered content: the outer
    // `Some` must survive the buffering for `Nested(Some(None))` to come back.
    let text = encode(&Untagged::Nested(Some(None)));
    assert_eq!(text, r#"{"$some":null}"#);
    assert_eq!(
        from_slice::<Untagged>(text.as_bytes()).unwrap(),
        Untagged::Nested(Some(None))
    );
}

#[derive(Serialize, Deserialize, Debug, PartialEq, Clone)]
struct Everyday {
    unit: (),
    none: Option<u8>,
    zero: u64,
    no: bool,
    empty: Vec<String>,
    empty_map: BTreeMap<String, u8>,
    json: serde_json::Value,
    at: Timestamp,
    bytes: Vec<u8>,
    tuple: (u8, String),
    shape: Shape,
    negative: i32,
    ch: char,
}

#[derive(Serialize, Deserialize, Debug, PartialEq, Clone)]
#[serde(transparent)]
struct Timestamp(String);

#[derive(Serialize, Deserialize, Debug, PartialEq, Clone)]
enum Shape {
    Circle(u32),
    Square { side: u32 },
    Line(u8, u8),
    Empty,
}

#[test]
fn everyday_values_are_what_serde_json_writes() {
    let value = Everyday {
        unit: (),
        none: None,
        zero: 0,
        no: false,
        empty: vec![],
        empty_map: BTreeMap::new(),
        json: serde_json::json!({"a": [1, "b", null, {"c": true}]}),
        at: Timestamp("2026-11-24T00:00:00Z".into()),
        bytes: vec![0, 1, 255],
        tuple: (1, "t".into()),
        shape: Shape::Square { side: 2 },
        negative: -5,
        ch: 'é',
    };
    let plain = serde_json::to_string(&value).unwrap();
    exact(value, &plain);
    for shape in [Shape::Circle(1), Shape::Line(1, 2), Shape::Empty] {
        let plain = serde_json::to_string(&shape).unwrap();
        exact(shape, &plain);
    }
    exact((), "null");
    exact(0u8, "0");
    exact(false, "false");
    exact(Vec::<u8>::new(), "[]");
    exact(serde_json::Value::Null, "null");
    exact(Some(serde_json::Value::Null), r#"{"$some":null}"#);
}

#[test]
fn a_changed_shape_is_an_error() {
    let text = encode(&Some(None::<u8>));
    assert!(from_slice::<u8>(text.as_bytes()).is_err());
    assert!(from_slice::<Option<u8>>(text.as_bytes()).is_err());
    assert!(from_slice::<String>(encode(&f64::NAN).as_bytes()).is_err());
    assert!(from_slice::<u32>(encode(&u128::MAX).as_bytes()).is_err());
    assert!(
        from_slice::<BTreeMap<String, u8>>(encode(&BTreeMap::from([(1u8, 1u8)])).as_bytes())
            .is_err()
    );
    assert!(from_slice::<Shape>(br#"{"Circle":1,"Empty":null}"#).is_err());
    assert!(from_slice::<Shape>(b"3").is_err());
    assert!(from_slice::<(u8, u8)>(b"[1,2,3]").is_err());
}

#[test]
fn malformed_escapes_are_errors() {
    for text in [
        r#"{"$f64":"nan"}"#,
        r#"{"$f64":1}"#,
        r#"{"$some":1,"x":2}"#,
        r#"{"$other":1}"#,
        r#"{"a":1,"$b":2}"#,
        r#"{"$u128":"x"}"#,
        r#"{"$map":[[1]]}"#,
        r#"{"$map":[[1,2,3]]}"#,
        r#"{"$map":1}"#,
        "[1,",
        "1 2",
    ] {
        assert!(
            from_slice::<serde_json::Value>(text.as_bytes()).is_err(),
            "{text}"
        );
        assert!(from_slice::<Untagged>(text.as_bytes()).is_err(), "{text}");
    }
}

/// A `Serialize` that fails: encoding reports it instead of writing
/// something else.
struct Refuses;

impl Serialize for Refuses {
    fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
        Err(serde::ser::Error::custom("refused"))
    }
}

#[test]
fn a_failing_serialize_is_an_error() {
    let err = to_writer(&mut Vec::new(), &Some(vec![Refuses])).unwrap_err();
    assert!(
        matches!(&err, super::EncodeError::Json(e) if e.to_string().contains("refused")),
        "{err:?}"
    );
}

#[test]
fn serde_json_raw_values_come_back() {
    use serde_json::value::RawValue;
    let raw = RawValue::from_string(r#"{"a": [1, null]}"#.to_owned()).unwrap();
    let text = encode(&raw);
    assert_eq!(
        text,
        r#"{"$$serde_json::private::RawValue":"{\"a\": [1, null]}"}"#
    );
    let back: Box<RawValue> = from_slice(text.as_bytes()).unwrap();
    assert_eq!(back.get(), raw.get());
}

/// Text without escapes is read by serde_json directly; with one, through
/// the tree: both read the same value the same way.
#[test]
fn both_decoding_paths_agree() {
    let everyday = Shape::Square { side: 2 };
    let plain = encode(&everyday);
    assert!(!plain.contains('$'));
    let mut escaped = encode(&(everyday.clone(), "$"));
    assert!(escaped.contains('$'));
    assert_eq!(from_slice::<Shape>(plain.as_bytes()).unwrap(), everyday);
    assert_eq!(
        from_slice::<(Shape, String)>(escaped.as_bytes()).unwrap(),
        (everyday, "$".to_owned())
    );
    escaped.truncate(escaped.len() - 1);
    assert!(from_slice::<(Shape, String)>(escaped.as_bytes()).is_err());
    assert!(from_slice::<Shape>(&plain.as_bytes()[..plain.len() - 1]).is_err());
}

#[test]
fn dollars_are_found_anywhere() {
    for len in 0..40 {
        let plain = vec![b'7'; len];
        assert!(!super::read::has_dollar(&plain), "{len}");
        for at in 0..len {
            let mut marked = plain.clone();
            marked[at] = b'$';
            assert!(super::read::has_dollar(&marked), "{len} {at}");
        }
    }
    // Bytes next to `$` (0x24) and with the high bit set are not `$`.
    assert!(!super::read::has_dollar(&[
        0xA4, 0x23, 0x25, 0xFF, 0, 1, 0x25, 0xA4, 9
    ]));
}

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Tree {
    kids: BTreeMap<u32, Tree>,
}

/// A tree `levels` deep, one child a level: its JSON nests four levels a
/// level (the struct, `$map`, the pairs, a pair) and one more at the end.
fn tree(levels: usize) -> Tree {
    (0..levels).fold(
        Tree {
            kids: BTreeMap::new(),
        },
        |kid, n| Tree {
            kids: BTreeMap::from([(n as u32, kid)]),
        },
    )
}

#[test]
fn deep_values_with_integer_keys_replay() {
    // 31 levels nest 125 deep, 32 levels 129: past serde_json's 128.
    for levels in [31, 32, 40, (MAX_DEPTH - 2) / 4] {
        let text = encode(&tree(levels));
        assert_eq!(super::read::nesting(text.as_bytes()), 4 * levels + 2);
        assert_eq!(from_slice::<Tree>(text.as_bytes()).unwrap(), tree(levels));
    }
    // Deep without a `$` (serde_json's own text) reads too.
    let deep = (0..200).fold(serde_json::json!(1), |v, _| serde_json::json!([v]));
    let text = encode(&deep);
    assert_eq!(
        from_slice::<serde_json::Value>(text.as_bytes()).unwrap(),
        deep
    );
}

#[test]
fn values_too_deep_to_read_back_are_refused_before_they_are_written() {
    let mut out = Vec::new();
    let err = to_writer(&mut out, &tree(MAX_DEPTH / 4)).unwrap_err();
    assert!(
        matches!(err, super::EncodeError::TooDeep(d) if d == MAX_DEPTH + 2),
        "{err:?}"
    );
    assert!(out.is_empty(), "nothing is written");
}

#[test]
fn records_deeper_than_the_limit_are_errors_not_overflows() {
    for open in ["[", "{\"$some\":"] {
        let text = open.repeat(1_000_000);
        let err = from_slice::<serde_json::Value>(text.as_bytes()).unwrap_err();
        assert!(err.to_string().contains("levels deep"), "{err}");
    }
    // Brackets inside strings are not nesting.
    let text = format!("[{:?}]", "[[{{".repeat(200));
    assert_eq!(super::read::nesting(text.as_bytes()), 1);
    let quoted = r#"["\"[", "\\"]"#;
    assert_eq!(super::read::nesting(quoted.as_bytes()), 1);
}

/// The deepest record reads in half of a tokio worker's 2 MiB stack, in
/// the build the tests run (debug: the largest frames).
#[test]
fn the_deepest_record_reads_on_a_worker_stack() {
    let levels = (MAX_DEPTH - 2) / 4;
    let text = encode(&tree(levels));
    let read = std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(move || from_slice::<Tree>(text.as_bytes()).map(|t| t == tree(levels)))
        .unwrap()
        .join()
        .expect("no stack overflow");
    assert!(read.unwrap());
    let values = (0..MAX_DEPTH - 1).fold(serde_json::json!({"$some": 1}), |v, _| {
        serde_json::json!([v])
    });
    let text = encode(&values);
    assert_eq!(super::read::nesting(text.as_bytes()), MAX_DEPTH);
    let read = std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(move || from_slice::<serde_json::Value>(text.as_bytes()).map(|v| v == values))
        .unwrap()
        .join()
        .expect("no stack overflow");
    assert!(read.unwrap());
}

#[test]
fn every_nan_keeps_its_sign_and_bits() {
    let payload = f64::from_bits(0x7ff0_0000_0000_0001);
    for (x, json) in [
        (f64::NAN, r#"{"$f64":"NaN"}"#),
        (-f64::NAN, r#"{"$f64":"-NaN"}"#),
        (payload, r#"{"$f64":"NaN:7ff0000000000001"}"#),
        (-payload, r#"{"$f64":"NaN:fff0000000000001"}"#),
    ] {
        assert_eq!(encode(&x), json);
        let back: f64 = from_slice(json.as_bytes()).unwrap();
        assert_eq!(back.to_bits(), x.to_bits(), "{json}");
    }
    let payload = f32::from_bits(0x7fc0_0001);
    for (x, json) in [
        (f32::NAN, r#"{"$f32":"NaN"}"#),
        (-f32::NAN, r#"{"$f32":"-NaN"}"#),
        (-payload, r#"{"$f32":"NaN:ffc00001"}"#),
    ] {
        assert_eq!(encode(&x), json);
        let back: f32 = from_slice(json.as_bytes()).unwrap();
        assert_eq!(back.to_bits(), x.to_bits(), "{json}");
    }
    // Through `deserialize_any` (an untagged enum) as well.
    #[derive(Debug, Serialize, Deserialize)]
    #[serde(untagged)]
    enum Reading {
        Value(f64),
    }
    let Reading::Value(back) = from_slice(encode(&Reading::Value(-f64::NAN)).as_bytes()).unwrap();
    assert_eq!(back.to_bits(), (-f64::NAN).to_bits());
    // Not a NaN's bits, or not a float's width: refused, never misread.
    for bad in [
        r#"{"$f64":"NaN:3ff0000000000000"}"#,
        r#"{"$f64":"NaN:zz"}"#,
        r#"{"$f32":"NaN:7ff0000000000001"}"#,
    ] {
        assert!(from_slice::<f64>(bad.as_bytes()).is_err(), "{bad}");
    }
}
