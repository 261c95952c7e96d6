//! The state conformance suite (`cosi::testing::state`) over gRPC: our client
//! talking to our server on loopback, in front of the in-memory state.
//!
//! Every case runs through the wire: typed specs are encoded, errors cross as
//! status codes, watches stream with backpressure.

mod support;

cosi::state_conformance_tests!(grpc_tcp, support::loopback_memory);

cosi::state_conformance_tests!(grpc_unix, support::unix_memory);
