//! The chaos test of recovery points (`examples/order_steps.rs`): a worker
//! process is SIGKILLed six times, mid-step or between steps, over 300
//! orders on a SQLite file. Every finished step's effect happened exactly
//! once; a step in flight at a kill ran once more (per kill it was in
//! flight at, never twice in one worker), with the same child key; every
//! order replays.

#[allow(dead_code)]
#[path = "../../examples/order_steps.rs"]
mod order_steps;

use crate::support::test_name;
use std::process::Command;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkilled_workers_resume_orders_without_repeating_finished_steps() {
    let dir = std::env::temp_dir().join(format!(
        "idem-steps-chaos-{}-{:x}",
        std::process::id(),
        idem::store::Token::random().to_u128() as u32
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let exe = std::env::current_exe().unwrap();
    let report = order_steps::chaos(&dir, 300, 6, |spec| {
        let mut command = Command::new(&exe);
        command
            .args([
                test_name(module_path!(), "chaos_worker").as_str(),
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(order_steps::WORKER_ENV, spec);
        command
    })
    .await
    .unwrap_or_else(|err| panic!("{err}"));
    println!("{report:#?}");
    assert_eq!(report.steps, 900);
    assert_eq!(
        report.steps_run_once + report.steps_run_twice + report.steps_run_more,
        900
    );
    // A step runs once more per kill it was in flight at, at most.
    assert!(report.effects <= 900 + 6 * 4, "{report:?}");
    // The kills landed while steps ran (a 4 ms answer after each effect),
    // so some steps ran twice; the test's point is that none ran more.
    assert!(report.kills_mid_step >= 1, "{report:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Not a test of its own: the entry point of the chaos test's worker
/// processes (a no-op unless `IDEM_ORDER_STEPS_WORKER` is set).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_worker() {
    order_steps::worker_from_env().await;
}
