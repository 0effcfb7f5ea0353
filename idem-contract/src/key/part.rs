//! [`KeyPart`]: what can be a key or a scope, and how each such type
//! writes itself into a [`KeyHasher`].

use super::{KeyHasher, hex};

/// A value that can be (part of) an idempotency key or a scope.
///
/// Implemented for `str`, `String`, the integer types, `bool`, byte slices,
/// `uuid::Uuid` (feature `uuid`), references to these and
/// tuples of up to eight of them. Each part is written tagged and
/// length-prefixed, so `("ab", "c")` and `("a", "bc")` are different keys.
/// Integers are widened first, so `42u32` and `42u64` are the same key.
///
/// ```
/// use idem_contract::key::RecordKey;
///
/// let a = RecordKey::new(&("payments", 7u64), &"order-1");
/// let b = RecordKey::new(&("payments", 7u32), &"order-1");
/// assert_eq!(a, b);
/// assert_ne!(a, RecordKey::new(&("payments", 8u64), &"order-1"));
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be used as an idempotency key or scope",
    label = "this is not a key part",
    note = "keys and scopes are strings, integers, byte slices, `uuid::Uuid` (feature `uuid`), references to these or tuples of them; convert the value, e.g. with `.to_string()`, or derive the key from the parameters by leaving `key` out"
)]
pub trait KeyPart {
    /// Writes this part into the key hasher.
    fn write_key(&self, hasher: &mut KeyHasher);

    /// Writes a human-readable form, used for scopes in logs and errors.
    /// Keys are never displayed; only a short hash of them is.
    fn describe(&self, out: &mut String);
}

impl KeyPart for str {
    fn write_key(&self, hasher: &mut KeyHasher) {
        hasher.write_bytes(self.as_bytes());
    }
    fn describe(&self, out: &mut String) {
        out.push_str(self);
    }
}

impl KeyPart for String {
    fn write_key(&self, hasher: &mut KeyHasher) {
        self.as_str().write_key(hasher);
    }
    fn describe(&self, out: &mut String) {
        out.push_str(self);
    }
}

impl KeyPart for [u8] {
    fn write_key(&self, hasher: &mut KeyHasher) {
        hasher.write_bytes(self);
    }
    fn describe(&self, out: &mut String) {
        out.push_str(&hex(self));
    }
}

impl<const N: usize> KeyPart for [u8; N] {
    fn write_key(&self, hasher: &mut KeyHasher) {
        self.as_slice().write_key(hasher);
    }
    fn describe(&self, out: &mut String) {
        self.as_slice().describe(out);
    }
}

impl KeyPart for Vec<u8> {
    fn write_key(&self, hasher: &mut KeyHasher) {
        self.as_slice().write_key(hasher);
    }
    fn describe(&self, out: &mut String) {
        self.as_slice().describe(out);
    }
}

impl KeyPart for bool {
    fn write_key(&self, hasher: &mut KeyHasher) {
        hasher.write_bool(*self);
    }
    fn describe(&self, out: &mut String) {
        out.push_str(if *self { "true" } else { "false" });
    }
}

macro_rules! key_part_int {
    ($write:ident as $wide:ty: $($ty:ty),*) => {$(
        impl KeyPart for $ty {
            fn write_key(&self, hasher: &mut KeyHasher) {
                hasher.$write(<$wide>::from(*self));
            }
            fn describe(&self, out: &mut String) {
                out.push_str(&self.to_string());
            }
        }
    )*};
}

key_part_int!(write_u128 as u128: u8, u16, u32, u64, u128);
key_part_int!(write_i128 as i128: i8, i16, i32, i64, i128);

impl KeyPart for usize {
    fn write_key(&self, hasher: &mut KeyHasher) {
        (*self as u64).write_key(hasher);
    }
    fn describe(&self, out: &mut String) {
        out.push_str(&self.to_string());
    }
}

impl KeyPart for isize {
    fn write_key(&self, hasher: &mut KeyHasher) {
        (*self as i64).write_key(hasher);
    }
    fn describe(&self, out: &mut String) {
        out.push_str(&self.to_string());
    }
}

#[cfg(feature = "uuid")]
impl KeyPart for uuid::Uuid {
    fn write_key(&self, hasher: &mut KeyHasher) {
        hasher.write_bytes(self.as_bytes());
    }
    fn describe(&self, out: &mut String) {
        out.push_str(&self.to_string());
    }
}

impl<T: KeyPart + ?Sized> KeyPart for &T {
    fn write_key(&self, hasher: &mut KeyHasher) {
        (**self).write_key(hasher);
    }
    fn describe(&self, out: &mut String) {
        (**self).describe(out);
    }
}

impl<T: KeyPart + ?Sized> KeyPart for Box<T> {
    fn write_key(&self, hasher: &mut KeyHasher) {
        (**self).write_key(hasher);
    }
    fn describe(&self, out: &mut String) {
        (**self).describe(out);
    }
}

impl<T: KeyPart + ?Sized> KeyPart for std::sync::Arc<T> {
    fn write_key(&self, hasher: &mut KeyHasher) {
        (**self).write_key(hasher);
    }
    fn describe(&self, out: &mut String) {
        (**self).describe(out);
    }
}

macro_rules! key_part_tuple {
    ($len:expr => $($name:ident)+) => {
        impl<$($name: KeyPart),+> KeyPart for ($($name,)+) {
            #[allow(non_snake_case)]
            fn write_key(&self, hasher: &mut KeyHasher) {
                let ($($name,)+) = self;
                hasher.write_tuple_header($len);
                $($name.write_key(hasher);)+
            }
            #[allow(non_snake_case)]
            fn describe(&self, out: &mut String) {
                let ($($name,)+) = self;
                let mut first = true;
                $(
                    if !std::mem::take(&mut first) {
                        out.push('/');
                    }
                    $name.describe(out);
                )+
                let _ = first;
            }
        }
    };
}

key_part_tuple!(1 => A);
key_part_tuple!(2 => A B);
key_part_tuple!(3 => A B C);
key_part_tuple!(4 => A B C D);
key_part_tuple!(5 => A B C D E);
key_part_tuple!(6 => A B C D E F);
key_part_tuple!(7 => A B C D E F G);
key_part_tuple!(8 => A B C D E F G H);
