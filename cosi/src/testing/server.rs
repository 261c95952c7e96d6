//! What a test does when a server it needs is not on the machine.
//!
//! Tests that need a server (etcd, the Go toolchain for the interoperability
//! tests) start it themselves. When its program is missing, [`missing`]
//! decides, the same way everywhere:
//!
//! - with `CI` set to any non-empty value, the test fails: CI never skips;
//! - otherwise the test fails too, naming the server and how to install it,
//!   unless `COSI_ALLOW_SKIP=1` is set: then it is skipped, and says so on the
//!   terminal (not in the captured output `cargo test` hides).

use std::ffi::OsStr;
use std::io::Write;

/// The variable that lets tests whose server is missing skip instead of fail,
/// outside CI.
pub const ALLOW_SKIP: &str = "COSI_ALLOW_SKIP";

/// A test's server is missing: fails the test (see the [module docs](self)),
/// or returns when skipping is allowed, after printing the skip where
/// `cargo test` shows it. The caller then returns without running.
///
/// `server` names what is missing (`"an etcd server"`), `install` says how to
/// get it.
///
/// # Panics
///
/// Unless `COSI_ALLOW_SKIP=1` is set and `CI` is not.
#[track_caller]
pub fn missing(server: &str, install: &str) {
    let ci = std::env::var_os("CI");
    let allow = std::env::var_os(ALLOW_SKIP);
    if let Err(reason) = skip_allowed(ci.as_deref(), allow.as_deref(), server, install) {
        panic!("{reason}");
    }
    // Written to the process's standard error directly: `eprintln!` would be
    // captured by the test harness and shown only for failing tests.
    let test = std::thread::current().name().unwrap_or("a test").to_owned();
    let _ =
        writeln!(std::io::stderr(), "SKIPPED {test}: it needs {server}, which is missing ({ALLOW_SKIP}=1): {install}");
}

/// The policy of [`missing`], from the values of `CI` and `COSI_ALLOW_SKIP`:
/// `Ok` to skip, or why the test fails.
fn skip_allowed(ci: Option<&OsStr>, allow: Option<&OsStr>, server: &str, install: &str) -> Result<(), String> {
    if ci.is_some_and(|ci| !ci.is_empty()) {
        return Err(format!("this test needs {server}, which is missing, and CI never skips: {install}"));
    }
    if allow != Some(OsStr::new("1")) {
        return Err(format!(
            "this test needs {server}, which is missing: {install}; or set {ALLOW_SKIP}=1 to skip such tests"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;

    use super::skip_allowed;

    fn decide(ci: Option<&str>, allow: Option<&str>) -> Result<(), String> {
        skip_allowed(ci.map(OsStr::new), allow.map(OsStr::new), "an etcd server", "apt-get install etcd-server")
    }

    #[test]
    fn ci_set_to_anything_never_skips() {
        for ci in ["true", "1", "yes", "false"] {
            let reason = decide(Some(ci), Some("1")).expect_err(ci);
            assert!(reason.contains("CI never skips") && reason.contains("an etcd server"), "{reason}");
            assert!(reason.contains("apt-get install etcd-server"), "{reason}");
        }
    }

    #[test]
    fn outside_ci_a_missing_server_fails_and_says_how_to_skip() {
        for allow in [None, Some("0"), Some(""), Some("true")] {
            let reason = decide(None, allow).expect_err("fails");
            assert!(reason.contains("COSI_ALLOW_SKIP=1") && reason.contains("apt-get install etcd-server"), "{reason}");
        }
        assert!(decide(Some(""), None).is_err(), "an empty CI is not CI, and skipping is not allowed");
    }

    #[test]
    fn outside_ci_allow_skip_skips() {
        assert_eq!(decide(None, Some("1")), Ok(()));
        assert_eq!(decide(Some(""), Some("1")), Ok(()));
    }
}
