//! Whose requests share records: the principal in a request key's scope,
//! by default a hash of the request's credentials.

use std::fmt;
use std::sync::Arc;

use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName, header};
use sha2::{Digest, Sha256};

type Principal = dyn Fn(&Parts) -> Option<String> + Send + Sync;

/// The rule behind the principal in a key's scope.
#[derive(Clone)]
pub(crate) enum PrincipalRule {
    /// The default: a hash of the named headers and cookies, so two
    /// credentials never share a record.
    Credentials {
        headers: Vec<HeaderName>,
        cookies: Vec<String>,
    },
    /// The application's own function of the request.
    Custom(Arc<Principal>),
    /// Every caller shares every key.
    SharedAcrossCallers,
}

impl Default for PrincipalRule {
    fn default() -> Self {
        PrincipalRule::Credentials {
            headers: vec![header::AUTHORIZATION],
            cookies: Vec::new(),
        }
    }
}

impl PrincipalRule {
    pub(crate) fn custom(f: impl Fn(&Parts) -> Option<String> + Send + Sync + 'static) -> Self {
        PrincipalRule::Custom(Arc::new(f))
    }

    /// The credential rule with these headers (keeping its cookies).
    pub(crate) fn with_headers(&self, headers: Vec<HeaderName>) -> Self {
        let cookies = match self {
            PrincipalRule::Credentials { cookies, .. } => cookies.clone(),
            _ => Vec::new(),
        };
        PrincipalRule::Credentials { headers, cookies }
    }

    /// The credential rule with these cookies (keeping its headers).
    pub(crate) fn with_cookies(&self, cookies: Vec<String>) -> Self {
        let headers = match self {
            PrincipalRule::Credentials { headers, .. } => headers.clone(),
            _ => vec![header::AUTHORIZATION],
        };
        PrincipalRule::Credentials { headers, cookies }
    }

    /// The principal of a request; `None` is the anonymous one.
    pub(crate) fn of(&self, parts: &Parts) -> Option<String> {
        match self {
            PrincipalRule::Credentials { headers, cookies } => {
                credential_hash(&parts.headers, headers, cookies)
            }
            PrincipalRule::Custom(principal) => principal(parts),
            PrincipalRule::SharedAcrossCallers => None,
        }
    }
}

impl fmt::Debug for PrincipalRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PrincipalRule::Credentials { headers, cookies } => f
                .debug_struct("Credentials")
                .field("headers", headers)
                .field("cookies", cookies)
                .finish(),
            PrincipalRule::Custom(_) => f.write_str("Custom"),
            PrincipalRule::SharedAcrossCallers => f.write_str("SharedAcrossCallers"),
        }
    }
}

/// `credential` and 16 bytes of SHA-256 in hex over the named headers' and
/// cookies' values, or `None` when the request carries none of them. Only
/// this hash reaches the key's scope: it is hashed again into the record
/// key, and the scope's description in logs and errors shows it, never the
/// credential. Each value is length-prefixed and tagged with its name, so
/// no two different credential sets hash alike.
fn credential_hash(map: &HeaderMap, headers: &[HeaderName], cookies: &[String]) -> Option<String> {
    let mut hasher = Sha256::new();
    hasher.update(b"idem/http/credential/v1");
    let mut found = false;
    for name in headers {
        for value in map.get_all(name) {
            found = true;
            feed(
                &mut hasher,
                b'h',
                name.as_str().as_bytes(),
                value.as_bytes(),
            );
        }
    }
    for name in cookies {
        for value in cookie_values(map, name) {
            found = true;
            feed(&mut hasher, b'c', name.as_bytes(), value);
        }
    }
    if !found {
        return None;
    }
    let digest = hasher.finalize();
    let mut out = String::from("credential ");
    for byte in &digest[..16] {
        out.push_str(&format!("{byte:02x}"));
    }
    Some(out)
}

fn feed(hasher: &mut Sha256, tag: u8, name: &[u8], value: &[u8]) {
    hasher.update([tag]);
    for part in [name, value] {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part);
    }
}

/// The values of the cookie `name` in every `Cookie` header (RFC 6265
/// §5.4: `name=value` pairs separated by `; `).
fn cookie_values<'a>(map: &'a HeaderMap, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
    map.get_all(header::COOKIE)
        .iter()
        .flat_map(|value| value.as_bytes().split(|&b| b == b';'))
        .filter_map(move |pair| {
            let pair = pair.trim_ascii();
            let eq = pair.iter().position(|&b| b == b'=')?;
            (pair[..eq].trim_ascii() == name.as_bytes()).then(|| pair[eq + 1..].trim_ascii())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
        map
    }

    #[test]
    fn credentials_hash_apart_and_never_show() {
        let rule = PrincipalRule::default().with_cookies(vec!["session".into()]);
        let of = |pairs: &[(&str, &str)]| {
            let PrincipalRule::Credentials {
                headers: h,
                cookies,
            } = &rule
            else {
                unreachable!()
            };
            credential_hash(&headers(pairs), h, cookies)
        };
        let alice = of(&[("authorization", "Bearer alice-secret")]).unwrap();
        let bob = of(&[("authorization", "Bearer bob-secret")]).unwrap();
        assert_ne!(alice, bob);
        assert!(!alice.contains("alice"));
        assert_eq!(
            of(&[("authorization", "Bearer alice-secret")]).unwrap(),
            alice
        );
        assert_eq!(of(&[("cookie", "theme=dark")]), None);
        let s1 = of(&[("cookie", "theme=dark; session=s1")]).unwrap();
        let s1_again = of(&[("cookie", "session=s1 ; theme=light")]).unwrap();
        assert_eq!(s1, s1_again, "other cookies do not count");
        assert_ne!(s1, of(&[("cookie", "session=s2")]).unwrap());
        assert_eq!(of(&[]), None);
    }
}
