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
//! A fixed table of tags, one per slot, with no lock and no allocation per
//! call (a map would take a lock and grow): two keys that share a slot
//! push each other out, which costs one of them its next replay's claim
//! statement and nothing more.

use std::sync::atomic::{AtomicU64, Ordering};

use idem_core::key::RecordKey;

/// Slots in the table: 128 KiB of tags, enough that a working set of a
/// few thousand hot keys rarely collides.
const SLOTS: usize = 1 << 14;

/// Which keys were last seen completed, one tag per slot.
pub(crate) struct Completed {
    tags: Box<[AtomicU64]>,
}

impl Default for Completed {
    fn default() -> Self {
        Completed {
            tags: (0..SLOTS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

impl Completed {
    /// Whether `key` was last seen completed (its replay then reads first).
    pub(crate) fn names(&self, key: &RecordKey) -> bool {
        let (slot, tag) = slot_and_tag(key);
        self.tags[slot].load(Ordering::Relaxed) == tag
    }

    /// `key` holds a completed record.
    pub(crate) fn saw(&self, key: &RecordKey) {
        let (slot, tag) = slot_and_tag(key);
        // Loaded first: a replayed key is named already, and a store on
        // every replay would bounce the slot's cache line between cores.
        if self.tags[slot].load(Ordering::Relaxed) != tag {
            self.tags[slot].store(tag, Ordering::Relaxed);
        }
    }

    /// `key` was found holding no completed record.
    pub(crate) fn lost(&self, key: &RecordKey) {
        let (slot, tag) = slot_and_tag(key);
        let _ = self.tags[slot].compare_exchange(tag, 0, Ordering::Relaxed, Ordering::Relaxed);
    }
}

/// A key's slot and tag, from its hashed bytes (uniform already). The tag
/// is never zero, which marks an empty slot.
fn slot_and_tag(key: &RecordKey) -> (usize, u64) {
    let bytes = key.as_bytes();
    let word = |at: usize| u64::from_le_bytes(std::array::from_fn(|i| bytes[at + i]));
    (word(0) as usize % SLOTS, word(8) | 1)
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
    fn keys_sharing_a_slot_push_each_other_out() {
        let completed = Completed::default();
        let first = RecordKey::new("s", "0");
        let slot = slot_and_tag(&first).0;
        let other = (1..)
            .map(|i: u64| RecordKey::new("s", i.to_string().as_str()))
            .find(|key| slot_and_tag(key).0 == slot)
            .expect("another key in the same slot");
        completed.saw(&first);
        completed.saw(&other);
        assert!(completed.names(&other));
        assert!(!completed.names(&first));
    }
}
