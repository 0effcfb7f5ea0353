// Pins: an async method of a trait impl (trait with `async fn`).
use std::sync::atomic::{AtomicU32, Ordering};

use idem::{Idempotency, MemoryStore, idempotent};

trait Handler {
    async fn handle(&self, message_id: String) -> Result<u32, idem::Error>;
}

struct Emails {
    idem: Idempotency,
    sent: AtomicU32,
}

impl Handler for Emails {
    #[idempotent(store = self.idem, key = message_id, scope = "emails")]
    async fn handle(&self, message_id: String) -> Result<u32, idem::Error> {
        Ok(self.sent.fetch_add(1, Ordering::SeqCst))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let emails = Emails {
        idem: Idempotency::new(MemoryStore::new()),
        sent: AtomicU32::new(0),
    };
    let first = emails.handle("m-1".into()).await.unwrap();
    assert_eq!(emails.handle("m-1".into()).await.unwrap(), first);
    assert_eq!(emails.sent.load(Ordering::SeqCst), 1);
}
