//! Each outcome of a queue handler maps to what the consumer tells the
//! broker: a value, a replay or a stored error is acknowledged; a released
//! error, a busy key or a store failure is retried; a poison message
//! (another payload under a used id) is rejected.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use idem::queue::{Disposition, Processed, process, with_heartbeat};
use idem::{Error, Idempotency, MemoryStore};
use serde::{Deserialize, Serialize};

#[derive(Debug, PartialEq, Serialize, Deserialize)]
enum BillingError {
    CardDeclined,
    GatewayDown,
    Idem(String),
}

impl From<Error> for BillingError {
    fn from(err: Error) -> Self {
        BillingError::Idem(err.to_string())
    }
}

async fn bill(
    idem: &Idempotency,
    order: &str,
    amount: u64,
    outcome: Result<u64, BillingError>,
) -> Processed<u64, BillingError> {
    let call = idem
        .call("billing", order)
        .fingerprint(&amount)
        .errors(idem::replay_errors_if(|e: &BillingError| {
            *e == BillingError::CardDeclined
        }));
    process(call, || async move { outcome }).await
}

#[tokio::test]
async fn each_outcome_has_its_disposition() {
    let idem = Idempotency::new(MemoryStore::new());

    let first = bill(&idem, "o-1", 100, Ok(100)).await;
    assert_eq!(
        (first.result, first.disposition),
        (Ok(100), Disposition::Ack)
    );
    let replay = bill(&idem, "o-1", 100, Ok(999)).await;
    assert_eq!(
        (replay.result, replay.disposition),
        (Ok(100), Disposition::Ack)
    );

    let poison = bill(&idem, "o-1", 555, Ok(555)).await;
    assert_eq!(poison.disposition, Disposition::Reject);
    assert!(matches!(poison.result, Err(BillingError::Idem(_))));

    let released = bill(&idem, "o-2", 1, Err(BillingError::GatewayDown)).await;
    assert!(matches!(released.disposition, Disposition::Retry { .. }));
    assert_eq!(released.result, Err(BillingError::GatewayDown));
    let retried = bill(&idem, "o-2", 1, Ok(1)).await;
    assert_eq!(
        (retried.result, retried.disposition),
        (Ok(1), Disposition::Ack)
    );

    let stored = bill(&idem, "o-3", 1, Err(BillingError::CardDeclined)).await;
    assert_eq!(
        (stored.result, stored.disposition),
        (Err(BillingError::CardDeclined), Disposition::Ack)
    );
    let stored_again = bill(&idem, "o-3", 1, Ok(1)).await;
    assert_eq!(
        (stored_again.result, stored_again.disposition),
        (Err(BillingError::CardDeclined), Disposition::Ack)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_progress_is_retried_after_the_holders_lease() {
    let idem = Idempotency::new(MemoryStore::new());
    let (tx, rx) = tokio::sync::oneshot::channel();
    let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
    let holder = {
        let idem = idem.clone();
        tokio::spawn(async move {
            let call = idem.call("billing", "busy").lease(Duration::from_secs(20));
            process(call, || async move {
                tx.send(()).unwrap();
                done_rx.await.unwrap();
                Ok::<u8, Error>(1)
            })
            .await
        })
    };
    rx.await.unwrap();
    let busy = process(idem.call("billing", "busy"), || async {
        Ok::<u8, Error>(2)
    })
    .await;
    let Disposition::Retry { after } = busy.disposition else {
        panic!("{busy:?}")
    };
    assert!(
        after > Duration::from_secs(15) && after <= Duration::from_secs(20),
        "{after:?}"
    );
    done_tx.send(()).unwrap();
    assert_eq!(holder.await.unwrap().disposition, Disposition::Ack);
}

#[tokio::test]
async fn an_unreachable_store_is_retried_and_the_body_does_not_run() {
    let idem = Idempotency::new(MemoryStore::with_max_records(64));
    // Fill every shard with claims: the store refuses more (fail closed).
    let mut holders = Vec::new();
    for i in 0..2000u32 {
        let store = idem.store().clone();
        let claim = idem::store::Claim::new(
            idem::store::Token::random(),
            idem::fingerprint::Fingerprint::NONE,
            Duration::from_secs(60),
            "queue",
        );
        holders.push(
            store
                .claim(&idem::key::RecordKey::new("billing", &i), &claim)
                .await,
        );
    }
    let ran = Arc::new(AtomicUsize::new(0));
    let refused = process(idem.call("billing", "new-order"), || {
        let ran = ran.clone();
        async move {
            ran.fetch_add(1, Ordering::SeqCst);
            Ok::<u8, Error>(1)
        }
    })
    .await;
    assert!(
        matches!(refused.result, Err(Error::Store(_))),
        "{refused:?}"
    );
    assert!(matches!(refused.disposition, Disposition::Retry { .. }));
    assert_eq!(ran.load(Ordering::SeqCst), 0);
}

#[tokio::test(start_paused = true)]
async fn the_heartbeat_beats_while_a_long_handler_runs() {
    let idem = Idempotency::new(MemoryStore::new());
    let beats = Arc::new(AtomicUsize::new(0));
    let counter = beats.clone();
    let processed = process(idem.call("billing", "slow"), || {
        with_heartbeat(
            async {
                tokio::time::sleep(Duration::from_secs(65)).await;
                Ok::<u8, Error>(1)
            },
            Duration::from_secs(10),
            move || {
                counter.fetch_add(1, Ordering::SeqCst);
                std::future::ready(())
            },
        )
    })
    .await;
    assert_eq!(processed.disposition, Disposition::Ack);
    assert_eq!(beats.load(Ordering::SeqCst), 6);
}

/// A payment handler's error: declined (a final answer when stored), a
/// timeout, or idem's own.
#[derive(Debug, Serialize, Deserialize)]
enum PayError {
    Declined,
    Timeout,
    #[serde(skip)]
    Idem(Error),
}

impl From<Error> for PayError {
    fn from(err: Error) -> Self {
        PayError::Idem(err)
    }
}

impl idem::queue::AsIdemError for PayError {
    fn as_idem_error(&self) -> Option<&Error> {
        match self {
            PayError::Idem(err) => Some(err),
            _ => None,
        }
    }
}

fn declined(err: &PayError) -> bool {
    matches!(err, PayError::Declined)
}

/// `Disposition::of_result` for `#[idempotent]` handlers: the error type says
/// which errors are idem's, the policy which of its own are stored.
#[tokio::test]
async fn an_annotated_handlers_result_has_its_disposition() {
    static IDEM: std::sync::LazyLock<Idempotency> =
        std::sync::LazyLock::new(|| Idempotency::new(MemoryStore::new()));

    #[idem::idempotent(key = order, scope = "pay", store = IDEM, errors = declined, skip(outcome))]
    async fn pay(
        order: &str,
        amount: u64,
        outcome: Result<u64, PayError>,
    ) -> Result<u64, PayError> {
        outcome
    }

    let of = |out: &Result<u64, PayError>| Disposition::of_result(out, declined);
    assert_eq!(of(&pay("p-1", 5, Ok(5)).await), Disposition::Ack);
    assert_eq!(
        of(&pay("p-1", 5, Ok(6)).await),
        Disposition::Ack,
        "a replay"
    );
    let poison = pay("p-1", 7, Ok(7)).await;
    assert_eq!(of(&poison), Disposition::Reject, "{poison:?}");
    let declined_now = pay("p-2", 5, Err(PayError::Declined)).await;
    assert_eq!(of(&declined_now), Disposition::Ack);
    let replayed = pay("p-2", 5, Ok(5)).await;
    assert!(matches!(replayed, Err(PayError::Declined)), "{replayed:?}");
    assert_eq!(of(&replayed), Disposition::Ack);
    let timeout = pay("p-3", 5, Err(PayError::Timeout)).await;
    assert!(matches!(of(&timeout), Disposition::Retry { .. }));
    assert_eq!(
        of(&pay("p-3", 5, Ok(5)).await),
        Disposition::Ack,
        "released: runs again"
    );

    // A boxed error that may be idem's own.
    type Boxed = Box<dyn std::error::Error + Send + Sync>;
    let retry = Disposition::Retry {
        after: idem::queue::DEFAULT_RETRY_AFTER,
    };
    let undecodable: Boxed = Error::Codec(idem::CodecError::Corrupt("not a record")).into();
    // The first delivery ran; its result was too large to store.
    let not_stored: Boxed = Error::Codec(idem::CodecError::NotStored("too large".into())).into();
    let cases: [(Result<u8, Boxed>, Disposition); 4] = [
        (Err(Error::NotConfigured.into()), retry),
        (Err("gateway down".into()), retry),
        (Err(undecodable), Disposition::Reject),
        (Err(not_stored), Disposition::Ack),
    ];
    for (out, want) in cases {
        assert_eq!(Disposition::of_result(&out, |_| false), want, "{out:?}");
    }
}

/// A handler whose step's value cannot be saved: however often the broker
/// delivers the message again, the step's effect is not repeated; every
/// delivery fails at that step with `StepNotStored`.
#[tokio::test]
async fn redelivering_a_message_whose_step_cannot_be_saved_never_reruns_the_step() {
    let idem = Idempotency::builder(MemoryStore::new())
        .max_record_bytes(1024)
        .build();
    let charges = AtomicUsize::new(0);
    for delivery in 1..=3 {
        let call = idem.call("billing", "o-big");
        let processed: Processed<(), Error> = process(call, || async {
            let _receipt: String = idem::step("charge", || async {
                charges.fetch_add(1, Ordering::SeqCst);
                Ok::<_, Error>("x".repeat(4096))
            })
            .await?;
            Ok(())
        })
        .await;
        assert!(
            matches!(
                processed.result,
                Err(Error::Codec(idem::CodecError::StepNotStored { .. }))
            ),
            "delivery {delivery}: {:?}",
            processed.result
        );
    }
    assert_eq!(charges.load(Ordering::SeqCst), 1, "the charge ran again");
    // The handler's own `Result`, judged as idem's error, is poison.
    let step_not_stored: Result<(), Error> = Err(Error::Codec(idem::CodecError::StepNotStored {
        step: "charge".into(),
        reason: "too large".into(),
    }));
    assert_eq!(
        Disposition::of_result(&step_not_stored, |_| false),
        Disposition::Reject
    );
}

/// `Disposition::of` a call's `Reported` result: the call says itself
/// whether the handler's error is stored, so no policy is passed again.
#[tokio::test]
async fn a_reported_result_says_whether_its_error_is_stored() {
    let idem = Idempotency::new(MemoryStore::new());
    let pay = |order: &'static str, outcome: Result<u8, PayError>| {
        idem.call("pay", order)
            .errors(idem::replay_errors_if(declined))
            .run_reported(|| async move { outcome })
    };

    let declined = pay("o-1", Err(PayError::Declined)).await;
    assert!(declined.stored && !declined.replayed, "{declined:?}");
    assert_eq!(Disposition::of(&declined), Disposition::Ack);
    let replayed = pay("o-1", Ok(1)).await;
    assert!(replayed.stored && replayed.replayed, "{replayed:?}");
    assert!(matches!(replayed.result, Err(PayError::Declined)));
    assert_eq!(Disposition::of(&replayed), Disposition::Ack);

    let timeout = pay("o-2", Err(PayError::Timeout)).await;
    assert!(!timeout.stored, "{timeout:?}");
    assert!(matches!(
        Disposition::of(&timeout),
        Disposition::Retry { .. }
    ));
    let ok = pay("o-2", Ok(2)).await;
    assert!(!ok.stored && !ok.replayed, "released: runs again");
    assert_eq!(Disposition::of(&ok), Disposition::Ack);

    let with_payload = |payload: &'static str| {
        idem.call("pay", "o-3")
            .fingerprint(&payload)
            .run_reported(|| async { Ok::<u8, PayError>(3) })
    };
    assert_eq!(
        Disposition::of(&with_payload("payload").await),
        Disposition::Ack
    );
    let poison = with_payload("another payload").await;
    assert!(!poison.stored, "idem's own error is never stored");
    assert!(
        matches!(poison.result, Err(PayError::Idem(_))),
        "{poison:?}"
    );
    assert_eq!(Disposition::of(&poison), Disposition::Reject);
}

/// A message redelivered after its record expired, within the call's
/// tombstone, is acknowledged without running the handler: its first
/// delivery completed. Another payload under that id is still rejected.
#[tokio::test]
async fn a_late_redelivery_under_a_tombstone_is_acked_and_does_not_run() {
    let idem = Idempotency::new(MemoryStore::new());
    let runs = Arc::new(AtomicUsize::new(0));
    let deliver = |amount: u64| {
        let runs = Arc::clone(&runs);
        let call = idem
            .call("billing", "o-late")
            .ttl(Duration::from_millis(100))
            .tombstone(Duration::from_secs(60))
            .fingerprint(&amount);
        process(call, move || async move {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok::<_, Error>(amount)
        })
    };
    assert_eq!(deliver(100).await.disposition, Disposition::Ack);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let late = deliver(100).await;
    assert!(
        matches!(late.result, Err(Error::Expired { .. })),
        "{:?}",
        late.result
    );
    assert_eq!(late.disposition, Disposition::Ack);
    assert_eq!(deliver(555).await.disposition, Disposition::Reject);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}
