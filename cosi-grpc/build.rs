//! Generates the gRPC code from `proto/` with protox, a protobuf compiler
//! written in Rust, so building needs no system `protoc`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    let files = ["proto/v1alpha1/resource.proto", "proto/v1alpha1/state.proto", "proto/v1alpha1/meta.proto"];
    let descriptors = protox::compile(files, ["proto"])?;
    tonic_prost_build::configure().compile_fds(descriptors)?;
    Ok(())
}
