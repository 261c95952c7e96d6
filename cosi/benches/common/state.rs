//! The state every benchmark runs on: the memory state with its default
//! history (Talos' settings, 8 growing to 1024, gap 4), or the history that
//! `COSI_BENCH_HISTORY=initial,max,gap` gives, which the Go benchmarks in
//! `interop/go/bench` read too (`100,100,5` is Go COSI's own default).

use std::sync::Arc;

use cosi::state::{MemoryOptions, MemoryState, State};

pub fn memory() -> Arc<dyn State> {
    let setting = std::env::var("COSI_BENCH_HISTORY").unwrap_or_default();
    if setting.is_empty() {
        return Arc::new(MemoryState::default());
    }
    let values: Vec<usize> = setting.split(',').map(|value| value.trim().parse().expect("a number")).collect();
    let [initial, max, gap] = values[..] else { panic!("COSI_BENCH_HISTORY={setting:?}: want initial,max,gap") };
    let options = MemoryOptions { history_initial_capacity: initial, history_max_capacity: max, history_gap: gap };
    Arc::new(MemoryState::new(options).expect("valid history settings"))
}
