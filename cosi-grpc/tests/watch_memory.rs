//! A watch's responses are built one at a time, as its client reads them: the
//! wire form copies every spec, so a kind's bootstrap converted whole would be
//! held once more per watch, for as long as its client does not read it. The
//! state holds the kind once, whatever the number of watches.
//!
//! One test in a binary of its own: it counts the whole process's heap through
//! its global allocator, so nothing else may run beside it.

mod support;

use std::alloc::System;
use std::time::Duration;

use cosi::prelude::*;
use cosi::resource::EncodedSpec;
use cosi::state::{MemoryState, State};
use cosi_grpc::DEFAULT_MAX_MESSAGE_SIZE;
use cosi_grpc::proto::{self, state_client::StateClient};
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

#[global_allocator]
static HEAP: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const NS: &str = "big";
const TYPE: &str = "BigResources.test.cosi.dev";
/// 160 resources of 256 KiB: a 40 MiB kind, forty watch responses.
const COUNT: usize = 160;
const SPEC_BYTES: usize = 256 << 10;
const KIND_BYTES: usize = COUNT * SPEC_BYTES;
const WATCHES: usize = 4;

/// The bytes the process holds on its heap now.
fn heap_bytes() -> usize {
    let stats = HEAP.stats();
    // Reallocations count apart, as the change in size.
    stats.bytes_allocated.saturating_add_signed(stats.bytes_reallocated).saturating_sub(stats.bytes_deallocated)
}

async fn within<T>(future: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), future).await.expect("within 60 s")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unread_bootstraps_hold_no_copy_of_the_kind() {
    let state = MemoryState::default();
    for n in 0..COUNT {
        let spec = EncodedSpec { proto: vec![n as u8; SPEC_BYTES], yaml: None };
        let resource = DynamicResource::encoded(Metadata::new(NS, TYPE, format!("r{n:03}")), spec);
        state.create_dynamic(resource, CreateOptions::default()).await.expect("create");
    }
    let address = support::listen(state).await;
    let request = support::bootstrap_watch(NS, TYPE, 1);

    // A connection per watch, as separate clients: the unread responses of
    // one connection's watches would soon fill its flow-control window.
    let mut clients = Vec::new();
    for _ in 0..WATCHES {
        let client = within(StateClient::connect(format!("http://{address}"))).await.expect("connect");
        clients.push(client.max_decoding_message_size(DEFAULT_MAX_MESSAGE_SIZE));
    }

    let before = heap_bytes();
    let mut streams = Vec::new();
    for client in &mut clients {
        let mut stream = within(client.watch(request.clone())).await.expect("watch").into_inner();
        let ready = within(stream.message()).await.expect("ready").expect("a first message");
        assert!(ready.event.is_empty(), "the first message is the empty ready marker");
        // The server has begun the bootstrap: its first response is here.
        let first = within(stream.message()).await.expect("a response").expect("the bootstrap's first response");
        assert!(first.event.iter().all(|event| event.event_type() == proto::EventType::Created));
        assert!(
            first.event.len() < COUNT,
            "the bootstrap is split, {} events in its first response",
            first.event.len()
        );
        // Kept open, and read no further.
        streams.push(stream);
    }
    let grown = heap_bytes().saturating_sub(before);
    // Each watch holds a few responses' worth on its way (being built, in the
    // transport's buffers at both ends), whatever the kind's size; a copy of
    // the kind per watch is far more.
    assert!(
        grown < WATCHES * KIND_BYTES / 2,
        "{WATCHES} watches that read one response of a {} MiB kind grew the heap by {} MiB",
        KIND_BYTES >> 20,
        grown >> 20
    );
    drop(streams);
}
