// Pins: a method taking `&mut self`; the body mutates `self`.
use idem::{Idempotency, MemoryStore, idempotent};

struct Ledger {
    idem: Idempotency,
    entries: Vec<u64>,
}

impl Ledger {
    #[idempotent(store = self.idem.clone())]
    async fn record(&mut self, amount: u64) -> Result<usize, idem::Error> {
        self.entries.push(amount);
        Ok(self.entries.len())
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut ledger = Ledger {
        idem: Idempotency::new(MemoryStore::new()),
        entries: Vec::new(),
    };
    assert_eq!(ledger.record(7).await.unwrap(), 1);
    assert_eq!(ledger.record(7).await.unwrap(), 1);
    assert_eq!(ledger.entries, vec![7]);
}
