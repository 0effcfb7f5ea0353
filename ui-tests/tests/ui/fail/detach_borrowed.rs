// Pins: with `detach` the body outlives its caller, so a borrowed
// parameter or `&self` is one error at that parameter, in plain words
// (`&'static` is not a borrow from the caller and passes).
use idem::idempotent;

struct Shipping;

impl Shipping {
    #[idempotent(key = order_id, detach)]
    async fn ship(&self, order_id: &str, note: Option<&'static str>) -> Result<u32, idem::Error> {
        let _ = note;
        Ok(order_id.len() as u32)
    }
}

#[idempotent(key = order_id, detach)]
async fn label(order_id: String, lines: Vec<&str>) -> Result<u32, idem::Error> {
    Ok((order_id.len() + lines.len()) as u32)
}

fn main() {}
