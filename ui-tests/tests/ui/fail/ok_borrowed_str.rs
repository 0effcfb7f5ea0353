// Pins: a borrowed `Ok` type (`&str`) is an error at the reference: a
// replayed value is decoded from the store and cannot borrow.
use idem::idempotent;

#[idempotent]
async fn charge(order: &'static str) -> Result<&'static str, idem::Error> {
    Ok(order)
}

fn main() {}
