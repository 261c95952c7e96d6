//! The runtime conformance suite (`cosi::testing::runtime`) over gRPC: the
//! runtime and its controllers work through our client against our server on
//! loopback, exactly as they do in process.

mod support;

cosi::runtime_conformance_tests!(grpc_tcp, support::loopback_memory);

cosi::runtime_conformance_tests!(grpc_unix, support::unix_memory);
