//! What `#[idempotent]` expands to. Not public API: names here may change
//! in any release.
//!
//! The checks are traits, each with a person-readable
//! `#[diagnostic::on_unimplemented]`, called from the generated body with
//! the span of the user's own token (the `Ok` type, the error type, a
//! parameter, an option's value), so each mistake is one error, in the
//! right place, and the checks work in generic fns and impl blocks.
//!
//! The checks live in `private/checks.rs`, the parameters' digest in
//! `private/params.rs`.
//!
//! The bounds on the user's types are where-clauses of [`run`] and [`bail`]
//! (not of a separate check, which rustc would report a second time at
//! the runtime's call), named with the user's tokens in the turbofish:
//! rustc points an unmet bound at the generic argument that fails it, and
//! reports one predicate at one span once. A trait with a blanket impl over
//! another trait shows its own message when the unmet bound is a
//! where-clause on the same type.

pub use core::concat;
pub use core::convert::From;
pub use core::module_path;
pub use core::option::Option;
pub use core::result::Result;
pub use core::time::Duration;

#[path = "private/checks.rs"]
mod checks;
#[path = "private/params.rs"]
mod params;

pub use checks::*;
pub use params::{Derived, ParamDigest};

use crate::call::Run;
pub use crate::call::{Failed, Takeover};
pub use crate::call_site;
pub use crate::key::DerivedKey;
pub use crate::observe::SiteLabels;
use crate::place::Place;
use crate::{Call, CodecError, ErrorPolicy, Reconcile};
pub use crate::{Error, Idempotency, Mismatch, installed, replay_errors};

// The attribute's registration in `testing::sites`: a static `Site` with
// the feature, nothing without it. The macro crate cannot see this crate's
// features, so it always emits `register_site!` and this chooses.
#[cfg(feature = "testing")]
pub use crate::__idem_register_site as register_site;
#[cfg(feature = "testing")]
pub use crate::testing::sites::{SITES, Setting as SiteSetting, Site, SiteParts};
#[cfg(feature = "testing")]
pub use linkme;

#[cfg(not(feature = "testing"))]
pub use crate::__idem_no_site as register_site;

/// Without the `testing` feature the attribute registers nothing.
#[cfg(not(feature = "testing"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __idem_no_site {
    ($($tokens:tt)*) => {};
}

/// The error type, checked where it is written (`E: From<idem::Error>`):
/// the conversion travels as a value, so the runtime's future asks nothing
/// of `E` and an unmet bound is not reported again where it is awaited.
pub struct ErrorType<E> {
    from_idem: fn(Error) -> E,
}

impl<E> std::fmt::Debug for ErrorType<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ErrorType")
            .field("type", &std::any::type_name::<E>())
            .finish_non_exhaustive()
    }
}

pub fn error_type<E: IdempotentError>() -> ErrorType<E> {
    ErrorType { from_idem: E::from }
}

/// Runs the body of an `#[idempotent]` fn: the call, set up with the
/// public settings (`.detach()`, `.reconcile(…)`), run where it is set to
/// run as [`Call::run_apart`] runs it. The macro names `Ret` and `T` with
/// the user's tokens and spans the call there, so an unmet bound is
/// reported at the user's type, once. An async fn's future carries its
/// where-clauses, so this one has none on `E` (see [`ErrorType`]).
///
/// The body is handed a [`Takeover`] when the call (set with
/// `.reconcile(ReconcileInBody)`) takes over a vanished holder's claim: it
/// asks `reconcile = …` itself, with the parameters it owns.
pub async fn run<Ret, T, E, P, R, W, F, Fut>(
    call: Call<P, R, W>,
    errors: ErrorType<E>,
    body: F,
) -> Ret
where
    Ret: IdempotentReturn<Ok = T, Err = E>,
    T: StoredOk + ReplayedOk,
    P: ErrorPolicy<E>,
    F: FnOnce(Option<Takeover>) -> Fut,
    Fut: Future<Output = Ret>,
    W: Place<P, R, T, E, Attribute<F, Ret, T, E>>,
{
    let ran = W::launch(call, Attribute::new(body, Ret::into_result)).await;
    Ret::from_result(
        ran.result
            .map_err(|failed| failed.into_error(errors.from_idem)),
    )
}

/// The attribute's body: handed the takeover, if the call reconciles, and
/// answering the fn's own return type, turned into a `Result` by
/// `into_result` (made where `Ret: IdempotentReturn` is checked, so that a
/// return type that is not a `Result` is reported once).
pub struct Attribute<F, Ret, T, E> {
    body: F,
    into_result: fn(Ret) -> Result<T, E>,
    reconciles: bool,
}

impl<F, Ret, T, E> std::fmt::Debug for Attribute<F, Ret, T, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attribute")
            .field("reconciles", &self.reconciles)
            .finish_non_exhaustive()
    }
}

impl<F, Ret, T, E> Attribute<F, Ret, T, E> {
    fn new(body: F, into_result: fn(Ret) -> Result<T, E>) -> Self {
        Attribute {
            body,
            into_result,
            reconciles: false,
        }
    }

    /// Whether a takeover is handed to the body: the call's reconcile set.
    pub(crate) fn reconciling(mut self, reconciles: bool) -> Self {
        self.reconciles = reconciles;
        self
    }
}

/// The attribute's body closure: handed the takeover, answering `Ret`
/// (a name for that bound, as [`Body`](crate::Body) is).
pub trait AttributeBody<Ret>:
    FnOnce(Option<Takeover>) -> <Self as AttributeBody<Ret>>::Future
{
    /// The body's future.
    type Future: Future<Output = Ret>;
}

impl<Ret, F, Fut> AttributeBody<Ret> for F
where
    F: FnOnce(Option<Takeover>) -> Fut,
    Fut: Future<Output = Ret>,
{
    type Future = Fut;
}

impl<T, E, F, Ret> Run<T, E> for Attribute<F, Ret, T, E>
where
    F: AttributeBody<Ret>,
{
    fn reconciles(&self) -> bool {
        self.reconciles
    }

    async fn start(self, takeover: Option<Takeover>) -> Result<T, E> {
        (self.into_result)((self.body)(takeover).await)
    }
}

/// `reconcile = …`: the call reconciles, and its body asks the reconcile
/// when handed a [`Takeover`]. As a reconcile of the public path it would
/// find nothing (`Ok(None)`): only the attribute's body asks it.
#[derive(Debug, Clone, Copy)]
pub struct ReconcileInBody;

impl<T, E> Reconcile<T, E> for ReconcileInBody {
    type Future = core::future::Ready<Result<Option<T>, E>>;

    fn is_set(&self) -> bool {
        true
    }

    fn start(self) -> Self::Future {
        core::future::ready(Ok(None))
    }
}

/// idem's own error, before the body runs, as the fn's return type.
pub fn bail<R: IdempotentReturn>(errors: ErrorType<R::Err>, error: Error) -> R {
    R::from_result(Err((errors.from_idem)(error)))
}

/// An error policy that stores errors, made where `E: StoredError + ReplayedError` is
/// checked (at the user's `errors = …`), so the runtime asks nothing more
/// of `E` and a missing `Serialize` is reported once.
pub struct CheckedPolicy<E> {
    stores: fn(&E) -> bool,
    encode: fn(&E, usize) -> Result<Vec<u8>, CodecError>,
    decode: fn(&[u8]) -> Result<E, CodecError>,
}

impl<E> std::fmt::Debug for CheckedPolicy<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckedPolicy").finish_non_exhaustive()
    }
}

impl<E> ErrorPolicy<E> for CheckedPolicy<E> {
    fn stores(&self, error: &E) -> bool {
        (self.stores)(error)
    }
    fn record(&self, error: &E, limit: usize) -> Option<Result<Vec<u8>, CodecError>> {
        (self.stores)(error).then(|| (self.encode)(error, limit))
    }
    fn decode(&self, record: &[u8]) -> Result<E, CodecError> {
        (self.decode)(record)
    }
}

/// `errors = "replay"`.
pub fn replay<E: StoredError + ReplayedError>() -> CheckedPolicy<E> {
    store_if(|_| true)
}

/// `errors = path`: `path` is a `fn(&E) -> bool`.
pub fn store_if<E: StoredError + ReplayedError>(predicate: fn(&E) -> bool) -> CheckedPolicy<E> {
    CheckedPolicy {
        stores: predicate,
        encode: crate::policy::encode_error::<E>,
        decode: crate::policy::decode_error::<E>,
    }
}
