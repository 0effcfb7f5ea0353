//! The HTTP layer's record of a request, from what its client sent: the
//! layer's own key derivation (`idem::http::record_key`), so the two never
//! disagree.

use http::{HeaderMap, HeaderName, HeaderValue, Method, header};
use idem::http::{credential_principal, record_key as layer_key};
use idem::key::RecordKey;

use crate::Failure;
use crate::args::Which;

/// The record key of `request` ('METHOD ROUTE') with `key` and the
/// credentials `which` gives, and how to describe it in messages.
pub(crate) fn record_key(
    request: &str,
    key: &str,
    which: &Which,
) -> Result<(RecordKey, String), Failure> {
    let (method, route) = method_and_route(request)?;
    let principal = match &which.principal {
        Some(principal) => Some(principal.clone()),
        None => credentials(&which.header, &which.cookie)?,
    };
    let caller = match (&which.principal, &principal) {
        (Some(given), _) => format!("the principal {given:?}"),
        (None, Some(_)) => "the credentials given".to_owned(),
        (None, None) => "an anonymous caller".to_owned(),
    };
    let described = format!("{method} {route} with key {key:?} from {caller}");
    let record = layer_key(&method, route, principal.as_deref(), key);
    Ok((record, described))
}

fn method_and_route(request: &str) -> Result<(Method, &str), Failure> {
    let usage = || {
        Failure::usage(format!(
            "--http takes a method and a route, e.g. 'POST /orders', not `{request}`"
        ))
    };
    let (method, route) = request.trim().split_once(' ').ok_or_else(usage)?;
    let route = route.trim();
    if !route.starts_with('/') {
        return Err(usage());
    }
    let method = Method::from_bytes(method.as_bytes()).map_err(|_| usage())?;
    Ok((method, route))
}

/// The principal the layer's default rule derives from these headers and
/// cookies, hashed in the order given.
fn credentials(headers: &[String], cookies: &[String]) -> Result<Option<String>, Failure> {
    let mut map = HeaderMap::new();
    let mut names: Vec<HeaderName> = Vec::new();
    for given in headers {
        let bad = || Failure::usage(format!("--header takes 'NAME: VALUE', not `{given}`"));
        let (name, value) = given.split_once(':').ok_or_else(bad)?;
        let name = HeaderName::from_bytes(name.trim().as_bytes()).map_err(|_| bad())?;
        let value = HeaderValue::from_str(value.trim()).map_err(|_| bad())?;
        if !names.contains(&name) {
            names.push(name.clone());
        }
        map.append(name, value);
    }
    let mut cookie_names = Vec::new();
    for given in cookies {
        let bad = || Failure::usage(format!("--cookie takes NAME=VALUE, not `{given}`"));
        let (name, value) = given.split_once('=').ok_or_else(bad)?;
        let pair = HeaderValue::from_str(&format!("{}={}", name.trim(), value.trim()));
        map.append(header::COOKIE, pair.map_err(|_| bad())?);
        if !cookie_names.contains(&name.trim()) {
            cookie_names.push(name.trim());
        }
    }
    Ok(credential_principal(&map, &names, &cookie_names))
}
