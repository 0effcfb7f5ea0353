//! Token mode: idempotency keys the server issues, signed and bound to the
//! caller, so the key's life is the server's and not the client's
//! randomness. Here the issuer (its settings, its router, the layer's
//! `.tokens`); the token's signed bytes in `signed.rs`, why one is refused
//! in `error.rs`.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use axum::http::request::Parts;
use axum::http::{HeaderName, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};

use crate::IdempotencyLayer;
use crate::principal::PrincipalRule;

mod error;
mod signed;

pub use error::TokenError;
use signed::HmacSha256;

/// The default lifetime of a token: one hour.
pub const DEFAULT_TOKEN_TTL: Duration = Duration::from_secs(3600);

/// Issues idempotency keys (token mode): random, bound to the caller and to
/// an expiry, and signed with HMAC-SHA256, so issuing one writes nothing to
/// any store.
///
/// A form gets a token when it is shown (from [`router`](Self::router), or
/// [`issue_for`](Self::issue_for) while rendering it) and sends it as its
/// `Idempotency-Key`; a double-click or a retry sends the same token. The
/// [`IdempotencyLayer`] with [`tokens`](IdempotencyLayer::tokens) accepts
/// only tokens this issuer made for the request's caller and that have not
/// expired; anything else (a client-made key, a token altered, expired, or
/// issued to someone else) is 400 and the handler does not run. Single use
/// is the record's: the token sent again replays the first answer.
///
/// The caller is found as the layer finds it by default (a hash of the
/// `Authorization` header), or by [`principal`](Self::principal),
/// [`principal_headers`](Self::principal_headers) and
/// [`principal_cookies`](Self::principal_cookies): set them as on the layer,
/// or every token is refused as another caller's. The anonymous caller is
/// the empty principal.
///
/// Secrets: at least 32 random bytes, kept out of the code. To rotate, sign
/// with the new one and [`also_accept`](Self::also_accept) the old one until
/// the tokens it signed have expired, then drop it.
///
/// ```
/// use axum::{Router, routing::post};
/// use idem::http::{IdempotencyLayer, TokenIssuer};
/// use idem::{Idempotency, MemoryStore};
///
/// # let (secret, old_secret) = ("0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210");
/// let issuer = TokenIssuer::new(secret).also_accept(old_secret);
/// let api: Router = Router::new()
///     .route("/orders", post(|| async { "created" }))
///     .layer(IdempotencyLayer::new(Idempotency::new(MemoryStore::new())).tokens(issuer.clone()));
/// // Outside the layer: asking for a token needs no key.
/// let app: Router = api.nest("/tokens", issuer.router());
///
/// let token = issuer.issue(b"");
/// assert!(issuer.verify(&token, b"").is_ok());
/// assert!(issuer.verify(&token, b"someone else").is_err());
/// ```
#[derive(Clone)]
pub struct TokenIssuer {
    inner: Arc<Issuer>,
}

#[derive(Clone)]
struct Issuer {
    /// Keyed MACs, the signing one first.
    secrets: Vec<HmacSha256>,
    ttl: Duration,
    principal: PrincipalRule,
}

impl TokenIssuer {
    /// An issuer signing with `secret`, tokens living [`DEFAULT_TOKEN_TTL`]
    /// (one hour).
    ///
    /// ```
    /// let issuer = idem::http::TokenIssuer::new(b"at least 32 random bytes, not this");
    /// # let _ = issuer;
    /// ```
    pub fn new(secret: impl AsRef<[u8]>) -> Self {
        Self {
            inner: Arc::new(Issuer {
                secrets: vec![signed::keyed(secret.as_ref())],
                ttl: DEFAULT_TOKEN_TTL,
                principal: PrincipalRule::default(),
            }),
        }
    }

    /// Also accepts tokens signed with `secret`, without signing with it:
    /// the previous secret, while a rotation is under way. Tokens it signed
    /// are refused once it is no longer listed.
    ///
    /// ```
    /// let issuer = idem::http::TokenIssuer::new(b"this year's secret, 32+ bytes....")
    ///     .also_accept(b"last year's secret, 32+ bytes....");
    /// # let _ = issuer;
    /// ```
    pub fn also_accept(mut self, secret: impl AsRef<[u8]>) -> Self {
        Arc::make_mut(&mut self.inner)
            .secrets
            .push(signed::keyed(secret.as_ref()));
        self
    }

    /// How long a token is accepted after it is issued. Default: one hour.
    /// A token that has expired is refused (400 `token-expired`) even for a
    /// retry of a request it already made; keep it longer than clients
    /// retry.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let issuer = idem::http::TokenIssuer::new(b"0123456789abcdef0123456789abcdef")
    ///     .ttl(Duration::from_secs(15 * 60));
    /// # let _ = issuer;
    /// ```
    pub fn ttl(mut self, ttl: Duration) -> Self {
        Arc::make_mut(&mut self.inner).ttl = ttl;
        self
    }

    /// Who asks for a token, as [`IdempotencyLayer::principal`] finds it:
    /// give both the same function. `None` is the anonymous caller.
    ///
    /// ```
    /// #[derive(Clone)]
    /// struct User { id: u64 }
    ///
    /// let issuer = idem::http::TokenIssuer::new(b"0123456789abcdef0123456789abcdef")
    ///     .principal(|parts| parts.extensions.get::<User>().map(|u| u.id.to_string()));
    /// # let _ = issuer;
    /// ```
    pub fn principal(
        mut self,
        principal: impl Fn(&Parts) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        Arc::make_mut(&mut self.inner).principal = PrincipalRule::custom(principal);
        self
    }

    /// The credential headers that identify the caller, as
    /// [`IdempotencyLayer::principal_headers`]. Default: `Authorization`.
    ///
    /// ```
    /// # use axum::http::{HeaderName, header};
    /// let issuer = idem::http::TokenIssuer::new(b"0123456789abcdef0123456789abcdef")
    ///     .principal_headers([header::AUTHORIZATION, HeaderName::from_static("x-api-key")]);
    /// # let _ = issuer;
    /// ```
    pub fn principal_headers(mut self, names: impl IntoIterator<Item = HeaderName>) -> Self {
        let inner = Arc::make_mut(&mut self.inner);
        inner.principal = inner.principal.with_headers(names.into_iter().collect());
        self
    }

    /// The session cookies that identify the caller, as
    /// [`IdempotencyLayer::principal_cookies`]. Default: none.
    ///
    /// ```
    /// let issuer = idem::http::TokenIssuer::new(b"0123456789abcdef0123456789abcdef")
    ///     .principal_cookies(["session"]);
    /// # let _ = issuer;
    /// ```
    pub fn principal_cookies<N: Into<String>>(
        mut self,
        names: impl IntoIterator<Item = N>,
    ) -> Self {
        let inner = Arc::make_mut(&mut self.inner);
        inner.principal = inner
            .principal
            .with_cookies(names.into_iter().map(Into::into).collect());
        self
    }

    /// A new token for `principal` (the layer's principal of the caller;
    /// empty for the anonymous one): 76 characters of base64url.
    ///
    /// ```
    /// let issuer = idem::http::TokenIssuer::new(b"0123456789abcdef0123456789abcdef");
    /// let token = issuer.issue(b"user-42");
    /// assert_eq!(token.len(), 76);
    /// assert_ne!(issuer.issue(b"user-42"), token, "random");
    /// ```
    pub fn issue(&self, principal: &[u8]) -> String {
        signed::seal(&self.inner.secrets[0], self.inner.ttl, principal)
    }

    /// A new token for the caller of a request, found as
    /// [`router`](Self::router) finds it: for a page that renders a form
    /// with its token.
    ///
    /// ```
    /// use axum::http::Request;
    ///
    /// let issuer = idem::http::TokenIssuer::new(b"0123456789abcdef0123456789abcdef");
    /// let (parts, ()) = Request::get("/checkout").header("authorization", "Bearer alice").body(()).unwrap().into_parts();
    /// let token = issuer.issue_for(&parts);
    /// assert!(issuer.verify_for(&token, &parts).is_ok());
    /// ```
    pub fn issue_for(&self, parts: &Parts) -> String {
        self.issue(self.principal_of(parts).as_bytes())
    }

    /// Checks a token presented by `principal`: signed by one of this
    /// issuer's secrets for that principal, and not expired. Compares
    /// signatures in constant time.
    ///
    /// ```
    /// use idem::http::{TokenError, TokenIssuer};
    ///
    /// let issuer = TokenIssuer::new(b"0123456789abcdef0123456789abcdef");
    /// let token = issuer.issue(b"alice");
    /// assert_eq!(issuer.verify(&token, b"alice"), Ok(()));
    /// assert_eq!(issuer.verify(&token, b"bob"), Err(TokenError::Invalid));
    /// assert_eq!(issuer.verify("8e03978e-40d5-43e8-bc93-6894a57f9324", b"alice"), Err(TokenError::Invalid));
    /// ```
    pub fn verify(&self, token: &str, principal: &[u8]) -> Result<(), TokenError> {
        signed::open(&self.inner.secrets, token, principal)
    }

    /// [`verify`](Self::verify) for the caller of a request, found as
    /// [`router`](Self::router) finds it.
    ///
    /// ```
    /// use axum::http::Request;
    ///
    /// let issuer = idem::http::TokenIssuer::new(b"0123456789abcdef0123456789abcdef");
    /// let (parts, ()) = Request::post("/orders").body(()).unwrap().into_parts();
    /// assert!(issuer.verify_for("client-made", &parts).is_err());
    /// ```
    pub fn verify_for(&self, token: &str, parts: &Parts) -> Result<(), TokenError> {
        self.verify(token, self.principal_of(parts).as_bytes())
    }

    /// An axum router answering `POST /` with `201 Created` and
    /// `{"token": "…", "expires_in": <seconds>}` for the request's caller.
    /// Nest it outside the [`IdempotencyLayer`] (asking for a token carries
    /// no key) and inside the authentication that sets the principal.
    ///
    /// ```
    /// use axum::Router;
    /// use idem::http::TokenIssuer;
    ///
    /// let issuer = TokenIssuer::new(b"0123456789abcdef0123456789abcdef");
    /// let app: Router = Router::new().nest("/idempotency-tokens", issuer.router());
    /// # use tower::ServiceExt;
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// # let request = axum::http::Request::post("/idempotency-tokens").body(axum::body::Body::empty()).unwrap();
    /// # let response = app.oneshot(request).await.unwrap();
    /// # assert_eq!(response.status(), 201);
    /// # });
    /// ```
    pub fn router<S: Clone + Send + Sync + 'static>(&self) -> Router<S> {
        let issuer = self.clone();
        Router::new().route(
            "/",
            post(move |parts: Parts| std::future::ready(issuer.mint(&parts))),
        )
    }

    fn mint(&self, parts: &Parts) -> Response {
        let body = serde_json::json!({
            "token": self.issue_for(parts),
            "expires_in": self.inner.ttl.as_secs(),
        });
        (
            StatusCode::CREATED,
            [(header::CACHE_CONTROL, "no-store")],
            Json(body),
        )
            .into_response()
    }

    fn principal_of(&self, parts: &Parts) -> String {
        self.inner.principal.of(parts).unwrap_or_default()
    }
}

impl fmt::Debug for TokenIssuer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenIssuer")
            .field("secrets", &self.inner.secrets.len())
            .field("ttl", &self.inner.ttl)
            .field("principal", &self.inner.principal)
            .finish()
    }
}

/// Token mode.
impl IdempotencyLayer {
    /// Accepts only idempotency keys that `issuer` minted for this request's
    /// caller (the layer's principal) and that have not expired; any other
    /// key is answered 400 (`invalid-token`, `token-expired`) before the
    /// body is read, and the handler does not run. See [`TokenIssuer`].
    ///
    /// ```
    /// # use idem::http::{IdempotencyLayer, TokenIssuer};
    /// # let layer = IdempotencyLayer::new(idem::Idempotency::new(idem::MemoryStore::new()));
    /// let layer = layer.tokens(TokenIssuer::new(b"0123456789abcdef0123456789abcdef"));
    /// ```
    pub fn tokens(mut self, issuer: TokenIssuer) -> Self {
        self.config_mut().tokens = Some(issuer);
        self
    }
}

/// The token parser on arbitrary input, for the fuzz target. Only in a
/// fuzzing build (cargo-fuzz sets `--cfg fuzzing`) and this crate's tests.
#[cfg(any(fuzzing, test))]
pub fn fuzz_token(token: &[u8], principal: &[u8]) -> Result<(), TokenError> {
    static ISSUER: std::sync::OnceLock<TokenIssuer> = std::sync::OnceLock::new();
    let issuer = ISSUER.get_or_init(|| TokenIssuer::new(b"fuzz").also_accept(b"old"));
    issuer.verify(&String::from_utf8_lossy(token), principal)
}

#[cfg(test)]
mod tests {
    use rand::RngCore;

    use super::*;

    const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";

    #[test]
    fn a_token_is_bound_to_its_principal_and_secret() {
        let issuer = TokenIssuer::new(SECRET);
        let token = issuer.issue(b"alice");
        assert_eq!(token.len(), signed::TOKEN_CHARS);
        assert_eq!(issuer.verify(&token, b"alice"), Ok(()));
        assert_eq!(issuer.verify(&token, b"alic"), Err(TokenError::Invalid));
        assert_eq!(issuer.verify(&token, b""), Err(TokenError::Invalid));
        let other = TokenIssuer::new(b"another secret");
        assert_eq!(other.verify(&token, b"alice"), Err(TokenError::Invalid));
    }

    #[test]
    fn every_flipped_byte_is_refused() {
        let issuer = TokenIssuer::new(SECRET);
        let token = issuer.issue(b"alice");
        for at in 0..token.len() {
            let mut bytes = token.clone().into_bytes();
            bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
            let forged = String::from_utf8(bytes).unwrap();
            assert_eq!(
                issuer.verify(&forged, b"alice"),
                Err(TokenError::Invalid),
                "byte {at}"
            );
        }
    }

    #[test]
    fn expired_only_when_genuine() {
        let issuer = TokenIssuer::new(SECRET).ttl(Duration::ZERO);
        let token = issuer.issue(b"alice");
        assert_eq!(issuer.verify(&token, b"alice"), Err(TokenError::Expired));
        assert_eq!(issuer.verify(&token, b"bob"), Err(TokenError::Invalid));
    }

    /// Without cargo-fuzz: random bytes and random mutations of a real
    /// token, at every length up to past a token's, are refused, never a
    /// panic. (`scripts/fuzz` runs the same entry under libFuzzer.)
    #[test]
    fn random_input_is_refused_without_panic() {
        let issuer = TokenIssuer::new(SECRET);
        let token = issuer.issue(b"alice").into_bytes();
        let mut rng = rand::rng();
        for round in 0..20_000 {
            let input = if round % 2 == 0 {
                let len = (rng.next_u32() % 90) as usize;
                let mut bytes = vec![0u8; len];
                rng.fill_bytes(&mut bytes);
                bytes
            } else {
                let mut bytes = token.clone();
                let at = (rng.next_u32() as usize) % bytes.len();
                bytes[at] ^= 1 + (rng.next_u32() % 255) as u8;
                bytes
            };
            let text = String::from_utf8_lossy(&input);
            assert!(issuer.verify(&text, b"alice").is_err(), "{text:?}");
            let _ = fuzz_token(&input, b"alice");
        }
    }
}
