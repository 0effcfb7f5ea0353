// Pins: `skip(x)` naming no parameter is an error at `x`, listing the
// parameters.
use idem::idempotent;

#[idempotent(skip(pol))]
async fn charge(pool: u32, order: String) -> Result<u64, idem::Error> {
    Ok(order.len() as u64 + u64::from(pool))
}

fn main() {}
