//! Compile-time checks of `#[idempotent]` (trybuild). Each file under
//! `tests/ui/fail` is one misuse with its expected message in a `.stderr`
//! snapshot; each file under `tests/ui/pass` is a supported form that must
//! compile and run. Regenerate snapshots with
//! `TRYBUILD=overwrite cargo test -p idem-ui-tests` and read the diff.

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.pass("tests/ui/pass/*.rs");
    cases.compile_fail("tests/ui/fail/*.rs");
}
