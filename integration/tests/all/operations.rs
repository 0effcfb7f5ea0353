//! Operating a handle: the per-call span, `Idempotency::disabled()` and
//! `Idempotency::forget` (the conformance suite runs `forget` on every
//! store; here, its interplay with a running body).

use crate::support::captured;

use captured::Captured;
use tracing_subscriber::fmt::format::FmtSpan;

use idem::key::RecordKey;
use idem::{Error, Idempotency, MemoryStore};

const RAW_KEY: &str = "secret-customer-key-4242";

/// A subscriber for this thread that writes to `captured`, with a line
/// when each span closes (carrying the fields recorded by then).
fn capture(captured: &Captured) -> tracing::subscriber::DefaultGuard {
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_writer(captured.clone())
        .with_ansi(false)
        .with_span_events(FmtSpan::CLOSE)
        .finish();
    tracing::subscriber::set_default(subscriber)
}

#[tokio::test]
async fn each_call_has_a_span_with_scope_short_key_outcome_and_replayed() {
    let captured = Captured::default();
    let _guard = capture(&captured);
    let idem = Idempotency::new(MemoryStore::new());
    let call = || idem.call("billing", RAW_KEY).fingerprint(&1);
    let _: Result<u8, Error> = call().run(|| async { Ok(1) }).await;
    let again = call().run_reported(|| async { Ok::<u8, Error>(2) }).await;
    assert!(again.replayed);
    let mismatch: Result<u8, Error> = idem
        .call("billing", RAW_KEY)
        .fingerprint(&2)
        .run(|| async { Ok(2) })
        .await;
    assert!(matches!(mismatch, Err(Error::FingerprintMismatch { .. })));

    let log = captured.text();
    let short = RecordKey::new("billing", RAW_KEY).short().to_string();
    let span = format!("idem.call{{scope=billing key={short}");
    // The runtime's events sit inside the span.
    for event in [
        "idem: claimed",
        "idem: replayed",
        "idem: fingerprint mismatch",
    ] {
        let line = log
            .lines()
            .find(|line| line.contains(event))
            .unwrap_or_else(|| panic!("no `{event}` in:\n{log}"));
        assert!(line.contains(&span), "not inside the span: {line}");
    }
    // Each span closes with its outcome.
    let closes: Vec<&str> = log.lines().filter(|l| l.contains("close")).collect();
    assert_eq!(closes.len(), 3, "{log}");
    for (line, outcome, replayed) in [
        (closes[0], "ran", false),
        (closes[1], "replayed", true),
        (closes[2], "mismatch", false),
    ] {
        assert!(line.contains(&span), "{line}");
        assert!(line.contains(&format!("outcome={outcome}")), "{line}");
        assert!(line.contains(&format!("replayed={replayed}")), "{line}");
    }
    assert!(!log.contains(RAW_KEY), "the raw key leaked:\n{log}");
}

#[tokio::test]
async fn a_disabled_handle_runs_every_body_and_says_so_once() {
    let captured = Captured::default();
    let _guard = capture(&captured);
    let idem = Idempotency::disabled();
    let mut seen = Vec::new();
    for i in 0..3u8 {
        let out: Result<u8, Error> = idem.call("demo", "same-key").run(|| async { Ok(i) }).await;
        seen.push(out.unwrap());
    }
    // Every body ran, even for the same key: nothing was stored.
    assert_eq!(seen, [0, 1, 2]);
    let clone = idem.clone();
    let _: Result<u8, Error> = clone.call("demo", "k").run(|| async { Ok(9) }).await;
    idem.forget("demo", "same-key").await.unwrap();

    let log = captured.text();
    let said = log.matches("this handle is disabled").count();
    assert_eq!(said, 1, "once per handle, not per call:\n{log}");

    // Another disabled handle says it again, once.
    let other = Idempotency::disabled();
    let _: Result<u8, Error> = other.call("demo", "k").run(|| async { Ok(1) }).await;
    let _: Result<u8, Error> = other.call("demo", "k").run(|| async { Ok(1) }).await;
    assert_eq!(
        captured.text().matches("this handle is disabled").count(),
        2
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forgetting_a_running_claim_fences_out_its_completion() {
    let idem = Idempotency::new(MemoryStore::new());
    let (started_tx, started) = tokio::sync::oneshot::channel();
    let (finish, finish_rx) = tokio::sync::oneshot::channel::<()>();
    let holder = {
        let idem = idem.clone();
        tokio::spawn(async move {
            idem.call("ops", "stuck")
                .run(|| async move {
                    started_tx.send(()).unwrap();
                    finish_rx.await.unwrap();
                    Ok::<_, Error>(1u8)
                })
                .await
        })
    };
    started.await.unwrap();
    let busy: Result<u8, Error> = idem.call("ops", "stuck").run(|| async { Ok(0) }).await;
    assert!(matches!(busy, Err(Error::InProgress { .. })));
    idem.forget("ops", "stuck").await.unwrap();
    let rerun: Result<u8, Error> = idem.call("ops", "stuck").run(|| async { Ok(2) }).await;
    assert_eq!(rerun.unwrap(), 2, "the forgotten key ran again");
    finish.send(()).unwrap();
    assert!(matches!(
        holder.await.unwrap(),
        Err(Error::LeaseLost { .. })
    ));
    let stored: Result<u8, Error> = idem.call("ops", "stuck").run(|| async { Ok(3) }).await;
    assert_eq!(stored.unwrap(), 2, "the rerun's value stands");
}
