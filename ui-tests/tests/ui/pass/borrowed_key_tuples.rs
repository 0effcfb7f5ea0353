// Pins: `key`, `scope` and `fingerprint` tuples see owned parameters by
// reference (no move, no E0382): the body still owns them.
use idem::{Idempotency, MemoryStore, idempotent};

#[idempotent(
    key = (tenant, order_id),
    scope = ("payments", tenant),
    fingerprint = (order_id, amount_cents),
    store = Idempotency::new(MemoryStore::new()),
)]
async fn charge(tenant: String, order_id: String, amount_cents: u64) -> Result<String, idem::Error> {
    Ok(format!("{tenant}/{order_id}: {amount_cents}"))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let out = charge("acme".into(), "o-1".into(), 1200).await.unwrap();
    assert_eq!(out, "acme/o-1: 1200");
}
