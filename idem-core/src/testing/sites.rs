//! [`sites`]: every `#[idempotent]` function linked into the binary.
//!
//! Each attribute registers one static [`Site`] in a `linkme` distributed
//! slice: the linker gathers them, and a call does no work for it.

use std::time::Duration;

use crate::{DEFAULT_LEASE, DEFAULT_TTL};

/// The slice the attribute's registrations are linked into.
#[linkme::distributed_slice]
// `linkme` places each element with `#[link_section]`, which the
// `unsafe_code` lint counts; no unsafe code is written here.
#[allow(unsafe_code)]
pub static SITES: [Site];

/// Every `#[idempotent]` function linked into this binary, sorted by
/// path: an inventory of the mutating entry points, for a test that
/// asserts coverage or a generated table.
///
/// ```
/// use idem::idempotent;
///
/// #[idempotent(key = order_id, scope = "payments", ttl = "24h", wait = "2s", tombstone = "30d")]
/// async fn refund_order(order_id: &str) -> Result<u64, idem::Error> {
///     Ok(1200)
/// }
///
/// let site = idem::testing::sites()
///     .into_iter()
///     .find(|site| site.path().ends_with("::refund_order"))
///     .unwrap();
/// assert_eq!(site.key(), Some("order_id"));
/// assert_eq!(site.scope(), Some("\"payments\""));
/// assert_eq!(site.ttl(), Some(std::time::Duration::from_secs(24 * 3600)));
/// assert_eq!(site.wait(), Some(std::time::Duration::from_secs(2)));
/// assert_eq!(site.tombstone(), Some(std::time::Duration::from_secs(30 * 24 * 3600)));
/// assert_eq!(site.errors(), "release");
/// assert!(!site.detach());
/// ```
pub fn sites() -> Vec<&'static Site> {
    let mut sites: Vec<&'static Site> = SITES.iter().collect();
    sites.sort_by_key(|site| site.path);
    sites
}

/// One `#[idempotent]` function: its path, and its options as written.
#[derive(Debug)]
pub struct Site {
    path: &'static str,
    scope: Option<&'static str>,
    key: Option<&'static str>,
    fingerprint: Option<&'static str>,
    ttl: Setting,
    lease: Setting,
    wait: Setting,
    tombstone: Setting,
    errors: &'static str,
    detach: bool,
}

/// A duration option as the attribute was given it.
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub enum Setting {
    Absent,
    Literal(Duration),
    Expr(&'static str),
}

impl Setting {
    fn or(self, default: Duration) -> Option<Duration> {
        match self {
            Setting::Absent => Some(default),
            Setting::Literal(value) => Some(value),
            Setting::Expr(_) => None,
        }
    }
}

/// What the attribute's registration fills in (its fields are the
/// attribute's options).
#[doc(hidden)]
#[derive(Debug)]
pub struct SiteParts {
    pub path: &'static str,
    pub scope: Option<&'static str>,
    pub key: Option<&'static str>,
    pub fingerprint: Option<&'static str>,
    pub ttl: Setting,
    pub lease: Setting,
    pub wait: Setting,
    pub tombstone: Setting,
    pub errors: &'static str,
    pub detach: bool,
}

impl Site {
    #[doc(hidden)]
    pub const fn new(parts: SiteParts) -> Self {
        let SiteParts {
            path,
            scope,
            key,
            fingerprint,
            ttl,
            lease,
            wait,
            tombstone,
            errors,
            detach,
        } = parts;
        Self {
            path,
            scope,
            key,
            fingerprint,
            ttl,
            lease,
            wait,
            tombstone,
            errors,
            detach,
        }
    }

    /// The function's path: `module_path!()::name`.
    pub fn path(&self) -> &'static str {
        self.path
    }

    /// The `scope` expression as written; `None` when absent (the scope is
    /// then [`path`](Self::path)).
    pub fn scope(&self) -> Option<&'static str> {
        self.scope
    }

    /// The `key` expression as written; `None` when absent (the key is
    /// derived from every parameter not skipped).
    pub fn key(&self) -> Option<&'static str> {
        self.key
    }

    /// The `fingerprint` expression as written (`"false"` when disabled);
    /// `None` when absent (derived from every parameter not skipped).
    pub fn fingerprint(&self) -> Option<&'static str> {
        self.fingerprint
    }

    /// How long a result is replayed: the literal, [`DEFAULT_TTL`] when
    /// absent, `None` when an expression decides it at run time.
    pub fn ttl(&self) -> Option<Duration> {
        self.ttl.or(DEFAULT_TTL)
    }

    /// The claim's lease: the literal, [`DEFAULT_LEASE`] (shortened to a
    /// literal TTL below it) when absent, `None` when an expression.
    pub fn lease(&self) -> Option<Duration> {
        let default = self
            .ttl()
            .map_or(DEFAULT_LEASE, |ttl| ttl.min(DEFAULT_LEASE));
        self.lease.or(default)
    }

    /// How long a duplicate waits for a running call: the literal, zero
    /// when absent, `None` when an expression.
    pub fn wait(&self) -> Option<Duration> {
        self.wait.or(Duration::ZERO)
    }

    /// How long a tombstone outlives the record: the literal, `Some(ZERO)`
    /// when absent (no tombstone), `None` when an expression.
    pub fn tombstone(&self) -> Option<Duration> {
        self.tombstone.or(Duration::ZERO)
    }

    /// The error policy as written: `"release"` (also when absent),
    /// `"replay"`, or the predicate's path.
    pub fn errors(&self) -> &'static str {
        self.errors
    }

    /// Whether the body runs on when its caller goes away (`detach`).
    pub fn detach(&self) -> bool {
        self.detach
    }
}

/// The attribute's registration: one static `Site` in [`SITES`], or
/// nothing without the `testing` feature (see `private.rs`).
#[doc(hidden)]
#[macro_export]
macro_rules! __idem_register_site {
    ($($field:ident: $value:expr),* $(,)?) => {
        #[$crate::__private::linkme::distributed_slice($crate::__private::SITES)]
        #[linkme(crate = $crate::__private::linkme)]
        static __IDEM_SITE: $crate::__private::Site =
            $crate::__private::Site::new($crate::__private::SiteParts { $($field: $value),* });
    };
}
