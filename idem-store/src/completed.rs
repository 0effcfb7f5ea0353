//! The keys a store has seen completed, so that a replay of one is sent
//! as a plain read (Redis's `GET`, a SQL `SELECT` of a completed row),
//! which answers a completed record just as the claim would and costs the
//! server less than the claim's write (Redis's `SET … NX PX GET`) or
//! function call (the SQL claim). A key this table names whose record has
//! gone since (expired, forgotten) is then claimed as any other, one trip
//! later; a key it does not name is claimed at once. So the table only
//! picks which statement goes first: no claim is ever decided by it, and
//! fencing never rests on it.
//!
//! A fixed table of tags, with no lock and no allocation per call (a map
//! would take a lock and grow). A key may sit in any of the [`WAYS`] slots
//! of its set, so keys that hash to the same set all stay until a fifth
//! pushes one of them out, which costs that key its next replay's claim
//! statement and nothing more. (With one slot per key, 1,000 hot keys
//! replayed on one store sent one replay in twenty as a claim.)

use std::sync::atomic::{AtomicU64, Ordering};

use idem_contract::key::RecordKey;

/// Slots in the table: 128 KiB of tags, enough that a working set of a
/// few thousand hot keys rarely collides.
const SLOTS: usize = 1 << 14;

/// Slots per set: 32 bytes of tags, in one cache line.
const WAYS: usize = 4;

/// Which keys were last seen completed, one tag per slot.
pub(crate) struct Completed {
    sets: Box<[Set]>,
}

/// A set's slots, aligned so that it never spans two cache lines.
#[repr(align(32))]
#[derive(Default)]
struct Set([AtomicU64; WAYS]);

impl Default for Completed {
    fn default() -> Self {
        Completed {
            sets: (0..SLOTS / WAYS).map(|_| Set::default()).collect(),
        }
    }
}

impl Completed {
    /// Whether `key` was last seen completed (its replay then reads first).
    pub(crate) fn names(&self, key: &RecordKey) -> bool {
        let (set, tag) = self.set_and_tag(key);
        set.iter().any(|slot| slot.load(Ordering::Relaxed) == tag)
    }

    /// `key` holds a completed record.
    pub(crate) fn saw(&self, key: &RecordKey) {
        let (set, tag) = self.set_and_tag(key);
        // Loaded first: a replayed key is named already, and a store on
        // every replay would bounce the set's cache line between cores.
        let held = set.each_ref().map(|slot| slot.load(Ordering::Relaxed));
        if held.contains(&tag) {
            return;
        }
        // An empty slot if there is one, else the one the tag picks: which
        // resident key goes is as good as random.
        let at = held
            .iter()
            .position(|&t| t == 0)
            .unwrap_or((tag >> 1) as usize % WAYS);
        set[at].store(tag, Ordering::Relaxed);
    }

    /// `key` was found holding no completed record.
    pub(crate) fn lost(&self, key: &RecordKey) {
        let (set, tag) = self.set_and_tag(key);
        for slot in set {
            let _ = slot.compare_exchange(tag, 0, Ordering::Relaxed, Ordering::Relaxed);
        }
    }

    /// A key's set of slots and its tag.
    fn set_and_tag(&self, key: &RecordKey) -> (&[AtomicU64; WAYS], u64) {
        let (set, tag) = set_and_tag(key);
        (&self.sets[set].0, tag)
    }
}

/// A key's set and tag, from its hashed bytes (uniform already). The tag
/// is never zero, which marks an empty slot.
fn set_and_tag(key: &RecordKey) -> (usize, u64) {
    let bytes = key.as_bytes();
    let word = |at: usize| u64::from_le_bytes(std::array::from_fn(|i| bytes[at + i]));
    (word(0) as usize % (SLOTS / WAYS), word(8) | 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_named_once_seen_and_until_lost() {
        let completed = Completed::default();
        let (one, two) = (RecordKey::new("s", "one"), RecordKey::new("s", "two"));
        assert!(!completed.names(&one));
        completed.saw(&one);
        assert!(completed.names(&one));
        assert!(!completed.names(&two));
        completed.lost(&two);
        assert!(completed.names(&one), "losing another key keeps this one");
        completed.lost(&one);
        assert!(!completed.names(&one));
    }

    #[test]
    fn keys_sharing_a_set_stay_until_one_more_pushes_one_out() {
        let completed = Completed::default();
        let first = RecordKey::new("s", "0");
        let set = set_and_tag(&first).0;
        let keys: Vec<RecordKey> = std::iter::once(first)
            .chain(
                (1..)
                    .map(|i: u64| RecordKey::new("s", i.to_string().as_str()))
                    .filter(|key| set_and_tag(key).0 == set),
            )
            .take(WAYS + 1)
            .collect();
        let (resident, last) = keys.split_at(WAYS);
        resident.iter().for_each(|key| completed.saw(key));
        assert!(resident.iter().all(|key| completed.names(key)));
        completed.saw(&last[0]);
        assert!(completed.names(&last[0]));
        // It took the slot its tag picks, the one the resident key in that
        // place was seen into.
        let pushed = (set_and_tag(&last[0]).1 >> 1) as usize % WAYS;
        for (at, key) in resident.iter().enumerate() {
            assert_eq!(completed.names(key), at != pushed, "slot {at}");
        }
        completed.lost(&last[0]);
        completed.saw(&resident[pushed]);
        assert!(
            resident.iter().all(|key| completed.names(key)),
            "a freed slot is reused"
        );
    }
}
