//! Capped exponential backoff with jitter, for controller restarts, failing
//! queue items and watches that cannot be set up.

use std::time::Duration;

/// How long to wait before retrying, growing with each failure.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BackoffOptions {
    /// The first wait.
    pub initial: Duration,
    /// Each wait is the previous one times this.
    pub multiplier: f64,
    /// Each wait is moved randomly by up to this fraction of itself, so that
    /// controllers failing together do not retry together.
    pub jitter: f64,
    /// The longest wait.
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

/// The state of one backoff: how many failures in a row.
#[derive(Clone, Debug)]
pub(crate) struct Backoff {
    options: BackoffOptions,
    current: Duration,
}

impl Backoff {
    pub(crate) fn new(options: BackoffOptions) -> Self {
        Backoff { options, current: options.initial }
    }

    /// The wait before the next retry.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let base = self.current;
        self.current = base.mul_f64(self.options.multiplier.max(1.0)).min(self.options.max);
        let jitter = self.options.jitter.clamp(0.0, 1.0);
        let factor = 1.0 - jitter + 2.0 * jitter * fastrand::f64();
        base.mul_f64(factor).min(self.options.max)
    }

    /// Back to the first wait, after a success.
    pub(crate) fn reset(&mut self) {
        self.current = self.options.initial;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_to_the_cap_within_the_jitter_and_resets() {
        let options = BackoffOptions::default();
        let mut backoff = Backoff::new(options);
        let mut base = options.initial.as_secs_f64();
        for _ in 0..20 {
            let delay = backoff.next_delay().as_secs_f64();
            assert!(delay >= base * 0.5 - 1e-9 && delay <= (base * 1.5).min(60.0) + 1e-9, "{delay} vs {base}");
            base = (base * 1.5).min(60.0);
        }
        assert!(backoff.next_delay() >= Duration::from_secs(30));
        backoff.reset();
        assert!(backoff.next_delay() <= Duration::from_millis(750));
    }
}
