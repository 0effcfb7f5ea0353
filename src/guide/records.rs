//! Records across deploys, and what a record holds.
//!
//! # Across deploys
//!
//! A record is read back by its **shape**, not by its type's name. The name
//! `std::any::type_name` gives changes with the compiler version, a moved
//! module or a renamed crate, none of which changes the data; keying records
//! on it would turn every live record into an error after such a deploy. So:
//!
//! - a value stored by one type and read by a type of the same shape replays,
//!   whatever the path (`old::Receipt` → `billing::Receipt`), and so does a
//!   type that gained an optional field (`#[serde(default)]`);
//! - a shape that no longer decodes (a field's type changed, a required field
//!   added) is [`CodecError::ShapeChanged`](crate::CodecError::ShapeChanged), naming the type
//!   expected, the type stored (its name is kept in the record for this
//!   message only) and the decoder's reason;
//! - a change the decoder cannot see (same shape, new meaning: euros became
//!   cents) is yours to declare: `#[idempotent(…, version = 2)]` (or
//!   `.version(2)` on the builder); records of another version are
//!   [`CodecError::VersionChanged`](crate::CodecError::VersionChanged), never misread;
//! - the record format carries its own version (3, the only one: formats
//!   1 and 2, written by builds before 0.1, are refused with
//!   [`CodecError::Format`](crate::CodecError::Format)), and corrupt bytes
//!   are `Error::Codec`, never a panic.
//!
//! What each surface does with a record that no longer decodes: a queue
//! consumer gets [`Disposition::Reject`](crate::queue::Disposition::Reject) (dead-letter it: redelivering cannot
//! change the stored record, and running the handler again would repeat its
//! effect without anyone deciding so); the HTTP layer answers 500 with a
//! `codec` problem (the client learns the request was seen; nothing runs
//! again); a plain call returns the error. None of them re-runs the body.
//! To let such a key run again, delete its record in the store, or let its TTL end.
//!
//! # What a record holds
//!
//! The value is JSON, readable as such (`idem inspect`, `redis-cli GET`,
//! `SELECT`), with a few escapes for what JSON cannot carry. Plain JSON
//! writes `Some(None)` and `None` both as `null`, a NaN or infinite float as
//! `null` (so every duplicate failed to decode it for the whole TTL), and
//! cannot write a map whose keys are not strings at all. Format 3 marks
//! exactly those cases with single-key objects whose key starts with `$`:
//!
//! | value | stored as |
//! | --- | --- |
//! | `Some(v)` where `v` itself would be `null` or `{"$some":…}` | `{"$some":v}`: `Some(None)` is `{"$some":null}`, `Some(Some(None))` is `{"$some":{"$some":null}}`; any other `Some(v)` is just `v` |
//! | a NaN or infinite `f64` (`f32`) | `{"$f64":"NaN"}` (`"-NaN"` with the sign bit set, `"NaN:fff0000000000001"`, its bits in hex, for any other NaN: every bit replays), `{"$f64":"Infinity"}`, `{"$f64":"-Infinity"}` (`$f32`) |
//! | a `u128` / `i128` beyond 64 bits | `{"$u128":"…digits…"}` (`$i128`) |
//! | a map with any key that is not a string (integers, bools, tuples, byte vectors, enum variants with data) | `{"$map":[[key,value],…]}` |
//! | a key of your own that starts with `$` (`"$ref"`, a `HashMap` key `"$some"`) | one more `$`: `"$$ref"`, `"$$some"` |
//!
//! Everything else is byte for byte what `serde_json` writes, so a record of
//! a `Receipt` looks like `{"id":42,"note":"paid"}` and a `Some(None)` field
//! like `"cleared":{"$some":null}`. Strings are never escaped (only object
//! keys are). Integer keys go to `$map` too rather than becoming `"1"`:
//! object keys are then always the value's own strings, and a map decodes
//! the same whether serde reads it through a typed field or through
//! `deserialize_any`, which `#[serde(untagged)]` enums, internally and
//! adjacently tagged enums and `#[serde(flatten)]` use (`serde_json`'s
//! string form of an integer key does not survive those). All of these serde
//! forms replay, and a changed shape is still `CodecError::ShapeChanged`,
//! with one exception serde makes: it reads `flatten` fields and untagged
//! and internally tagged enums through a buffer that has no 128-bit
//! integers, so a `u128` or `i128` inside them (of any value) would never
//! decode, with this format or plain `serde_json`. Such a value is decoded
//! once when it is encoded and refused as `CodecError::Unreplayable`
//! before it is stored (the key settles as not stored); outside those forms
//! `u128` and `i128` replay exactly.
//!
//! Depth: a record may nest 256 levels deep (arrays and objects inside each
//! other, as written, escapes included; `$map` costs three levels, so a
//! struct holding an integer-keyed map of itself may be 63 levels deep).
//! `serde_json` alone stops at 128, which stranded a 40-level tree: it was
//! stored and every duplicate failed to decode it. A record deeper than
//! 128 is now read without serde_json's limit, under ours, which fits in
//! half of a tokio worker's stack in a debug build; a deeper value is
//! refused as `CodecError::TooDeep` before it is stored.
//!
//! Why not RON or a binary format: RON keeps `Some(None)` and NaN, but
//! breaks `#[serde(flatten)]` and `#[serde(untagged)]` (common in API
//! types), and CBOR, MessagePack and the like lose `Some(None)` just as
//! JSON does; a record would also no longer read as JSON. The escapes cost
//! a tree of the value between serde and the JSON text: see
//! `BENCHMARKS.md` ("Record format 3") in the repository for the figures. A value
//! whose `Serialize` fails, or that is too deep or would not replay, still
//! settles the key as not stored ([rules](super::attribute#rules-you-can-rely-on)); the
//! body does not run again.
//!
//! `integration/tests/golden/` holds the bytes this version writes for every
//! record kind (`Ok` and `Err` holding every escape, a not-stored marker, an
//! HTTP response), and `integration/tests/all/records.rs` reads them back (and
//! refuses the pre-release format 2 records kept under `golden/format_2/`),
//! so a change of format
//! or identity that strands live records fails CI. `scripts/fuzz [seconds]`
//! runs the record decoder and the HTTP stored-response decoder under
//! libFuzzer (cargo-fuzz) from those records. `scripts/fuzz 60` on 2 cores:
//! the record decoder ran 3,473,397 inputs (corpus grown to 1,183), the
//! HTTP decoder 3,869,081 (corpus 1,868), with no panic, crash or leak:
//! every input was a value or an `Error::Codec`.
