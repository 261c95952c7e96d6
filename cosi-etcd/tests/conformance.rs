//! The state and runtime conformance suites against `EtcdState` on a real
//! etcd server.
//!
//! One etcd serves every case of this test binary (started on first use,
//! stopped when the binary exits); each case gets a key prefix of its own, so
//! the runtime cases, which use fixed namespaces, never see each other's
//! resources. Without an etcd binary every case fails and says how to install
//! etcd (or is skipped with `COSI_ALLOW_SKIP=1` outside CI).

use std::sync::atomic::{AtomicU64, Ordering};

use cosi_etcd::testing::EtcdServer;
use cosi_etcd::{EtcdState, Options};

async fn etcd() -> Option<EtcdState> {
    static CASE: AtomicU64 = AtomicU64::new(0);
    let server = EtcdServer::shared()?;
    let prefix = format!("/conformance/{}/{}", std::process::id(), CASE.fetch_add(1, Ordering::Relaxed));
    Some(EtcdState::connect(&[server.endpoint()], Options::prefix(prefix)).await.expect("connect to etcd"))
}

cosi::state_conformance_tests!(etcd, etcd, optional);

cosi::runtime_conformance_tests!(etcd_runtime, etcd, optional);
