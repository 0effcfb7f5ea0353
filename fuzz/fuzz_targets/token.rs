//! The token parser and the `If-Match` parser on arbitrary bytes: a
//! refusal, never a panic, and never a token accepted that the issuer did
//! not make.
#![no_main]

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| {
    // The first byte splits the input into a token and a principal.
    let split = bytes
        .first()
        .map_or(0, |&b| usize::from(b))
        .min(bytes.len());
    let (token, principal) = bytes.split_at(split);
    assert!(idem::http::fuzz_token(token, principal).is_err());
    let _ = idem::http::fuzz_if_match(bytes);
});
