// A controller that may hold finalizers on another's output: the writer must
// read it destroy-ready, or what it tears down stays tearing down.
use cosi::prelude::*;

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "FileSpecs.example.org", namespace = "default")]
pub struct FileSpec {}

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "FileStatuses.example.org", namespace = "default")]
pub struct FileStatus {}

#[controller(inputs = [Weak<FileSpec>], outputs = [Exclusive<FileStatus>])]
async fn files(_ctx: &mut Ctx) {}

#[controller(inputs = [Strong<FileStatus>])]
async fn service(_ctx: &mut Ctx) {}

cosi::system!(MyOs = [files, service]);

fn main() {}
