//! Whose requests share records: the principal in a request key's scope,
//! by default a hash of the request's credentials.

use std::fmt;
use std::sync::Arc;

use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName, header};
use sha2::{Digest, Sha256};

use crate::IdempotencyLayer;

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
pub(crate) fn credential_hash(
    map: &HeaderMap,
    headers: &[HeaderName],
    cookies: &[String],
) -> Option<String> {
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

/// The principal settings of [`IdempotencyLayer`]: whose requests share
/// records.
impl IdempotencyLayer {
    /// Who sends the request, as part of the key's scope: two principals
    /// using the same key never see each other's responses. Typically reads
    /// what an authentication layer (placed outside this one) put into the
    /// request's extensions. `None` is the anonymous principal. Replaces the
    /// default, which scopes keys by a hash of the request's credentials
    /// ([`principal_headers`](Self::principal_headers)).
    ///
    /// ```
    /// #[derive(Clone)]
    /// struct User { id: u64 }
    ///
    /// # let layer = idem::http::IdempotencyLayer::new(idem::Idempotency::new(idem::MemoryStore::new()));
    /// let layer = layer.principal(|parts| parts.extensions.get::<User>().map(|u| u.id.to_string()));
    /// ```
    pub fn principal(
        mut self,
        principal: impl Fn(&Parts) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.config_mut().principal = PrincipalRule::custom(principal);
        self
    }

    /// The request headers whose values identify the caller when no
    /// [`principal`](Self::principal) is set. Default: `Authorization`.
    ///
    /// With no `principal`, the layer scopes every key by a SHA-256 hash of
    /// these headers and of the [`principal_cookies`](Self::principal_cookies),
    /// so a caller who reuses (or guesses) another caller's key gets a
    /// record of their own, never the other's response. The raw values are
    /// neither stored nor logged; logs show a short hash. Requests that carry
    /// none of them share the anonymous scope. Replaces a `principal`
    /// function set before.
    ///
    /// ```
    /// # use axum::http::{HeaderName, header};
    /// # let layer = idem::http::IdempotencyLayer::new(idem::Idempotency::new(idem::MemoryStore::new()));
    /// let layer = layer.principal_headers([header::AUTHORIZATION, HeaderName::from_static("x-api-key")]);
    /// ```
    pub fn principal_headers(mut self, names: impl IntoIterator<Item = HeaderName>) -> Self {
        let config = self.config_mut();
        config.principal = config.principal.with_headers(names.into_iter().collect());
        self
    }

    /// Session cookies whose values identify the caller when no
    /// [`principal`](Self::principal) is set, beside the
    /// [`principal_headers`](Self::principal_headers). Name only the
    /// cookies that carry the session: a cookie that changes between a
    /// request and its retry (a tracking id) would make the retry a new
    /// request. Default: none. Replaces a `principal` function set before.
    ///
    /// ```
    /// # let layer = idem::http::IdempotencyLayer::new(idem::Idempotency::new(idem::MemoryStore::new()));
    /// let layer = layer.principal_cookies(["session"]);
    /// ```
    pub fn principal_cookies<N: Into<String>>(
        mut self,
        names: impl IntoIterator<Item = N>,
    ) -> Self {
        let config = self.config_mut();
        config.principal = config
            .principal
            .with_cookies(names.into_iter().map(Into::into).collect());
        self
    }

    /// Opts out of scoping keys by caller: every caller who sends the same
    /// key (and body) to the same route gets the same stored response,
    /// whoever stored it. Only for routes where that is the point, such as
    /// a public endpoint whose responses hold nothing private; anywhere
    /// else it hands one caller's response to another who reuses the key.
    ///
    /// ```
    /// # let layer = idem::http::IdempotencyLayer::new(idem::Idempotency::new(idem::MemoryStore::new()));
    /// let layer = layer.share_keys_across_callers();
    /// ```
    pub fn share_keys_across_callers(mut self) -> Self {
        self.config_mut().principal = PrincipalRule::SharedAcrossCallers;
        self
    }
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
