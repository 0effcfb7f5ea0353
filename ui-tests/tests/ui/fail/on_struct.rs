// Pins: `#[idempotent]` on a struct is an error at `struct`.
use idem::idempotent;

#[idempotent]
struct Charge {
    order: String,
}

fn main() {}
