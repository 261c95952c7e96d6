//! Generates the etcd client code from `proto/` with protox, a protobuf
//! compiler written in Rust, so building needs no system `protoc`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    let files = ["proto/mvccpb/kv.proto", "proto/etcdserverpb/rpc.proto", "proto/v3electionpb/v3election.proto"];
    let descriptors = protox::compile(files, ["proto"])?;
    tonic_prost_build::configure().build_server(false).compile_fds(descriptors)?;
    Ok(())
}
