//! The random corpus: proptest draws sequences of [`Op`]s from a fixed
//! seed, runs each on a fresh case, and on a failure shrinks it and
//! prints the minimal sequence as a regression test to paste.

use std::sync::atomic::AtomicUsize;

use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};
use proptest_state_machine::ReferenceStateMachine;

use super::ops::{Op, Sequences};
use super::sut::{self, Backend};

/// The seed of the default corpus; `IDEM_MODEL_SEED` overrides it.
const SEED: u64 = 45;

/// Runs `cases` sequences (`IDEM_MODEL_CASES` overrides) on `backend`;
/// panics with the minimal failing sequence, as a test to paste.
pub(crate) fn explore(backend: Backend, cases: u32, max_ops: usize) {
    let cases = env_or("IDEM_MODEL_CASES", u64::from(cases)) as u32;
    let seed = env_or("IDEM_MODEL_SEED", SEED);
    let mut runner = runner(cases, seed, backend);
    let strategy = Sequences::sequential_strategy(1..=max_ops);
    let outcome = runner.run(&strategy, |(_, ops, applied)| {
        let applied = applied.unwrap_or_default();
        one_case(backend, &ops, &applied).map_err(TestCaseError::fail)
    });
    match outcome {
        Ok(()) => {}
        Err(TestError::Fail(why, (_, ops, _))) => {
            panic!("seed {seed}: {why}\n\n{}", regression(backend, &ops))
        }
        Err(TestError::Abort(why)) => panic!("seed {seed}: aborted: {why}"),
    }
}

/// A deterministic runner: the seed alone decides the sequences; nothing
/// is persisted, so CI runs the same corpus every time.
fn runner(cases: u32, seed: u64, backend: Backend) -> TestRunner {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let config = Config {
        cases,
        failure_persistence: None,
        // Real time makes each SQLite case cost its advances.
        max_shrink_iters: match backend {
            Backend::Memory => 4096,
            _ => 400,
        },
        ..Config::default()
    };
    TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &bytes))
}

/// Runs one sequence on its own runtime: paused for MemoryStore, real
/// time for SQLite.
pub(crate) fn one_case(backend: Backend, ops: &[Op], applied: &AtomicUsize) -> Result<(), String> {
    let mut builder = tokio::runtime::Builder::new_current_thread();
    builder.enable_all();
    if backend == Backend::Memory {
        builder.start_paused(true);
    }
    let runtime = builder.build().expect("runtime");
    runtime.block_on(sut::run(backend, ops, applied))
}

/// `ops` as a `#[tokio::test]` for the `regressions` module.
pub(crate) fn regression(backend: Backend, ops: &[Op]) -> String {
    let paused = match backend {
        Backend::Memory => "(start_paused = true)",
        _ => "",
    };
    format!(
        "#[tokio::test{paused}]\nasync fn name_the_defect() {{\n    check(Backend::{backend:?}, vec!{ops:?}).await;\n}}\n"
    )
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
