// Pins: an `Ok` type with a non-'static lifetime (`Cow<'a, str>`) is an
// error at the lifetime.
use std::borrow::Cow;

use idem::idempotent;

#[idempotent]
async fn charge<'a>(order: &'a str) -> Result<Cow<'a, str>, idem::Error> {
    Ok(Cow::Borrowed(order))
}

fn main() {}
