//! The call site of the layer's calls: `METHOD /route`, so `idem list`
//! and the metrics' `site` label name what a record is for.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, PoisonError};

use idem_core::CallSite;

/// Sites are leaked to be `'static` (metrics keys borrow them), so at
/// most this many are made in a process; later routes share [`OTHER`].
const MAX_SITES: usize = 256;

/// The site of routes past [`MAX_SITES`].
static OTHER: &CallSite = idem_core::call_site!("http");

/// The site named `METHOD /route` (the route as matched, e.g.
/// `/orders/{id}`, else the path).
pub(crate) fn site(route_key: &str) -> &'static CallSite {
    static SITES: OnceLock<Mutex<HashMap<String, &'static CallSite>>> = OnceLock::new();
    let mut sites = SITES
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some(site) = sites.get(route_key) {
        return site;
    }
    if sites.len() >= MAX_SITES {
        return OTHER;
    }
    let site = CallSite::leak(route_key);
    sites.insert(route_key.to_owned(), site);
    site
}
