//! The code generated from `proto/` by `build.rs`: the messages and the client
//! stubs of the part of etcd's v3 API that this crate speaks.
//!
//! The modules keep etcd's package names, because the generated code of one
//! package names the others' types as `super::<package>::<Type>`.

// Generated code: not ours to document or lint, and the stubs this crate does
// not call (the testing-only auth calls, without the feature) are not dead code to remove.
#![allow(missing_docs, unreachable_pub, dead_code, clippy::all, clippy::pedantic)]

/// Stored keys and watch events.
pub(crate) mod mvccpb {
    tonic::include_proto!("mvccpb");
}

/// The KV, Watch, Lease and Auth services.
pub(crate) mod etcdserverpb {
    tonic::include_proto!("etcdserverpb");
}

/// The Election service.
pub(crate) mod v3electionpb {
    tonic::include_proto!("v3electionpb");
}
