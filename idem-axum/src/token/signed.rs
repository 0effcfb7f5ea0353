//! A token's bytes: version, expiry (milliseconds since the Unix epoch,
//! big-endian) and a random nonce, then their HMAC-SHA256 over a domain,
//! the body and the principal; written as unpadded base64url.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;

use super::TokenError;

pub(super) type HmacSha256 = Hmac<Sha256>;

/// The token layout's version, its first byte.
const VERSION: u8 = 1;
const NONCE_BYTES: usize = 16;
/// Version, expiry (milliseconds since the Unix epoch, big-endian), nonce.
const BODY_BYTES: usize = 1 + 8 + NONCE_BYTES;
const TAG_BYTES: usize = 32;
const RAW_BYTES: usize = BODY_BYTES + TAG_BYTES;
/// `RAW_BYTES` in unpadded base64url.
pub(super) const TOKEN_CHARS: usize = (RAW_BYTES * 4).div_ceil(3);
/// Signed before the token, so no other HMAC of these secrets verifies.
const DOMAIN: &[u8] = b"idem/http/token/v1";

/// A new token for `principal`, signed with `secret`, expiring `ttl` from
/// now.
pub(super) fn seal(secret: &HmacSha256, ttl: Duration, principal: &[u8]) -> String {
    let expiry = now_millis().saturating_add(millis(ttl));
    let mut raw = [0u8; RAW_BYTES];
    raw[0] = VERSION;
    raw[1..9].copy_from_slice(&expiry.to_be_bytes());
    rand::rng().fill_bytes(&mut raw[9..BODY_BYTES]);
    let tag = sign(secret, &raw[..BODY_BYTES], principal).finalize();
    raw[BODY_BYTES..].copy_from_slice(&tag.into_bytes());
    URL_SAFE_NO_PAD.encode(raw)
}

/// Checks `token` for `principal`: signed by one of `secrets` (compared in
/// constant time) and not expired.
pub(super) fn open(
    secrets: &[HmacSha256],
    token: &str,
    principal: &[u8],
) -> Result<(), TokenError> {
    let raw = decode(token).ok_or(TokenError::Invalid)?;
    let (body, tag) = raw.split_at(BODY_BYTES);
    if body[0] != VERSION {
        return Err(TokenError::Invalid);
    }
    let signed = secrets
        .iter()
        .any(|secret| sign(secret, body, principal).verify_slice(tag).is_ok());
    if !signed {
        return Err(TokenError::Invalid);
    }
    let mut expiry = [0u8; 8];
    expiry.copy_from_slice(&body[1..9]);
    if now_millis() >= u64::from_be_bytes(expiry) {
        return Err(TokenError::Expired);
    }
    Ok(())
}

pub(super) fn keyed(secret: &[u8]) -> HmacSha256 {
    // HMAC takes keys of any length: this never fails.
    <HmacSha256 as Mac>::new_from_slice(secret).expect("HMAC accepts any key length")
}

fn sign(secret: &HmacSha256, body: &[u8], principal: &[u8]) -> HmacSha256 {
    let mut mac = secret.clone();
    mac.update(DOMAIN);
    // The body has a fixed length, so the principal after it is unambiguous.
    mac.update(body);
    mac.update(principal);
    mac
}

/// The token's bytes, if it is a token's length of canonical base64url.
fn decode(token: &str) -> Option<Vec<u8>> {
    if token.len() != TOKEN_CHARS {
        return None;
    }
    URL_SAFE_NO_PAD
        .decode(token)
        .ok()
        .filter(|raw| raw.len() == RAW_BYTES)
}

fn now_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, millis)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
