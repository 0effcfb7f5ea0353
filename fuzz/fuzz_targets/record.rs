//! The record decoder on arbitrary bytes: a value or a `CodecError`,
//! never a panic.
#![no_main]

/// Nested options, floats and non-string keys take other paths through
/// the format's escapes than `deserialize_any`.
type Typed = Vec<(
    Option<Option<f64>>,
    std::collections::BTreeMap<(u8, String), Option<f32>>,
    u128,
)>;

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| {
    let _ = idem::admin::decode_record_json(bytes);
    let _ = idem::admin::decode_record::<Typed>(bytes);
});
