// Pins: `#[cfg]` on a parameter is carried into the derived key's hashing,
// so a parameter compiled out is not hashed (no E0425).
use idem::{Idempotency, MemoryStore, idempotent};

#[idempotent(store = Idempotency::new(MemoryStore::new()))]
async fn label(order_id: String, #[cfg(any())] debug_note: String, #[cfg(all())] parcels: u32) -> Result<String, idem::Error> {
    Ok(format!("{order_id}: {parcels}"))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    assert_eq!(label("o-1".into(), 2).await.unwrap(), "o-1: 2");
}
