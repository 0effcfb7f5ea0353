//! The conformance suite on a store built against `idem-contract` alone,
//! through `idemkit`'s handle, as an application would run it.

use idem::Idempotency;
use idem_third_party_store::MapStore;

idem_conformance::suite!(async { Idempotency::new(MapStore::default()) });
