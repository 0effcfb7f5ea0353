//! Keys and scopes: independence, child keys, the empty key.

use idem::{Error, Idempotency, child_key};

use crate::support::{AppError, scope};

/// The same key in two scopes is two records.
pub async fn scopes_are_independent(idem: Idempotency) {
    let (a, b) = (scope("a"), scope("b"));
    let one: Result<u8, Error> = idem.call(&a, "same").run(|| async { Ok(1) }).await;
    let two: Result<u8, Error> = idem.call(&b, "same").run(|| async { Ok(2) }).await;
    assert_eq!((one.unwrap(), two.unwrap()), (1, 2));
    let tuple: Result<u8, Error> = idem
        .call(&(a.as_str(), 1u32), "same")
        .run(|| async { Ok(3) })
        .await;
    assert_eq!(tuple.unwrap(), 3);
}

/// `child_key` gives the same key on every attempt of a call, another
/// for another key, and none outside a body.
pub async fn child_key_is_stable_across_retries(idem: Idempotency) {
    let scope = scope("child");
    let mut seen = Vec::new();
    for _ in 0..2 {
        let out: Result<u8, AppError> = idem
            .call(&scope, "k")
            .run(|| async {
                seen.push(child_key("gateway").expect("inside a body"));
                Err(AppError::Timeout)
            })
            .await;
        assert!(out.is_err());
    }
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0], seen[1]);
    let other: Result<String, Error> = idem
        .call(&scope, "k2")
        .run(|| async { Ok(child_key("gateway").unwrap()) })
        .await;
    assert_ne!(other.unwrap(), seen[0]);
    assert_eq!(child_key("gateway"), None);
}

/// An empty key is `InvalidKey`, before any claim.
pub async fn empty_key_is_refused(idem: Idempotency) {
    let out: Result<u8, Error> = idem
        .call(&scope("empty"), "")
        .run(|| async { panic!("must not run") })
        .await;
    assert!(matches!(out, Err(Error::InvalidKey(_))), "{out:?}");
}
