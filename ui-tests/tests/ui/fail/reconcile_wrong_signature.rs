use idem::idempotent;

/// Answers the value, not whether there is one: `Option` is missing.
async fn booked(order: &String) -> Result<u32, idem::Error> {
    Ok(order.len() as u32)
}

#[idempotent(key = order, reconcile = booked)]
async fn charge(order: String) -> Result<u32, idem::Error> {
    Ok(order.len() as u32)
}

fn main() {}
