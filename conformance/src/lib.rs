//! The protocol core (`switchgnn-dataplane`) exercised on real plans: the tests and the
//! benchmark of this crate need graphs, METIS partitions and send orders, which the protocol
//! crate itself does not depend on. The library is empty; `tests/` and `benches/` hold the
//! suite.
