//! Every ```rust snippet of the README compiles as a user would paste it,
//! against the facade as a dependency (`idemkit`, used as `idem`). The
//! build script copies the snippets out of README.md; each module below
//! gives one snippet the context the README leaves implicit (the user's own
//! types, a handle in scope) and includes it verbatim. A snippet added to
//! the README without a module here fails `every_snippet_has_a_context`.

#![allow(dead_code, unused_imports, unused_variables, unreachable_code)]
#![allow(clippy::all)]

use serde::{Deserialize, Serialize};

macro_rules! snippet {
    ($n:literal) => {
        include!(concat!(env!("OUT_DIR"), "/readme_", $n, ".rs"));
    };
    (block $n:literal) => {
        include!(concat!(env!("OUT_DIR"), "/readme_", $n, "_block.rs"))
    };
}

/// The user's own types that the snippets name.
mod app {
    use super::*;

    #[derive(Serialize, Deserialize, Clone)]
    pub(crate) struct ChargeRequest {
        pub idempotency_key: String,
        pub tenant: u64,
        pub amount_cents: u64,
    }
    #[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
    pub(crate) struct Receipt {
        pub charge_id: u64,
    }
    #[derive(Debug)]
    pub(crate) struct AppError(idem::Error);
    impl From<idem::Error> for AppError {
        fn from(err: idem::Error) -> Self {
            AppError(err)
        }
    }
}

mod s01 {
    use super::app::*;
    use idem::idempotent;
    snippet!(1);
}

mod s02 {
    snippet!(2);
    #[test]
    fn runs() {
        main().unwrap();
    }
}

mod s03 {
    // The recipe: compiled, not run (it serves until Ctrl-C).
    snippet!(3);
}

mod s04 {
    // The transactional recipe: compiled, not run (it serves until Ctrl-C).
    snippet!(4);
}

/// Snippets covered above; keep in step with the modules.
const COVERED: usize = 4;

#[test]
fn every_snippet_has_a_context() {
    let count: usize = include!(concat!(env!("OUT_DIR"), "/readme_count.rs"));
    assert_eq!(
        count, COVERED,
        "README.md has {count} rust snippets and tests/readme.rs covers {COVERED}: give the new one a module"
    );
}
