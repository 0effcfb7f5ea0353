//! The record decoder on arbitrary bytes: a value or a `CodecError`,
//! never a panic.
#![no_main]

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| {
    let _ = idem::__private::fuzz_record(bytes);
});
