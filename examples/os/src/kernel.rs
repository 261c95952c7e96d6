//! The fake kernel: `run/kernel/net.json` holds the links and their
//! addresses, and `proc/sys/...` the kernel parameters.
//!
//! The OS changes addresses through [`Kernel::edit`], under an exclusive lock
//! on `run/kernel/net.json.lock`, and replaces the file atomically, so an
//! edit never loses a concurrent one and a reader never sees half a file. The
//! user edits the file too (flipping `up` simulates plugging a cable); a file
//! that does not parse is an error the OS reports and does not overwrite.

use serde::{Deserialize, Serialize};

use crate::sandbox::{SandboxError, SandboxRoot};

/// Where the links and addresses are.
pub const NET_FILE: &str = "run/kernel/net.json";

/// The lock taken around every edit of [`NET_FILE`].
const NET_LOCK: &str = "run/kernel/net.json.lock";

/// The kernel parameters a first boot creates (key, value); other keys do not
/// exist, as in a real `/proc/sys`.
pub const SYSCTL_DEFAULTS: &[(&str, &str)] = &[
    ("kernel/hostname", "localhost"),
    ("kernel/domainname", "(none)"),
    ("kernel/panic", "0"),
    ("net/ipv4/ip_forward", "0"),
    ("net/ipv4/tcp_syncookies", "1"),
    ("net/ipv6/conf/all/forwarding", "0"),
    ("vm/swappiness", "60"),
    ("vm/overcommit_memory", "0"),
];

/// The links and addresses of the fake kernel: [`NET_FILE`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Net {
    /// The links.
    pub links: Vec<Link>,
    /// The addresses, on links.
    #[serde(default)]
    pub addresses: Vec<Address>,
}

/// A network link.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Link {
    /// Its name (`eth0`).
    pub name: String,
    /// Its index; the fake DHCP server leases `10.0.<index>.15/24` on it.
    pub index: u32,
    /// Whether the cable is plugged in.
    pub up: bool,
    /// Its hardware address.
    pub mac: String,
    /// Its MTU.
    pub mtu: u32,
}

/// An address on a link.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Address {
    /// The link.
    pub link: String,
    /// The address in CIDR form.
    pub address: String,
}

/// Why the fake kernel refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KernelError {
    /// The sandbox refused.
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// `run/kernel/net.json` does not parse.
    #[error("{NET_FILE} is invalid at line {line} column {column}: {message}")]
    Invalid {
        /// What serde says.
        message: String,
        /// Where.
        line: usize,
        /// Where.
        column: usize,
    },
    /// `run/kernel/net.json` is missing.
    #[error("{NET_FILE} is missing")]
    Missing,
    /// The lock could not be taken.
    #[error("cannot lock {NET_LOCK}: {0}")]
    Lock(std::io::Error),
    /// An address on a link the kernel does not have.
    #[error("cannot add {address} to {link}: there is no such link")]
    NoSuchLink {
        /// The link.
        link: String,
        /// The address.
        address: String,
    },
}

impl Net {
    /// The links and addresses a boot starts with: `lo` (up, with
    /// 127.0.0.1/8), `eth0` (up) and `eth1` (down).
    pub fn initial() -> Net {
        let link = |name: &str, index, up, mac: &str, mtu| Link { name: name.into(), index, up, mac: mac.into(), mtu };
        Net {
            links: vec![
                link("lo", 1, true, "00:00:00:00:00:00", 65536),
                link("eth0", 2, true, "52:54:00:12:34:56", 1500),
                link("eth1", 3, false, "52:54:00:12:34:57", 1500),
            ],
            addresses: vec![Address { link: "lo".into(), address: "127.0.0.1/8".into() }],
        }
    }

    /// The file's text: one link or address per line, easy to edit by hand.
    pub fn render(&self) -> String {
        let lines = |items: Vec<String>| items.join(",\n    ");
        let links = self.links.iter().filter_map(|link| serde_json::to_string(link).ok()).collect();
        let addresses = self.addresses.iter().filter_map(|address| serde_json::to_string(address).ok()).collect();
        format!(
            "{{\n  \"links\": [\n    {}\n  ],\n  \"addresses\": [\n    {}\n  ]\n}}\n",
            lines(links),
            lines(addresses)
        )
    }

    /// Parses the file.
    pub fn parse(text: &str) -> Result<Net, KernelError> {
        serde_json::from_str(text).map_err(|error| {
            let message = error.to_string();
            let message = match message.rfind(" at line ") {
                Some(at) => message[..at].to_owned(),
                None => message,
            };
            KernelError::Invalid { message, line: error.line(), column: error.column() }
        })
    }

    /// The link named `name`.
    pub fn link(&self, name: &str) -> Option<&Link> {
        self.links.iter().find(|link| link.name == name)
    }
}

/// The fake kernel of one sandbox.
#[derive(Clone, Debug)]
pub struct Kernel {
    sandbox: SandboxRoot,
}

impl Kernel {
    /// The kernel whose files are in `sandbox`.
    pub fn new(sandbox: SandboxRoot) -> Self {
        Kernel { sandbox }
    }

    /// Writes the initial links and addresses, replacing whatever the last
    /// boot left (`run/` is a fresh tmpfs at each boot).
    pub fn reset(&self) -> Result<(), KernelError> {
        self.sandbox.write_atomic(NET_FILE, &Net::initial().render(), 0o644)?;
        Ok(())
    }

    /// The links and addresses now.
    pub fn read(&self) -> Result<Net, KernelError> {
        match self.sandbox.read(NET_FILE)? {
            Some(text) => Net::parse(&text),
            None => Err(KernelError::Missing),
        }
    }

    /// Changes the links and addresses under the kernel's lock; the file is
    /// written (atomically) only when `edit` changed something.
    pub fn edit<T>(&self, edit: impl FnOnce(&mut Net) -> Result<T, KernelError>) -> Result<T, KernelError> {
        let lock = self.sandbox.open_lock_file(NET_LOCK)?;
        lock.lock().map_err(KernelError::Lock)?;
        let result = (|| {
            let mut net = self.read()?;
            let before = net.clone();
            let value = edit(&mut net)?;
            if net != before {
                self.sandbox.write_atomic(NET_FILE, &net.render(), 0o644)?;
            }
            Ok(value)
        })();
        // Closing the file releases the lock as well; unlocking first says so.
        let _ = lock.unlock();
        result
    }

    /// Adds `address` to `link`; returns whether it was not there yet.
    pub fn add_address(&self, link: &str, address: &str) -> Result<bool, KernelError> {
        self.edit(|net| {
            if net.link(link).is_none() {
                return Err(KernelError::NoSuchLink { link: link.to_owned(), address: address.to_owned() });
            }
            let entry = Address { link: link.to_owned(), address: address.to_owned() };
            if net.addresses.contains(&entry) {
                return Ok(false);
            }
            net.addresses.push(entry);
            Ok(true)
        })
    }

    /// Removes `address` from `link`; returns whether it was there.
    pub fn remove_address(&self, link: &str, address: &str) -> Result<bool, KernelError> {
        self.edit(|net| {
            let before = net.addresses.len();
            net.addresses.retain(|entry| !(entry.link == link && entry.address == address));
            Ok(net.addresses.len() != before)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel() -> (tempfile::TempDir, Kernel) {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let sandbox = SandboxRoot::open(dir.path()).expect("sandbox");
        let kernel = Kernel::new(sandbox);
        kernel.reset().expect("reset");
        (dir, kernel)
    }

    #[test]
    fn the_rendered_file_parses_back() {
        let net = Net::initial();
        assert_eq!(Net::parse(&net.render()).expect("parses"), net);
        // One link per line, so flipping `up` is a one-word edit.
        let eth1 = r#"{"name":"eth1","index":3,"up":false,"mac":"52:54:00:12:34:57","mtu":1500}"#;
        assert!(net.render().lines().any(|line| line.trim().trim_end_matches(',') == eth1), "{}", net.render());
    }

    #[test]
    fn adds_and_removes_addresses() {
        let (_dir, kernel) = kernel();
        assert!(kernel.add_address("eth0", "10.0.2.15/24").expect("add"));
        assert!(!kernel.add_address("eth0", "10.0.2.15/24").expect("add again"));
        assert!(kernel.read().expect("read").addresses.iter().any(|a| a.address == "10.0.2.15/24"));
        assert!(matches!(kernel.add_address("eth9", "10.0.9.15/24"), Err(KernelError::NoSuchLink { .. })));
        assert!(kernel.remove_address("eth0", "10.0.2.15/24").expect("remove"));
        assert!(!kernel.remove_address("eth0", "10.0.2.15/24").expect("remove again"));
        assert_eq!(kernel.read().expect("read"), Net::initial());
    }

    #[test]
    fn concurrent_edits_lose_nothing() {
        let (_dir, kernel) = kernel();
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let kernel = kernel.clone();
                std::thread::spawn(move || kernel.add_address("eth0", &format!("10.0.2.{i}/24")))
            })
            .collect();
        for thread in threads {
            assert!(thread.join().expect("no panic").expect("added"));
        }
        assert_eq!(kernel.read().expect("read").addresses.len(), 9);
    }

    #[test]
    fn an_invalid_file_is_reported_and_kept() {
        let (dir, kernel) = kernel();
        std::fs::write(dir.path().join(NET_FILE), "{\"links\": [\n  oops\n]}").expect("break it");
        let error = kernel.add_address("eth0", "10.0.2.15/24").expect_err("invalid");
        assert!(matches!(error, KernelError::Invalid { line: 2, .. }), "{error}");
        assert!(std::fs::read_to_string(dir.path().join(NET_FILE)).expect("read").contains("oops"));
    }
}
