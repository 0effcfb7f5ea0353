//! The HTTP layer's stored-response decoder on arbitrary bytes: a replayed
//! response or a `CodecError`, never a panic.
#![no_main]

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| {
    let _ = idem::http::fuzz_stored_response(bytes);
});
