//! The trace of one run: every choice and every write, stamped with
//! simulated time, so that a run can be read and two runs compared.

use std::fmt::Display;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::time::Instant;

pub struct Trace {
    lines: Mutex<Vec<String>>,
    start: Instant,
    /// Print each line as it is written (a replay).
    echo: bool,
}

impl Trace {
    /// A trace starting now (simulated time), inside the simulation's runtime.
    pub fn new(echo: bool) -> Arc<Self> {
        Arc::new(Trace { lines: Mutex::default(), start: Instant::now(), echo })
    }

    pub fn log(&self, line: impl Display) {
        let at = self.start.elapsed();
        let line = format!("{:>5}.{:03}s {line}", at.as_secs(), at.subsec_millis());
        if self.echo {
            eprintln!("{line}");
        }
        self.lines.lock().push(line);
    }

    /// The simulated time since the start.
    pub fn elapsed(&self) -> std::time::Duration {
        self.start.elapsed()
    }

    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().clone()
    }

    /// FNV-1a over every line: the same trace, byte for byte, gives the same hash.
    pub fn hash(&self) -> u64 {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for line in self.lines.lock().iter() {
            for byte in line.bytes().chain([b'\n']) {
                hash ^= u64::from(byte);
                hash = hash.wrapping_mul(0x0100_0000_01b3);
            }
        }
        hash
    }
}
