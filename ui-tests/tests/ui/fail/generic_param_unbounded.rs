// Pins: in a generic fn, a hashed parameter of a type parameter without a
// `Serialize` bound is one error at that parameter.
use idem::idempotent;

#[idempotent]
async fn charge<T: Send>(order: T) -> Result<u64, idem::Error> {
    let _ = order;
    Ok(1)
}

fn main() {}
