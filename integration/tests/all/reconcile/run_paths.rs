//! Every combination of a call's run settings, through public API only:
//! where it runs (the handle's store, `.detach()`, `.on(&store)`), with
//! or without `.reconcile(…)`, ended by each terminal (`run`,
//! `run_reported`, `run_apart`, `queue::process`), and the attribute's
//! `detach` + `reconcile`. A reconciling call is checked on a takeover of
//! a vanished holder (the reconcile answers, the body does not run) and
//! on a fresh key (the body runs, the reconcile is not asked). Detach on a
//! borrowed store is a compile error: `ui-tests/tests/ui/fail/detach_on_borrowed.rs`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use idem::fingerprint::Fingerprint;
use idem::key::RecordKey;
use idem::queue::{Disposition, process};
use idem::store::ClaimOutcome;
use idem::{Failed, Idempotency, MemoryStore, Store, idempotent};

const LEASE: Duration = Duration::from_millis(150);

/// A holder that claimed `(scope, key)` on `store` and vanished: its lease
/// has run out when this returns.
async fn vanished(store: &dyn Store, scope: &str, key: &str) {
    let claim = idem_conformance::new_claim(Fingerprint::NONE, LEASE);
    let won = store
        .claim(&RecordKey::new(scope, key), &claim)
        .await
        .unwrap();
    assert!(matches!(won, ClaimOutcome::Won { .. }));
    tokio::time::sleep(LEASE * 2).await;
}

/// How often the body ran and the reconcile was asked.
#[derive(Clone, Default)]
struct Counts {
    body: Arc<AtomicU32>,
    asked: Arc<AtomicU32>,
}

impl Counts {
    fn body(
        &self,
    ) -> impl FnOnce() -> std::future::Ready<Result<u32, idem::Error>> + Send + 'static {
        let body = Arc::clone(&self.body);
        move || {
            body.fetch_add(1, Ordering::SeqCst);
            std::future::ready(Ok(1))
        }
    }

    fn reconcile(
        &self,
    ) -> impl FnOnce() -> std::future::Ready<Result<Option<u32>, idem::Error>> + Send + 'static
    {
        let asked = Arc::clone(&self.asked);
        move || {
            asked.fetch_add(1, Ordering::SeqCst);
            std::future::ready(Ok(Some(2)))
        }
    }

    fn seen(&self) -> (u32, u32) {
        (
            self.body.load(Ordering::SeqCst),
            self.asked.load(Ordering::SeqCst),
        )
    }
}

fn handle() -> Idempotency {
    Idempotency::new(MemoryStore::new())
}

#[tokio::test]
async fn attached_each_terminal() {
    let idem = handle();
    let counts = Counts::default();
    let ran: Result<u32, idem::Error> = idem.call("s", "k").run(counts.body()).await;
    assert_eq!(ran.unwrap(), 1);
    let reported = idem.call("s", "k").run_reported(counts.body()).await;
    assert!(reported.replayed);
    let apart = idem
        .call("s", "other")
        .run_apart(|| async { Err::<u32, &str>("declined") })
        .await;
    assert!(matches!(
        apart.result,
        Err(Failed::Body {
            error: "declined",
            ..
        })
    ));
    assert_eq!(counts.seen(), (1, 0));
}

#[tokio::test]
async fn attached_with_reconcile() {
    let idem = handle();
    let counts = Counts::default();
    vanished(idem.store().as_ref(), "s", "lost").await;
    let out = idem
        .call("s", "lost")
        .reconcile(counts.reconcile())
        .run_reported(counts.body())
        .await;
    assert_eq!((out.result.unwrap(), out.replayed), (2, false));
    assert_eq!(
        counts.seen(),
        (0, 1),
        "the reconcile answered, the body did not run"
    );
    let fresh: Result<u32, idem::Error> = idem
        .call("s", "fresh")
        .reconcile(counts.reconcile())
        .run(counts.body())
        .await;
    assert_eq!(fresh.unwrap(), 1);
    assert_eq!(counts.seen(), (1, 1), "a fresh key never reconciles");
}

#[tokio::test]
async fn detached_each_terminal() {
    let idem = handle();
    let counts = Counts::default();
    let body = counts.body();
    let slow = idem.call("s", "k").detach().run(move || async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        body().await
    });
    // The caller gives up; the body runs on and its value is stored.
    assert!(
        tokio::time::timeout(Duration::from_millis(5), slow)
            .await
            .is_err()
    );
    let again = idem
        .call("s", "k")
        .wait(Duration::from_secs(2))
        .detach()
        .run_reported(counts.body())
        .await;
    assert_eq!((again.result.unwrap(), again.replayed), (1, true));
    let apart = idem
        .call("s", "apart")
        .detach()
        .run_apart(|| async { Err::<u32, String>("declined".into()) })
        .await;
    assert!(matches!(
        apart.result,
        Err(Failed::Body { stored: false, .. })
    ));
    assert_eq!(idem.drain(Duration::from_secs(1)).await, 0);
    assert_eq!(counts.seen(), (1, 0));
}

#[tokio::test]
async fn detached_with_reconcile() {
    let idem = handle();
    let counts = Counts::default();
    vanished(idem.store().as_ref(), "s", "lost").await;
    // Set in either order: settings commute.
    let out = idem
        .call("s", "lost")
        .detach()
        .reconcile(counts.reconcile())
        .run_reported(counts.body())
        .await;
    assert_eq!((out.result.unwrap(), out.replayed), (2, false));
    let replay: Result<u32, idem::Error> = idem
        .call("s", "lost")
        .reconcile(counts.reconcile())
        .detach()
        .run(counts.body())
        .await;
    assert_eq!(replay.unwrap(), 2, "the reconciled value was stored");
    assert_eq!(counts.seen(), (0, 1));
}

#[tokio::test]
async fn borrowed_each_terminal_and_reconcile() {
    let idem = handle();
    let borrowed = MemoryStore::new();
    let counts = Counts::default();
    let ran: Result<u32, idem::Error> = idem.call("s", "k").on(&borrowed).run(counts.body()).await;
    assert_eq!(ran.unwrap(), 1);
    let reported = idem
        .call("s", "k")
        .on(&borrowed)
        .run_reported(counts.body())
        .await;
    assert!(reported.replayed);
    assert!(
        idem.store()
            .claim(
                &RecordKey::new("s", "k"),
                &idem_conformance::new_claim(Fingerprint::NONE, LEASE)
            )
            .await
            .is_ok_and(|won| matches!(won, ClaimOutcome::Won { .. })),
        "the record is in the borrowed store, not the handle's"
    );
    vanished(&borrowed, "s", "lost").await;
    let reconciled = idem
        .call("s", "lost")
        .reconcile(counts.reconcile())
        .on(&borrowed)
        .run_apart(counts.body())
        .await;
    assert_eq!(reconciled.result.unwrap(), 2);
    assert_eq!(counts.seen(), (1, 1));
}

#[tokio::test]
async fn queue_process_in_every_place() {
    let idem = handle();
    let borrowed = MemoryStore::new();
    let counts = Counts::default();
    vanished(idem.store().as_ref(), "q", "lost").await;
    let detached = process(
        idem.call("q", "lost")
            .reconcile(counts.reconcile())
            .detach(),
        counts.body(),
    )
    .await;
    assert_eq!(detached.disposition, Disposition::Ack);
    assert_eq!(detached.result.unwrap(), 2);
    let on = process(idem.call("q", "k").on(&borrowed), counts.body()).await;
    assert_eq!((on.result.unwrap(), on.disposition), (1, Disposition::Ack));
    assert_eq!(counts.seen(), (1, 1));
}

static ATTR: std::sync::LazyLock<Idempotency> = std::sync::LazyLock::new(handle);
static ATTR_BODY: AtomicU32 = AtomicU32::new(0);

async fn attr_booked(order: &String) -> Result<Option<String>, idem::Error> {
    Ok(Some(format!("booked {order}")))
}

#[idempotent(store = ATTR, scope = "attr", key = order, lease = "150ms", detach, reconcile = attr_booked)]
async fn attr_charge(order: String) -> Result<String, idem::Error> {
    ATTR_BODY.fetch_add(1, Ordering::SeqCst);
    Ok(format!("ran {order}"))
}

#[tokio::test]
async fn the_attribute_detached_and_reconciling() {
    assert_eq!(attr_charge("fresh".into()).await.unwrap(), "ran fresh");
    vanished(ATTR.store().as_ref(), "attr", "lost").await;
    assert_eq!(attr_charge("lost".into()).await.unwrap(), "booked lost");
    assert_eq!(ATTR_BODY.load(Ordering::SeqCst), 1);
}
