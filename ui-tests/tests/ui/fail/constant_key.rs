// Pins: a derived key with nothing to hash (only `&self`, or every
// parameter skipped) is one error at the fn name, saying the key would be
// constant and how to give one.
use idem::idempotent;

struct Account {
    id: u64,
}

impl Account {
    #[idempotent]
    async fn close(&self) -> Result<String, idem::Error> {
        Ok(format!("closed account {}", self.id))
    }
}

struct Pool;

#[idempotent(skip(pool))]
async fn vacuum(pool: &Pool) -> Result<(), idem::Error> {
    let _ = pool;
    Ok(())
}

fn main() {}
