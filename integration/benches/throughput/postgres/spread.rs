//! The subjects of the replay of spread keys ([`crate::spread`]): idem, its
//! statements by hand, and the raw `SELECT` after the fenced minimum.

use std::sync::Arc;

use idem::Idempotency;

use super::{Raw, Statements, idem_call};
use crate::harness::Runner;

/// idem's first call of each key on `first`, its replay on one of
/// `replays`; by hand and raw, both on `raw`'s connections.
pub(super) fn subjects(
    first: &Idempotency,
    replays: &[Idempotency],
    scope: &Arc<str>,
    raw: &Raw,
    sql: &Arc<Statements>,
    concurrency: usize,
    calls: u64,
) -> Vec<(&'static str, Runner)> {
    let call = |handles: Arc<[Idempotency]>| {
        let scope = scope.clone();
        move |k: u64| {
            let (idem, scope) = (handles[k as usize % handles.len()].clone(), scope.clone());
            async move { idem_call(&idem, &scope, k).await }
        }
    };
    let on_raw = |kind: fn(Raw, Arc<Statements>, u64) -> Sent| {
        let (raw, sql) = (raw.clone(), sql.clone());
        move |k: u64| kind(raw.clone(), sql.clone(), k)
    };
    let by_hand =
        on_raw(|raw, sql, k| Box::pin(async move { raw.by_hand(&sql.idem, k, k as i64).await }));
    vec![
        (
            "idem PostgresStore",
            crate::spread::runner_of(
                concurrency,
                calls,
                call(Arc::new([first.clone()])),
                call(replays.into()),
            ),
        ),
        (
            "idem's statements by hand, dedicated connections",
            crate::spread::runner_of(concurrency, calls, by_hand.clone(), by_hand),
        ),
        (
            "raw SELECT by key, dedicated connections",
            crate::spread::runner_of(
                concurrency,
                calls,
                on_raw(|raw, sql, k| Box::pin(async move { raw.two(&sql, k, k as i64).await })),
                on_raw(|raw, sql, k| Box::pin(async move { raw.select(&sql, k, k as i64).await })),
            ),
        ),
    ]
}

type Sent = std::pin::Pin<Box<dyn Future<Output = ()> + Send>>;
