//! Finding the layer's record of a request from what its client knows,
//! for operators' tools such as `idem inspect --http`.

use axum::http::{HeaderMap, HeaderName, Method};
use idem_core::key::RecordKey;

use crate::principal::credential_hash;
use crate::scope::HttpScope;

/// The key under which [`IdempotencyLayer`](crate::IdempotencyLayer) keeps
/// the record of a request: its method, its matched route (the pattern,
/// such as `/orders/{id}`, or the path where the router has none), its
/// principal and its `Idempotency-Key` (the key's text, without the
/// quotes of its structured-field form).
///
/// `principal` is what the layer's principal rule gives for the request:
/// by default [`credential_principal`] of its credentials; with
/// [`principal(…)`](crate::IdempotencyLayer::principal), that function's
/// answer; `None` for an anonymous request, or with
/// [`share_keys_across_callers`](crate::IdempotencyLayer::share_keys_across_callers).
///
/// ```
/// use idem::http::{credential_principal, record_key};
/// use axum::http::{HeaderMap, Method, header};
///
/// let mut headers = HeaderMap::new();
/// headers.insert(header::AUTHORIZATION, "Bearer alice".parse().unwrap());
/// let principal = credential_principal(&headers, &[header::AUTHORIZATION], &[]);
/// let key = record_key(&Method::POST, "/orders", principal.as_deref(), "ord-a1");
/// println!("idem inspect --record {}", key.to_hex());
/// ```
pub fn record_key(method: &Method, route: &str, principal: Option<&str>, key: &str) -> RecordKey {
    let scope = HttpScope {
        method: method.as_str().to_owned(),
        route: route.to_owned(),
        principal: principal.map(str::to_owned),
    };
    RecordKey::new(&scope, key)
}

/// The principal the layer's default rule derives from a request's
/// credentials: a hash of the values of the headers `names` (in that
/// order, as given to
/// [`principal_headers`](crate::IdempotencyLayer::principal_headers);
/// by default `Authorization` alone) and of the cookies `cookies` (as
/// given to [`principal_cookies`](crate::IdempotencyLayer::principal_cookies))
/// found in `headers`. `None` when the request carries none of them: the
/// anonymous principal.
///
/// ```
/// use idem::http::credential_principal;
/// use axum::http::{HeaderMap, header};
///
/// let mut headers = HeaderMap::new();
/// headers.insert(header::COOKIE, "session=s-1; theme=dark".parse().unwrap());
/// let principal = credential_principal(&headers, &[header::AUTHORIZATION], &["session"]);
/// assert!(principal.unwrap().starts_with("credential "));
/// assert_eq!(credential_principal(&HeaderMap::new(), &[header::AUTHORIZATION], &[]), None);
/// ```
pub fn credential_principal(
    headers: &HeaderMap,
    names: &[HeaderName],
    cookies: &[&str],
) -> Option<String> {
    let cookies: Vec<String> = cookies.iter().map(|name| (*name).to_owned()).collect();
    credential_hash(headers, names, &cookies)
}
