//! The transactional mode (`in_transaction`, and `tx_handle` for
//! `#[idempotent(store = …)]`): the claim, the body's own writes and the
//! completed record commit or roll back together. The body of every case
//! inserts an order in a table beside the store.

use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use idem::{Call, Error, Idempotency};
use serde::{Deserialize, Serialize};
use sqlx::{Pool, Transaction};

use super::SqlServer;

/// An order row, as the body inserted it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Order {
    pub(crate) id: i64,
    pub(crate) sku: String,
}

/// An application's error, with idem's inside.
#[derive(Debug, PartialEq)]
pub(crate) enum AppError {
    OutOfStock,
    Idem(String),
}

impl From<Error> for AppError {
    fn from(err: Error) -> Self {
        AppError::Idem(err.to_string())
    }
}

/// What the transactional cases need of a server: its orders table, and
/// a call run in a transaction of the caller's whose body inserts one.
pub(crate) trait TxServer: SqlServer {
    /// The orders table beside `place`, quoted.
    fn orders_table(place: &str) -> String;
    /// The statement that creates `orders` (an id the server assigns, an
    /// `order_key` and a `sku`).
    fn create_orders(orders: &str) -> String;
    /// Runs `call` in `tx`: its body counts a run in `runs`, inserts the
    /// order `key` of `sku`, and answers it, or `fail` when given.
    async fn place_in<E: From<Error>>(
        f: &Fixture<Self>,
        tx: &mut Transaction<'static, Self::Db>,
        call: Call,
        key: &str,
        sku: &str,
        runs: &AtomicUsize,
        fail: Option<E>,
    ) -> Result<Order, E>
    where
        Self: Sized;
    /// The store's handle on a transaction (its `TxHandle`).
    type Handle: Deref<Target = Idempotency> + Send + Sync;
    /// `store.tx_handle(tx)`.
    fn tx_handle(store: &Self::Store, tx: Transaction<'static, Self::Db>) -> Self::Handle;
    /// Commits `handle`'s transaction, or rolls it back.
    async fn end(handle: Self::Handle, commit: bool);
    /// Runs the call `key` (fingerprinted by `sku`) on `handle`: its body
    /// counts a run in `runs` and inserts the order through the handle's
    /// connection (`handle.conn()`).
    async fn place_on(
        f: &Fixture<Self>,
        handle: &Self::Handle,
        key: &str,
        sku: &str,
        runs: &AtomicUsize,
    ) -> Result<Order, Error>
    where
        Self: Sized;
}

/// A table of orders and a migrated store beside it, on one pool.
pub(crate) struct Fixture<S: SqlServer> {
    pub(crate) pool: Pool<S::Db>,
    pub(crate) store: S::Store,
    pub(crate) idem: Idempotency,
    pub(crate) orders: String,
    /// The store's place (schema, table), named after the test.
    pub(crate) place: String,
}

pub(crate) async fn fixture<S: TxServer>(test: &str) -> Fixture<S> {
    let place = S::unique(test);
    let pool = Pool::<S::Db>::connect(&S::url().await).await.unwrap();
    let store = S::from_pool(&place, pool.clone());
    S::migrate(&store).await.unwrap();
    let orders = S::orders_table(&place);
    S::execute(&S::create_orders(&orders)).await;
    Fixture {
        idem: Idempotency::new(store.clone()),
        pool,
        store,
        orders,
        place,
    }
}

impl<S: TxServer> Fixture<S> {
    pub(crate) async fn orders(&self) -> i64 {
        S::count(&self.orders).await
    }

    pub(crate) async fn records(&self) -> i64 {
        S::count(S::table(&self.store)).await
    }

    pub(crate) async fn completed(&self) -> i64 {
        let table = S::table(&self.store);
        S::count(&format!("{table} WHERE record IS NOT NULL")).await
    }

    /// A handle on a new transaction of the pool.
    pub(crate) async fn handle(&self) -> S::Handle {
        S::tx_handle(&self.store, self.pool.begin().await.unwrap())
    }

    /// Places an order on a handle of its own and commits or rolls back.
    pub(crate) async fn place_on_handle(
        &self,
        key: &str,
        sku: &str,
        runs: &AtomicUsize,
        commit: bool,
    ) -> Result<Order, Error> {
        let handle = self.handle().await;
        let out = S::place_on(self, &handle, key, sku, runs).await;
        S::end(handle, commit).await;
        out
    }

    /// Places an order inside a transaction of its own and commits it
    /// when the call succeeds, as an application would.
    pub(crate) async fn place(
        &self,
        key: &str,
        sku: &str,
        runs: &AtomicUsize,
    ) -> Result<Order, AppError> {
        let mut tx = self.pool.begin().await.unwrap();
        let call = self.idem.call("orders", key).fingerprint(&sku);
        let out = S::place_in(self, &mut tx, call, key, sku, runs, None).await;
        if out.is_ok() {
            tx.commit().await.unwrap();
        }
        out
    }
}

pub(crate) async fn a_failing_body_leaves_no_order_and_no_record_and_the_retry_runs<S: TxServer>() {
    let f = fixture::<S>("tx_fail").await;
    let runs = AtomicUsize::new(0);
    let mut tx = f.pool.begin().await.unwrap();
    let call = f.idem.call("orders", "o-1");
    let out = S::place_in(
        &f,
        &mut tx,
        call,
        "o-1",
        "sku-1",
        &runs,
        Some(AppError::OutOfStock),
    );
    assert_eq!(out.await, Err(AppError::OutOfStock));
    tx.rollback().await.unwrap();
    assert_eq!((f.orders().await, f.records().await), (0, 0));

    let order = f.place("o-1", "sku-1", &runs).await.unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    assert_eq!((f.orders().await, f.completed().await), (1, 1));
    assert_eq!(order.sku, "sku-1");
}

pub(crate) async fn a_transaction_dropped_before_commit_leaves_nothing_and_the_retry_runs_at_once<
    S: TxServer,
>() {
    let f = fixture::<S>("tx_drop").await;
    let runs = AtomicUsize::new(0);
    {
        let mut tx = f.pool.begin().await.unwrap();
        // A long lease: a retry must not have to wait it out.
        let call = f.idem.call("orders", "o-2").lease(Duration::from_secs(600));
        let out = S::place_in::<AppError>(&f, &mut tx, call, "o-2", "sku-2", &runs, None);
        out.await.unwrap();
        // The process "crashes" here: the transaction is dropped, never
        // committed.
    }
    assert_eq!((f.orders().await, f.records().await), (0, 0));
    let order = f.place("o-2", "sku-2", &runs).await.unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    assert_eq!(f.orders().await, 1);
    assert_eq!(order.sku, "sku-2");
}

pub(crate) async fn a_committed_call_makes_one_order_and_duplicates_replay<S: TxServer>() {
    let f = fixture::<S>("tx_commit").await;
    let runs = AtomicUsize::new(0);
    let first = f.place("o-3", "sku-3", &runs).await.unwrap();
    let again = f.place("o-3", "sku-3", &runs).await.unwrap();
    assert_eq!(first, again);
    // Through the plain store as well, and reported as a replay.
    let plain = f
        .idem
        .call("orders", "o-3")
        .fingerprint(&"sku-3")
        .run_reported(|| async { panic!("must replay") })
        .await;
    assert!(plain.replayed);
    assert_eq!(plain.result.map_err(|e: Error| e.to_string()), Ok(first));
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!((f.orders().await, f.completed().await), (1, 1));
    // Another payload under the same key is refused, in the transaction.
    let other = f.place("o-3", "sku-9", &runs).await;
    assert!(
        matches!(other, Err(AppError::Idem(ref m)) if m.contains("different payload")),
        "{other:?}"
    );
    assert_eq!(f.orders().await, 1);
}

/// While one transaction holds the claim, a duplicate waits on its row
/// lock; after the commit it replays the committed order.
pub(crate) async fn a_concurrent_duplicate_waits_for_the_commit_then_replays<S: TxServer>() {
    let f = fixture::<S>("tx_concurrent").await;
    let runs = AtomicUsize::new(0);
    let (claimed_tx, claimed_rx) = tokio::sync::oneshot::channel();
    let (go_tx, go_rx) = tokio::sync::oneshot::channel::<()>();
    let holder = async {
        let mut tx = f.pool.begin().await.unwrap();
        let call = f.idem.call("orders", "o-4");
        let out = S::place_in::<AppError>(&f, &mut tx, call, "o-4", "sku-4", &runs, None).await;
        claimed_tx.send(()).unwrap();
        go_rx.await.unwrap();
        tx.commit().await.unwrap();
        out
    };
    // Both run in this task, side by side: the duplicate is polled while
    // the holder waits for `go`.
    let duplicate = async {
        claimed_rx.await.unwrap();
        let mut duplicate = std::pin::pin!(f.place("o-4", "sku-4", &runs));
        let early = tokio::time::timeout(Duration::from_millis(300), &mut duplicate).await;
        assert!(early.is_err(), "the duplicate did not wait: {early:?}");
        go_tx.send(()).unwrap();
        duplicate.await
    };
    let (first, second) = tokio::join!(holder, duplicate);
    assert_eq!(first.unwrap(), second.unwrap());
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(f.orders().await, 1);
}

/// A holder claims in its transaction and keeps it open most of a lease,
/// then rolls back; a duplicate on the plain store waited on its row lock
/// and wins the key only then. Its lease was stamped when its statement
/// began, before the wait, so it is renewed before its body runs: a third
/// caller during that body is in progress, never a takeover that runs the
/// body again (issue 44, item 1).
pub(crate) async fn a_claim_won_after_a_rolled_back_holder_holds_a_whole_lease<S: TxServer>() {
    let f = fixture::<S>("tx_late_win").await;
    let lease = Duration::from_millis(1200);
    let (runs, plain_runs) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let (claimed_tx, claimed_rx) = tokio::sync::oneshot::channel();
    let (started_tx, started_rx) = tokio::sync::oneshot::channel();
    let holder = async {
        let mut tx = f.pool.begin().await.unwrap();
        let call = f.idem.call("orders", "o-9").fingerprint(&"sku-9");
        let out = S::place_in::<AppError>(&f, &mut tx, call, "o-9", "sku-9", &runs, None).await;
        out.unwrap();
        claimed_tx.send(()).unwrap();
        tokio::time::sleep(lease * 5 / 6).await;
        tx.rollback().await.unwrap();
    };
    let plain = |started: Option<tokio::sync::oneshot::Sender<()>>| {
        let plain_runs = &plain_runs;
        f.idem
            .call("orders", "o-9")
            .fingerprint(&"sku-9")
            .lease(lease)
            .run(move || async move {
                plain_runs.fetch_add(1, Ordering::SeqCst);
                if let Some(started) = started {
                    started.send(()).unwrap();
                }
                tokio::time::sleep(lease).await;
                Ok::<_, Error>(())
            })
    };
    let waiter = async {
        claimed_rx.await.unwrap();
        plain(Some(started_tx)).await
    };
    let third = async {
        started_rx.await.unwrap();
        tokio::time::sleep(lease / 2).await;
        plain(None).await
    };
    let ((), waited, third) = tokio::join!(holder, waiter, third);
    waited.unwrap();
    assert!(matches!(third, Err(Error::InProgress { .. })), "{third:?}");
    assert_eq!(plain_runs.load(Ordering::SeqCst), 1, "two bodies ran");
}

/// In the transactional mode, a call that asks for a tombstone leaves one
/// with its committed record: after the TTL the same order is
/// `Error::Expired` (its transaction adds nothing), another one is refused.
pub(crate) async fn a_tombstone_is_kept_in_the_transactional_mode<S: TxServer>() {
    let f = fixture::<S>("tx_tombstone").await;
    let runs = AtomicUsize::new(0);
    let place_late = async |sku: &str| {
        let mut tx = f.pool.begin().await.unwrap();
        let call = f
            .idem
            .call("orders", "o-late")
            .ttl(Duration::from_millis(300))
            .tombstone(Duration::from_secs(60))
            .fingerprint(&sku);
        let out = S::place_in::<Error>(&f, &mut tx, call, "o-late", sku, &runs, None).await;
        tx.commit().await.unwrap();
        out
    };
    assert_eq!(place_late("tea").await.unwrap().sku, "tea");
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert!(matches!(
        place_late("tea").await,
        Err(Error::Expired { .. })
    ));
    assert!(matches!(
        place_late("coffee").await,
        Err(Error::FingerprintMismatch { .. })
    ));
    assert_eq!((runs.load(Ordering::SeqCst), f.orders().await), (1, 1));
}

/// On a transaction's handle (`tx_handle`, for `#[idempotent(store = …)]`)
/// a step is refused before its body runs: the store does not record steps.
pub(crate) async fn a_step_on_a_transaction_handle_is_refused_before_it_runs<S: TxServer>() {
    let f = fixture::<S>("tx_handle_step").await;
    let tx = f.handle().await;
    let runs = AtomicUsize::new(0);
    let out: Result<u8, Error> = tx
        .call("orders", "o-handle")
        .run(|| async {
            idem::step("charge", || async {
                runs.fetch_add(1, Ordering::SeqCst);
                Ok::<_, Error>(1u8)
            })
            .await
        })
        .await;
    let Err(Error::InvalidStep { reason, .. }) = out else {
        panic!("expected InvalidStep, got {out:?}")
    };
    assert!(reason.contains("does not record steps"), "{reason}");
    assert_eq!(runs.load(Ordering::SeqCst), 0, "the step's body ran");
    S::end(tx, false).await;
}

/// `forget` on a transaction's handle deletes inside the transaction: the
/// record is gone once it commits, and still there if it rolls back.
pub(crate) async fn forget_on_a_transaction_commits_or_rolls_back_with_it<S: TxServer>() {
    let f = fixture::<S>("tx_forget").await;
    let runs = Arc::new(AtomicUsize::new(0));
    let call = || {
        let runs = Arc::clone(&runs);
        f.idem.call("orders", "o-1").run(move || async move {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok::<_, Error>(1u8)
        })
    };
    call().await.unwrap();

    let tx = f.handle().await;
    tx.forget("orders", "o-1").await.unwrap();
    S::end(tx, false).await;
    call().await.unwrap();
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "rolled back: still replayed"
    );

    let tx = f.handle().await;
    tx.forget("orders", "o-1").await.unwrap();
    S::end(tx, true).await;
    call().await.unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 2, "committed: ran again");
}

/// On a transaction's handle, the body's own write (through
/// `handle.conn()`) and the record commit together, so a duplicate after
/// the commit replays, and roll back together, so a retry after the
/// rollback runs again and nothing of the first attempt stays.
pub(crate) async fn a_handle_commits_and_rolls_back_the_body_s_write_with_the_record<
    S: TxServer,
>() {
    let f = fixture::<S>("tx_handle_write").await;
    let runs = AtomicUsize::new(0);
    let first = f
        .place_on_handle("o-1", "sku-1", &runs, true)
        .await
        .unwrap();
    assert_eq!((f.orders().await, f.completed().await), (1, 1));
    let again = f
        .place_on_handle("o-1", "sku-1", &runs, true)
        .await
        .unwrap();
    assert_eq!(again, first, "the duplicate replays the committed order");
    assert_eq!((runs.load(Ordering::SeqCst), f.orders().await), (1, 1));

    let runs = AtomicUsize::new(0);
    f.place_on_handle("o-2", "sku-2", &runs, false)
        .await
        .unwrap();
    assert_eq!((f.orders().await, f.records().await), (1, 1), "rolled back");
    let retried = f
        .place_on_handle("o-2", "sku-2", &runs, true)
        .await
        .unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 2, "the retry ran again");
    assert_eq!((f.orders().await, f.completed().await), (2, 2));
    assert_eq!(retried.sku, "sku-2");
}

/// [`TxServer::place_in`] in a server's impl, on its connection type
/// `$conn`, with the `insert_order` of the impl's module: the stores'
/// `in_transaction` have the same shape.
macro_rules! place_in_inserting_an_order {
    ($conn:ty) => {
        async fn place_in<E: From<::idem::Error>>(
            f: &$crate::support::sql::tx::Fixture<Self>,
            tx: &mut ::sqlx::Transaction<'static, Self::Db>,
            call: ::idem::Call,
            key: &str,
            sku: &str,
            runs: &::std::sync::atomic::AtomicUsize,
            fail: Option<E>,
        ) -> Result<$crate::support::sql::tx::Order, E> {
            let body = async |conn: &mut $conn| {
                runs.fetch_add(1, ::std::sync::atomic::Ordering::SeqCst);
                let order = insert_order(conn, &f.orders, key, sku).await;
                fail.map_or(Ok(order), Err)
            };
            f.store.in_transaction(tx, call).run(body).await
        }
    };
}
pub(crate) use place_in_inserting_an_order;

/// The [`TxServer`] items on a transaction's handle in a server's impl, its
/// `TxHandle` being `$handle`, with the `insert_order` of the impl's
/// module: the stores' `tx_handle` have the same shape.
macro_rules! handle_inserting_an_order {
    ($handle:ty) => {
        type Handle = $handle;

        fn tx_handle(store: &Self::Store, tx: ::sqlx::Transaction<'static, Self::Db>) -> $handle {
            store.tx_handle(tx)
        }

        async fn end(handle: $handle, commit: bool) {
            if commit {
                handle.commit().await.unwrap();
            } else {
                handle.rollback().await.unwrap();
            }
        }

        async fn place_on(
            f: &$crate::support::sql::tx::Fixture<Self>,
            handle: &$handle,
            key: &str,
            sku: &str,
            runs: &::std::sync::atomic::AtomicUsize,
        ) -> Result<$crate::support::sql::tx::Order, ::idem::Error> {
            let body = || async {
                runs.fetch_add(1, ::std::sync::atomic::Ordering::SeqCst);
                let mut conn = handle.conn().await;
                Ok(insert_order(&mut conn, &f.orders, key, sku).await)
            };
            handle.call("orders", key).fingerprint(&sku).run(body).await
        }
    };
}
pub(crate) use handle_inserting_an_order;
