// Pins: the expansion silences no lint: an annotated fn that nothing calls
// still gets rustc's `dead_code` warning (an error here, denied).
#![deny(dead_code)]

use idem::idempotent;

#[idempotent(key = order)]
async fn never_called(order: String) -> Result<u32, idem::Error> {
    Ok(order.len() as u32)
}

fn main() {}
