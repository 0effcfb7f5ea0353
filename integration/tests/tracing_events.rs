//! The runtime's tracing events: claimed, replayed, in progress, mismatch
//! and lease lost, each with the scope and a short key hash, never the raw
//! key.

#[path = "all/support/captured.rs"]
mod captured;

use captured::Captured;
use std::time::Duration;

use idem::key::RecordKey;
use idem::{Error, Idempotency, MemoryStore};

const RAW_KEY: &str = "secret-customer-key-4242";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_carry_scope_and_short_key_never_the_raw_key() {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_writer(captured.clone())
        .with_ansi(false)
        .finish();
    // Global: the holder below runs on another worker thread.
    tracing::subscriber::set_global_default(subscriber).unwrap();

    let idem = Idempotency::new(MemoryStore::new());
    let call = || idem.call("billing", RAW_KEY).fingerprint(&1);
    let _: Result<u8, Error> = call().run(|| async { Ok(1) }).await;
    let _: Result<u8, Error> = call().run(|| async { Ok(1) }).await;
    let mismatch: Result<u8, Error> = idem
        .call("billing", RAW_KEY)
        .fingerprint(&2)
        .run(|| async { Ok(2) })
        .await;
    assert!(mismatch.is_err());

    // In progress, then lease lost: a holder on a borrowed store (renewed in
    // its own task) that blocks its thread past its lease is taken over.
    let lease = Duration::from_millis(200);
    let (tx, rx) = tokio::sync::oneshot::channel();
    let holder = {
        let idem = idem.clone();
        tokio::spawn(async move {
            let store = idem.store().clone();
            idem.call("billing", "other-key")
                .lease(lease)
                .on(store.as_ref())
                .run(|| async {
                    tx.send(()).unwrap();
                    std::thread::sleep(lease * 3);
                    Ok::<_, Error>(1u8)
                })
                .await
        })
    };
    rx.await.unwrap();
    let busy: Result<u8, Error> = idem
        .call("billing", "other-key")
        .run(|| async { Ok(0) })
        .await;
    assert!(matches!(busy, Err(Error::InProgress { .. })));
    tokio::time::sleep(lease * 2).await;
    let _: Result<u8, Error> = idem
        .call("billing", "other-key")
        .run(|| async { Ok(2) })
        .await;
    assert!(matches!(
        holder.await.unwrap(),
        Err(Error::LeaseLost { .. })
    ));

    let log = String::from_utf8(captured.bytes()).unwrap();
    let short = RecordKey::new("billing", RAW_KEY).short().to_string();
    for event in [
        "claimed",
        "replayed",
        "fingerprint mismatch",
        "in progress",
        "lease lost",
    ] {
        let line = log
            .lines()
            .find(|line| line.contains(event))
            .unwrap_or_else(|| panic!("no `{event}` event in:\n{log}"));
        assert!(line.contains("scope=billing"), "{line}");
        assert!(line.contains("key="), "{line}");
    }
    assert!(log.contains(&format!("key={short}")), "{log}");
    assert!(
        !log.contains(RAW_KEY),
        "the raw key leaked into the log:\n{log}"
    );
}
