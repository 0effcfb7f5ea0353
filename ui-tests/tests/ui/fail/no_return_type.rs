// Pins: an `#[idempotent]` fn without a return type is an error after its
// parameters, saying what to return.
use idem::idempotent;

#[idempotent]
async fn charge(order: String) {
    let _ = order;
}

fn main() {}
