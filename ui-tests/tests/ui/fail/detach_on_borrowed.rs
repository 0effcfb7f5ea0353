// Pins: a call on a borrowed store cannot be detached (its body could
// outlive the borrow): `detach` is not a method of such a call, in either
// order of the settings.
fn main() {
    let idem = idem::Idempotency::new(idem::MemoryStore::new());
    let borrowed = idem::MemoryStore::new();
    let _ = idem.call("demo", "k").on(&borrowed).detach();
    let _ = idem.call("demo", "k").detach().on(&borrowed);
}
