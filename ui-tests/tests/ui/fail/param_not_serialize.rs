// Pins: without `key`, a parameter that is not `Serialize` is one error at
// that parameter, naming it and suggesting `skip(pool)` or `key = …`.
use idem::idempotent;

struct Pool;

#[idempotent]
async fn charge(pool: &Pool, order: String) -> Result<u64, idem::Error> {
    let _ = pool;
    Ok(order.len() as u64)
}

fn main() {}
