//! The packed timestamps and flags of a [`Metadata`](super::Metadata).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::Phase;

/// `created`, `updated`, the phase and whether the version is defined, in 24
/// bytes: both seconds, then both nanoseconds, whose top bits hold the two
/// flags (a count of nanoseconds within a second stays under 2^30). Two
/// `SystemTime`s alone take 32 bytes (each pads its 12 to 16) and a
/// `Version` 16; packed so, a stored resource with a spec of up to 32 bytes
/// fits a 144-byte allocation (see the size check beside `Metadata`). Exact for every
/// time the platform's `SystemTime` holds: seconds since the epoch, negative
/// before it, and the nanoseconds after those seconds.
#[derive(Clone, Copy)]
pub(super) struct Packed {
    pub(super) secs: [i64; 2],
    pub(super) nanos: [u32; 2],
}

/// The flag bit of each of `Packed::nanos`: in `created`'s, the phase is
/// tearing down; in `updated`'s, the version is defined.
const FLAG: u32 = 1 << 31;

impl Packed {
    /// Created and updated at `time`, running, version undefined.
    pub(super) fn at(time: SystemTime) -> Self {
        let (secs, nanos) = split(time);
        Packed { secs: [secs; 2], nanos: [nanos; 2] }
    }

    pub(super) fn created(self) -> SystemTime {
        join(self.secs[0], self.nanos[0] & !FLAG)
    }

    pub(super) fn updated(self) -> SystemTime {
        join(self.secs[1], self.nanos[1] & !FLAG)
    }

    /// Sets both times, the flags as they were.
    pub(super) fn set_times(
        &mut self,
        (created_secs, created_nanos): (i64, u32),
        (updated_secs, updated_nanos): (i64, u32),
    ) {
        self.secs = [created_secs, updated_secs];
        self.nanos = [created_nanos | (self.nanos[0] & FLAG), updated_nanos | (self.nanos[1] & FLAG)];
    }

    /// `created` as seconds and nanoseconds, without its flag.
    pub(super) fn created_parts(self) -> (i64, u32) {
        (self.secs[0], self.nanos[0] & !FLAG)
    }

    pub(super) fn phase(self) -> Phase {
        match self.nanos[0] & FLAG {
            0 => Phase::Running,
            _ => Phase::TearingDown,
        }
    }

    pub(super) fn set_phase(&mut self, phase: Phase) {
        self.set_flag(0, phase == Phase::TearingDown);
    }

    pub(super) fn version_defined(self) -> bool {
        self.nanos[1] & FLAG != 0
    }

    pub(super) fn set_version_defined(&mut self, defined: bool) {
        self.set_flag(1, defined);
    }

    fn set_flag(&mut self, which: usize, on: bool) {
        self.nanos[which] = match on {
            true => self.nanos[which] | FLAG,
            false => self.nanos[which] & !FLAG,
        };
    }
}

/// The time `secs` seconds (negative: before) and `nanos` nanoseconds after the epoch.
fn join(secs: i64, nanos: u32) -> SystemTime {
    let whole = match u64::try_from(secs) {
        Ok(after) => UNIX_EPOCH.checked_add(Duration::from_secs(after)),
        Err(_) => UNIX_EPOCH.checked_sub(Duration::from_secs(secs.unsigned_abs())),
    };
    // Both came from a `SystemTime` (`split`), so neither step leaves its range.
    whole.and_then(|whole| whole.checked_add(Duration::from_nanos(nanos.into()))).unwrap_or(UNIX_EPOCH)
}

/// Whole seconds since the epoch (rounded down) and the nanoseconds after them.
pub(super) fn split(time: SystemTime) -> (i64, u32) {
    match time.duration_since(UNIX_EPOCH) {
        Ok(after) => (i64::try_from(after.as_secs()).unwrap_or(i64::MAX), after.subsec_nanos()),
        Err(before) => {
            let before = before.duration();
            let secs = 0i64.saturating_sub_unsigned(before.as_secs());
            match before.subsec_nanos() {
                0 => (secs, 0),
                nanos => (secs.saturating_sub(1), 1_000_000_000 - nanos),
            }
        }
    }
}
