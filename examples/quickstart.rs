//! idem in one screen, on the in-memory store: no server needed.
//!
//! Run: `cargo run --example quickstart`
//!
//! Or on a SQLite file, whose records survive restarts (run it twice: the
//! second run replays every charge and runs no body):
//! `cargo run --example quickstart --features sqlite -- --sqlite /tmp/idem.db`

use std::sync::atomic::{AtomicU32, Ordering};

use idem::{Idempotency, MemoryStore, idempotent};
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize)]
struct ChargeRequest {
    idempotency_key: String,
    tenant: u64,
    amount_cents: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Receipt {
    charge_id: u32,
    amount_cents: u64,
}

/// How many times the body really ran.
static CHARGES: AtomicU32 = AtomicU32::new(0);

#[idempotent(
    key = req.idempotency_key,
    scope = ("payments", req.tenant),
    ttl = "24h",
    wait = "2s"
)]
async fn charge(req: ChargeRequest) -> Result<Receipt, idem::Error> {
    // Stands in for the card network: slow enough that a burst overlaps.
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let charge_id = CHARGES.fetch_add(1, Ordering::SeqCst) + 1;
    Ok(Receipt {
        charge_id,
        amount_cents: req.amount_cents,
    })
}

fn request(key: &str, amount_cents: u64) -> ChargeRequest {
    ChargeRequest {
        idempotency_key: key.into(),
        tenant: 7,
        amount_cents,
    }
}

#[tokio::main]
async fn main() -> Result<(), idem::Error> {
    let idem = match sqlite_path() {
        Some(path) => open_sqlite(&path).await?,
        None => Idempotency::new(MemoryStore::new()),
    };
    idem::install(idem);

    let first = charge(request("order-1", 1200)).await?;
    // On a SQLite file kept from an earlier run, even this one replays.
    let how = if CHARGES.load(Ordering::SeqCst) == 1 {
        "ran the body"
    } else {
        "replayed    "
    };
    println!("first call:        {how}   -> {first:?}");

    let again = charge(request("order-1", 1200)).await?;
    println!("duplicate:         replayed       -> {again:?}");
    assert_eq!(first, again);

    let burst: Vec<_> = (0..20)
        .map(|_| tokio::spawn(charge(request("order-2", 500))))
        .collect();
    let mut receipts = Vec::new();
    for task in burst {
        receipts.push(task.await.expect("task panicked")?);
    }
    let ids: std::collections::BTreeSet<_> = receipts.iter().map(|r| r.charge_id).collect();
    println!(
        "burst of 20:       {} distinct charge id(s) -> {ids:?}",
        ids.len()
    );

    match charge(request("order-1", 999)).await {
        Err(err @ idem::Error::FingerprintMismatch { .. }) => {
            println!("other payload:     refused        -> {err}")
        }
        other => println!("other payload:     unexpected     -> {other:?}"),
    }

    let ran = CHARGES.load(Ordering::SeqCst);
    println!("the body ran {ran} time(s) for 23 calls");
    Ok(())
}

/// `--sqlite PATH`, if given.
fn sqlite_path() -> Option<String> {
    let mut args = std::env::args().skip(1);
    match (args.next().as_deref(), args.next(), args.next()) {
        (None, ..) => None,
        (Some("--sqlite"), Some(path), None) => Some(path),
        _ => {
            eprintln!("usage: quickstart [--sqlite PATH]");
            std::process::exit(2)
        }
    }
}

#[cfg(feature = "sqlite")]
async fn open_sqlite(path: &str) -> Result<Idempotency, idem::Error> {
    println!("store: the SQLite file {path} (records survive restarts)");
    let store = idem::SqliteStore::open(path)
        .await
        .map_err(idem::Error::Store)?;
    Ok(Idempotency::new(store))
}

#[cfg(not(feature = "sqlite"))]
async fn open_sqlite(_: &str) -> Result<Idempotency, idem::Error> {
    eprintln!(
        "--sqlite needs the `sqlite` feature: \
         cargo run --example quickstart --features sqlite -- --sqlite PATH"
    );
    std::process::exit(2)
}
