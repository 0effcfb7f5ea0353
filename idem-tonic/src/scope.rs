//! What identifies a call to the layer: its key (the `idempotency-key`
//! metadata), the scope of the key (method path, principal) and the
//! fingerprint of its request message.

use bytes::Bytes;
use http::HeaderMap;
use sha2::{Digest, Sha256};

use idem_core::KeyPart;
use idem_core::fingerprint::{Digester, Fingerprint, FingerprintError};
use idem_core::key::KeyHasher;

use crate::IDEMPOTENCY_KEY;

/// Why a call's key is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BadKey {
    Missing,
    Malformed,
}

/// The call's `idempotency-key`: 1 to 255 bytes of visible ASCII.
pub(crate) fn key_of(headers: &HeaderMap) -> Result<Option<String>, BadKey> {
    let mut values = headers.get_all(IDEMPOTENCY_KEY).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(BadKey::Malformed);
    }
    valid(value.as_bytes()).map(Some)
}

/// A key as the layer accepts it: 1 to 255 bytes of visible ASCII.
pub(crate) fn valid(bytes: &[u8]) -> Result<String, BadKey> {
    let visible = bytes.iter().all(|b| (0x21..=0x7e).contains(b));
    if bytes.is_empty() || bytes.len() > 255 || !visible {
        return Err(BadKey::Malformed);
    }
    Ok(String::from_utf8_lossy(bytes).into_owned())
}

/// The scope of a call's key: the full method path and the principal.
pub(crate) struct GrpcScope {
    pub(crate) path: String,
    pub(crate) principal: Option<String>,
}

impl KeyPart for GrpcScope {
    fn write_key(&self, hasher: &mut KeyHasher) {
        hasher.write_bytes(b"idem/grpc/v1");
        hasher.write_bytes(self.path.as_bytes());
        hasher.write_bool(self.principal.is_some());
        if let Some(principal) = &self.principal {
            hasher.write_bytes(principal.as_bytes());
        }
    }

    fn describe(&self, out: &mut String) {
        out.push_str("grpc ");
        out.push_str(&self.path);
        if let Some(principal) = &self.principal {
            out.push_str(" for ");
            out.push_str(principal);
        }
    }
}

/// `credential` and 16 bytes of SHA-256 in hex over the `authorization`
/// metadata, or `None` when the call carries none: only this hash reaches
/// the scope, never the credential.
pub(crate) fn credential_hash(headers: &HeaderMap) -> Option<String> {
    let mut hasher = Sha256::new();
    hasher.update(b"idem/grpc/credential/v1");
    let mut found = false;
    for value in headers.get_all(http::header::AUTHORIZATION) {
        found = true;
        hasher.update((value.len() as u64).to_be_bytes());
        hasher.update(value.as_bytes());
    }
    if !found {
        return None;
    }
    let digest = hasher.finalize();
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    Some(format!("credential {hex}"))
}

/// The one message of a unary call's body (a gRPC frame: a compression
/// flag, a 4-byte length, the message), or `None` for any other body.
pub(crate) fn one_message(body: &Bytes) -> Option<(bool, Bytes)> {
    let (&flag, rest) = body.split_first()?;
    let len = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?) as usize;
    (rest.len() == 4 + len && flag <= 1).then(|| (flag == 1, body.slice(5..)))
}

/// A method's request message decoded by its registered type: its
/// fingerprint and, for a method keyed by a field, the field's value
/// (empty when the field is unset).
pub(crate) struct Decoded {
    pub(crate) fingerprint: Result<Fingerprint, FingerprintError>,
    pub(crate) key: Option<String>,
}

/// How a method's request message is decoded; `None` when the bytes are
/// not a message of its type.
pub(crate) type Canonical = dyn Fn(&[u8]) -> Option<Decoded> + Send + Sync;

/// The message of a unary call's body decoded through `canonical`, if it
/// is one uncompressed message of the method's type.
pub(crate) fn decode(canonical: Option<&Canonical>, body: &Bytes) -> Option<Decoded> {
    let (false, message) = one_message(body)? else {
        return None;
    };
    canonical?(&message)
}

/// SHA-256 over the request message: `decoded`'s (a method registered
/// with its type, whose message decoded), else over its bytes.
pub(crate) fn fingerprint(
    decoded: Option<Decoded>,
    body: &Bytes,
) -> Result<Fingerprint, FingerprintError> {
    if let Some(decoded) = decoded {
        return decoded.fingerprint;
    }
    let mut digest = Digester::new();
    digest.part(&("bytes", body.as_ref()))?;
    Ok(digest.finish())
}

/// `M` decoded from `bytes`: the fingerprint of its serde form, in which a
/// map's entries are combined whatever their order (§3) and fields have
/// no order at all, and the key `key` reads from it. `None` when the bytes
/// are not an `M`.
pub(crate) fn decoded<M>(bytes: &[u8], key: Option<&KeyField<M>>) -> Option<Decoded>
where
    M: prost::Message + Default + serde::Serialize,
{
    let message = M::decode(bytes).ok()?;
    let mut digest = Digester::new();
    let fingerprint = digest
        .part(&("message", &message))
        .map(|()| digest.finish());
    let key = key.map(|field| field(&message).to_owned());
    Some(Decoded { fingerprint, key })
}

/// The field of a request message that carries its key (AIP-155's
/// `request_id`).
pub(crate) type KeyField<M> = dyn for<'a> Fn(&'a M) -> &'a str + Send + Sync;
