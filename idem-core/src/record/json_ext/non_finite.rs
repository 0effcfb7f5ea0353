//! The names of non-finite floats in a record (`{"$f64":"NaN"}`), written
//! and read back bit for bit.

use std::borrow::Cow;

use serde::de;

/// The usual quiet NaN is `NaN` (`-NaN` with the sign bit set); any other
/// NaN is `NaN:` and its bits in hex, so every bit replays.
fn nan_name(bits: u64, quiet: u64, sign: u64) -> Cow<'static, str> {
    match bits {
        _ if bits == quiet => Cow::Borrowed("NaN"),
        _ if bits == quiet | sign => Cow::Borrowed("-NaN"),
        _ => Cow::Owned(format!("NaN:{bits:x}")),
    }
}

pub(super) fn non_finite_f64_name(x: f64) -> Cow<'static, str> {
    if x.is_nan() {
        nan_name(x.to_bits(), f64::NAN.to_bits(), 1 << 63)
    } else {
        Cow::Borrowed(infinity_name(x > 0.0))
    }
}

pub(super) fn non_finite_f32_name(x: f32) -> Cow<'static, str> {
    if x.is_nan() {
        nan_name(x.to_bits().into(), f32::NAN.to_bits().into(), 1 << 31)
    } else {
        Cow::Borrowed(infinity_name(x > 0.0))
    }
}

fn infinity_name(positive: bool) -> &'static str {
    if positive { "Infinity" } else { "-Infinity" }
}

/// The bits a NaN's name stands for ([`nan_name`]).
fn nan_bits(name: &str, quiet: u64, sign: u64) -> Option<u64> {
    match name {
        "NaN" => Some(quiet),
        "-NaN" => Some(quiet | sign),
        _ => u64::from_str_radix(name.strip_prefix("NaN:")?, 16).ok(),
    }
}

pub(super) fn non_finite_f64<E: de::Error>(name: &str) -> Result<f64, E> {
    match name {
        "Infinity" => Ok(f64::INFINITY),
        "-Infinity" => Ok(f64::NEG_INFINITY),
        _ => nan_bits(name, f64::NAN.to_bits(), 1 << 63)
            .map(f64::from_bits)
            .filter(|x| x.is_nan())
            .ok_or_else(|| not_non_finite(name)),
    }
}

pub(super) fn non_finite_f32<E: de::Error>(name: &str) -> Result<f32, E> {
    match name {
        "Infinity" => Ok(f32::INFINITY),
        "-Infinity" => Ok(f32::NEG_INFINITY),
        _ => nan_bits(name, f32::NAN.to_bits().into(), 1 << 31)
            .and_then(|bits| u32::try_from(bits).ok())
            .map(f32::from_bits)
            .filter(|x| x.is_nan())
            .ok_or_else(|| not_non_finite(name)),
    }
}

fn not_non_finite<E: de::Error>(name: &str) -> E {
    E::custom(format_args!(
        "`{name}` is not NaN, -NaN, NaN:<bits>, Infinity or -Infinity"
    ))
}
