//! Holds no code: this package carries idem's examples (`examples/`), its
//! integration tests against real servers, brokers and HTTP (`tests/`) and
//! its benchmarks (`benches/`), so that the facade's own quickstart builds
//! none of their dependencies.
