// Pins: a misspelled option (`tll`) is an error at its name, with "did you
// mean `ttl`?".
use idem::idempotent;

#[idempotent(tll = "1h")]
async fn charge(order: String) -> Result<u64, idem::Error> {
    Ok(order.len() as u64)
}

fn main() {}
