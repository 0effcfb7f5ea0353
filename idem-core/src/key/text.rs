//! [`ScopeText`]: a call's scope as text, for its errors and logs.

use std::cell::RefCell;
use std::fmt;
use std::sync::Arc;

use super::KeyPart;

/// Scopes up to this many bytes are kept inline, without an allocation.
const INLINE: usize = 22;

/// The human-readable form of a call's scope. Every call makes one, and
/// most only read it if something goes wrong, so a short one (the usual
/// `"payments"` or `"orders/acme"`) is kept inline and a longer one is
/// shared: a copy, for the renewer or the steps, never allocates.
#[derive(Clone)]
pub(crate) enum ScopeText {
    Inline { len: u8, bytes: [u8; INLINE] },
    Shared(Arc<str>),
}

thread_local! {
    /// Where scopes are described before being kept: `KeyPart::describe`
    /// writes into a `String`, and this one keeps its capacity.
    static SCRATCH: RefCell<String> = const { RefCell::new(String::new()) };
}

/// A scratch string longer than this is not kept for the next call.
const SCRATCH_KEPT: usize = 256;

impl ScopeText {
    /// The text of `scope`.
    pub(crate) fn of<S: KeyPart + ?Sized>(scope: &S) -> Self {
        let scratched = SCRATCH.try_with(|scratch| {
            let mut text = scratch.try_borrow_mut().ok()?;
            text.clear();
            scope.describe(&mut text);
            let kept = Self::from(text.as_str());
            if text.capacity() > SCRATCH_KEPT {
                *text = String::new();
            }
            Some(kept)
        });
        // No scratch: the thread's locals are being destroyed, or a
        // `describe` itself makes a call. Described apart.
        match scratched {
            Ok(Some(kept)) => kept,
            _ => Self::from(super::describe(scope).as_str()),
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        match self {
            ScopeText::Inline { len, bytes } => {
                // Copied from a `str` whole: always UTF-8.
                std::str::from_utf8(&bytes[..usize::from(*len)]).unwrap_or_default()
            }
            ScopeText::Shared(text) => text,
        }
    }
}

impl From<&str> for ScopeText {
    fn from(text: &str) -> Self {
        if text.len() > INLINE {
            return ScopeText::Shared(text.into());
        }
        let mut bytes = [0; INLINE];
        bytes[..text.len()].copy_from_slice(text.as_bytes());
        ScopeText::Inline {
            len: text.len() as u8,
            bytes,
        }
    }
}

impl fmt::Display for ScopeText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for ScopeText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_and_long_scopes_read_back() {
        for scope in [
            "",
            "payments",
            "é",
            &"x".repeat(INLINE),
            &"y".repeat(INLINE + 1),
        ] {
            let text = ScopeText::of(scope);
            assert_eq!(text.as_str(), scope);
            assert_eq!(text.clone().to_string(), scope);
            assert_eq!(
                matches!(text, ScopeText::Inline { .. }),
                scope.len() <= INLINE
            );
        }
        assert_eq!(ScopeText::of(&("orders", 7u8)).as_str(), "orders/7");
    }
}
