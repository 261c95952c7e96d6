//! The signal a program's `main` stops on.

/// Completes when the process is asked to stop: Ctrl-C (SIGINT), or, on
/// Unix, SIGTERM, what `kill` and service managers send. The future most
/// `main`s give [`Runtime::run_until`](super::Runtime::run_until).
///
/// A signal whose handler cannot be installed is left out (with a warning),
/// rather than taken as a request to stop.
pub async fn shutdown_signal() {
    let interrupt = async {
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::warn!("cannot listen for Ctrl-C: {error}");
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        () = interrupt => {}
        () = terminate() => {}
    }
}

#[cfg(unix)]
async fn terminate() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut terminate) => drop(terminate.recv().await),
        Err(error) => {
            tracing::warn!("cannot listen for SIGTERM: {error}");
            std::future::pending::<()>().await;
        }
    }
}

#[cfg(not(unix))]
async fn terminate() {
    std::future::pending::<()>().await;
}

#[cfg(all(test, unix))]
mod tests {
    use std::future::{Future, poll_fn};
    use std::task::Poll;
    use std::time::Duration;

    use super::shutdown_signal;

    #[tokio::test]
    async fn sigterm_completes_it() {
        let mut signal = Box::pin(shutdown_signal());
        // Polled once, it listens: a SIGTERM now reaches it, and not the
        // default action, which would end the test process.
        let first = poll_fn(|cx| Poll::Ready(signal.as_mut().poll(cx))).await;
        assert!(first.is_pending(), "completed without a signal");
        let raised = std::process::Command::new("kill")
            .args(["-TERM", &std::process::id().to_string()])
            .status()
            .expect("kill runs");
        assert!(raised.success());
        tokio::time::timeout(Duration::from_secs(10), signal).await.expect("completed on SIGTERM");
    }
}
