//! Capped exponential backoff with jitter: the one retry policy of the
//! workspace (controller restarts, failing queue items, runtime watches, the
//! gRPC client's watch re-issue, the etcd watch reopen and the etcd leader
//! election's campaigns, lease renewals and leader key re-watches, and the
//! example OS's service restarts). Each site keeps its own parameters.
//!
//! These loops need a delay and a reset, not a retry driver: each already
//! interleaves its waits with cancellation, deadlines and logging of its
//! own, which a retry crate's combinators would take over or be bypassed
//! for. So this is a small type rather than a dependency.
//!
//! ```
//! use std::time::Duration;
//!
//! use cosi::backoff::{Backoff, BackoffOptions};
//!
//! let options = BackoffOptions { jitter: 0.0, ..BackoffOptions::default() };
//! let mut backoff = Backoff::new(options);
//! assert_eq!(backoff.next_delay(), Duration::from_millis(500));
//! assert_eq!(backoff.next_delay(), Duration::from_millis(750));
//! backoff.reset();
//! assert_eq!(backoff.next_delay(), Duration::from_millis(500));
//! ```

use std::time::Duration;

/// How long to wait before retrying, growing with each failure.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BackoffOptions {
    /// The first wait.
    pub initial: Duration,
    /// Each wait is the previous one times this (at least 1).
    pub multiplier: f64,
    /// Each wait is moved randomly by up to this fraction of itself (0 to 1),
    /// so that clients failing together do not retry together.
    pub jitter: f64,
    /// The longest wait, jitter included.
    pub max: Duration,
}

impl Default for BackoffOptions {
    /// COSI's: 500 ms, times 1.5, ±50 %, at most 60 s.
    fn default() -> Self {
        BackoffOptions {
            initial: Duration::from_millis(500),
            multiplier: 1.5,
            jitter: 0.5,
            max: Duration::from_secs(60),
        }
    }
}

/// One backoff: the wait before the next retry, growing with each failure in
/// a row until [`reset`](Backoff::reset).
///
/// Options out of range are brought into it rather than refused: a
/// multiplier below 1 (or not a number) is 1, a jitter outside 0 to 1 is
/// clamped (not a number: 0), and no wait exceeds `max`.
#[derive(Clone, Debug)]
pub struct Backoff {
    options: BackoffOptions,
    current: Duration,
}

impl Backoff {
    /// A backoff whose first wait is `options.initial`.
    pub fn new(options: BackoffOptions) -> Self {
        Backoff { options, current: options.initial.min(options.max) }
    }

    /// The wait before the next retry; the one after grows by the multiplier.
    pub fn next_delay(&mut self) -> Duration {
        let BackoffOptions { multiplier, jitter, max, .. } = self.options;
        let base = self.current;
        self.current = scale(base, multiplier.max(1.0), max);
        let jitter = if jitter.is_nan() { 0.0 } else { jitter.clamp(0.0, 1.0) };
        scale(base, 1.0 - jitter + 2.0 * jitter * fastrand::f64(), max)
    }

    /// Back to the first wait, after a success.
    pub fn reset(&mut self) {
        self.current = self.options.initial.min(self.options.max);
    }
}

/// `duration` times `factor`, at most `max` (also when the product overflows).
fn scale(duration: Duration, factor: f64, max: Duration) -> Duration {
    Duration::try_from_secs_f64(duration.as_secs_f64() * factor).map_or(max, |scaled| scaled.min(max))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exact(initial_ms: u64, multiplier: f64, max_ms: u64) -> Backoff {
        Backoff::new(BackoffOptions {
            initial: Duration::from_millis(initial_ms),
            multiplier,
            jitter: 0.0,
            max: Duration::from_millis(max_ms),
        })
    }

    fn delays(backoff: &mut Backoff, count: usize) -> Vec<u64> {
        (0..count).map(|_| backoff.next_delay().as_millis() as u64).collect()
    }

    #[test]
    fn grows_by_the_multiplier_up_to_the_cap() {
        assert_eq!(delays(&mut exact(50, 2.0, 1_000), 7), [50, 100, 200, 400, 800, 1_000, 1_000]);
        assert_eq!(delays(&mut exact(500, 1.5, 2_000), 5), [500, 750, 1_125, 1_687, 2_000]);
    }

    #[test]
    fn reset_starts_over() {
        let mut backoff = exact(50, 2.0, 1_000);
        delays(&mut backoff, 10);
        backoff.reset();
        assert_eq!(delays(&mut backoff, 3), [50, 100, 200]);
    }

    #[test]
    fn jitter_stays_within_its_fraction_and_the_cap() {
        let options = BackoffOptions::default();
        let mut backoff = Backoff::new(options);
        let mut base = options.initial.as_secs_f64();
        let mut seen = Vec::new();
        for _ in 0..40 {
            let delay = backoff.next_delay().as_secs_f64();
            assert!(delay >= base * 0.5 - 1e-9 && delay <= (base * 1.5).min(60.0) + 1e-9, "{delay} vs {base}");
            seen.push(delay);
            base = (base * 1.5).min(60.0);
        }
        // At the cap every delay is drawn from [30 s, 60 s]: 20 of them are not all equal.
        let capped = &seen[20..];
        assert!(capped.iter().any(|delay| delay != &capped[0]), "no jitter: {capped:?}");
    }

    #[test]
    fn options_out_of_range_are_brought_into_it() {
        let nonsense = |multiplier: f64, jitter: f64| {
            Backoff::new(BackoffOptions {
                initial: Duration::from_secs(2),
                multiplier,
                jitter,
                max: Duration::from_secs(1),
            })
        };
        // Initial above the cap, a multiplier below 1, no jitter (NaN).
        assert_eq!(delays(&mut nonsense(0.5, f64::NAN), 3), [1_000, 1_000, 1_000]);
        // An infinite multiplier and a jitter above 1 (clamped to 1) never exceed the cap.
        let mut wild = nonsense(f64::INFINITY, 7.0);
        assert!(delays(&mut wild, 20).iter().all(|delay| *delay <= 1_000));
        let mut nan = nonsense(f64::NAN, -1.0);
        assert_eq!(delays(&mut nan, 2), [1_000, 1_000]);
    }
}
