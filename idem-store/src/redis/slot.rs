//! Redis Cluster hash slots and a hash tag for each, computed here: the
//! slot number of `redis::cluster_routing::Slot` cannot be read, and a
//! table indexed by it is one lookup where a map by `Slot` is a SipHash.

use std::sync::OnceLock;

/// How many slots a Redis Cluster has.
const SLOTS: usize = 16384;

/// Redis hashes keys with CRC16-XMODEM (the `crc16` crate redis-rs uses).
type Crc16 = crc16::State<crc16::XMODEM>;

fn crc16(bytes: &[u8]) -> u16 {
    Crc16::calculate(bytes)
}

/// The CRC16 of some bytes then `bytes`, given the state after the first.
fn crc16_after(mut state: Crc16, bytes: &[u8]) -> u16 {
    state.update(bytes);
    state.get()
}

/// The slot of `key`: of its hash tag when it has one, else of all of it.
pub(super) fn of(key: &[u8]) -> u16 {
    crc16(hash_tag(key).unwrap_or(key)) % SLOTS as u16
}

/// What `of_prefixed` needs of a prefix: its CRC16 state, when it holds no
/// `{` (none of its bytes can then start a hash tag).
pub(super) fn prefix_crc(prefix: &[u8]) -> Option<PrefixCrc> {
    (!prefix.contains(&b'{')).then(|| {
        let mut state = Crc16::new();
        state.update(prefix);
        PrefixCrc(state)
    })
}

/// The CRC16 state after a prefix without `{`.
#[derive(Clone, Copy, Debug)]
pub(super) struct PrefixCrc(Crc16);

/// The slot of `prefix` + `rest`, for a prefix without `{` whose CRC16
/// state is `prefix_crc`: only the bytes of `rest` are read.
pub(super) fn of_prefixed(prefix_crc: PrefixCrc, rest: &[u8]) -> u16 {
    let crc = match hash_tag(rest) {
        Some(tag) => crc16(tag),
        None => crc16_after(prefix_crc.0, rest),
    };
    crc % SLOTS as u16
}

/// What Redis hashes instead of the whole key: the bytes between its
/// first `{` and the first `}` after that, when there are any.
fn hash_tag(key: &[u8]) -> Option<&[u8]> {
    let open = key.iter().position(|&byte| byte == b'{')?;
    let after = &key[open + 1..];
    let close = after.iter().position(|&byte| byte == b'}')?;
    Some(&after[..close]).filter(|tag| !tag.is_empty())
}

/// A hash tag in decimal digits: at most 6 (the largest is 109757).
#[derive(Clone, Copy)]
struct Tag {
    len: u8,
    digits: [u8; 7],
}

/// The hash tag for `slot`: the decimal digits of the smallest number
/// whose digits hash there.
pub(super) fn tag(slot: u16) -> &'static [u8] {
    let tag = &tags()[usize::from(slot)];
    &tag.digits[..usize::from(tag.len)]
}

fn tags() -> &'static [Tag] {
    static TAGS: OnceLock<Vec<Tag>> = OnceLock::new();
    TAGS.get_or_init(|| {
        let mut tags: Vec<Option<Tag>> = vec![None; SLOTS];
        let mut missing = SLOTS;
        let mut n = 0u32;
        while missing > 0 {
            let tag = decimal(n);
            let found = &mut tags[usize::from(of(&tag.digits[..usize::from(tag.len)]))];
            if found.is_none() {
                *found = Some(tag);
                missing -= 1;
            }
            n += 1;
        }
        tags.into_iter().flatten().collect()
    })
}

/// The decimal digits of `n` (below 10 million).
fn decimal(n: u32) -> Tag {
    let mut buffer = itoa::Buffer::new();
    let text = buffer.format(n).as_bytes();
    let mut digits = [0u8; 7];
    digits[..text.len()].copy_from_slice(text);
    Tag {
        len: text.len() as u8,
        digits,
    }
}

#[cfg(test)]
mod tests {
    use redis::cluster_routing::Slot;

    use super::*;

    /// Keys of every length up to 40 from a fixed pseudo-random sequence,
    /// braces frequent.
    fn keys() -> impl Iterator<Item = Vec<u8>> {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        (0..20_000).map(move |i| {
            (0..i % 41)
                .map(|_| match next() % 8 {
                    0 => b'{',
                    1 => b'}',
                    _ => next() as u8,
                })
                .collect()
        })
    }

    #[test]
    fn slots_are_redis_cluster_slots() {
        for key in keys() {
            assert_eq!(Slot::new(of(&key)), Some(Slot::for_key(&key)), "{key:?}");
        }
        for key in [
            &b""[..],
            b"{}",
            b"{}x",
            b"{a}",
            b"x{a}{b}",
            b"}{a}",
            b"{{a}}",
        ] {
            assert_eq!(Slot::new(of(key)), Some(Slot::for_key(key)), "{key:?}");
        }
    }

    #[test]
    fn a_prefix_without_a_brace_is_hashed_once() {
        let prefixes = [&b""[..], b"idem:", b"a}b:", b"}", b"idem-per-call-5f3a:"];
        for prefix in prefixes {
            let crc = prefix_crc(prefix).expect("no brace");
            for rest in keys() {
                let key = [prefix, &rest[..]].concat();
                assert_eq!(of_prefixed(crc, &rest), of(&key), "{key:?}");
            }
        }
        assert!(prefix_crc(b"idem:{").is_none());
    }

    #[test]
    fn every_slot_has_the_smallest_tag_that_hashes_there() {
        let mut expected: Vec<Option<u32>> = vec![None; SLOTS];
        for n in 0..=109_757u32 {
            expected[usize::from(of(n.to_string().as_bytes()))].get_or_insert(n);
        }
        for (slot, n) in expected.into_iter().enumerate() {
            let slot = u16::try_from(slot).expect("a slot");
            assert_eq!(tag(slot), n.expect("a tag").to_string().as_bytes());
            assert_eq!(Slot::new(slot), Some(Slot::for_key(tag(slot))));
        }
    }
}
