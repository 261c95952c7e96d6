//! `machine.yaml`: what the user asks of the machine.
//!
//! [`Config::parse`] reads it strictly: an unknown key is an error naming the
//! key, and every value is checked while it is read (addresses, file paths,
//! sysctl keys, durations), so a mistake comes with its line and column.
//! [`STARTER`] is the file a first boot writes.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::sandbox::RelativePath;

/// The `machine.yaml` a first boot writes.
pub const STARTER: &str = r#"# The example OS reads this file whenever it changes: edit it while it runs.
hostname: demo-node                # configuration layer: beats platform > cmdline > default
network:
  nameservers: [9.9.9.9]
  searchDomains: [lab.local]
  interfaces:
    - { name: eth0, dhcp: true }
    - { name: eth1, addresses: [192.168.50.10/24] }
time: { servers: [time.example.org] }
sysctls: { net.ipv4.ip_forward: "1", vm.swappiness: "10" }
files:
  - { path: motd, mode: 0644, content: "Welcome to the example OS\n" }
services:
  - { name: web, after: [hosts, resolv.conf], requiresTime: true }
  - { name: flaky, crashAfter: 5s }
"#;

/// The whole of `machine.yaml`. Every key is optional.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Config {
    /// The hostname (a short name, or a fully qualified one whose first label is the hostname).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<Hostname>,
    /// Name resolution and interfaces.
    #[serde(default, deserialize_with = "nullable")]
    pub network: NetworkConfig,
    /// Time synchronization.
    #[serde(default, deserialize_with = "nullable")]
    pub time: TimeConfig,
    /// Kernel parameters, by sysctl key (`net.ipv4.ip_forward`).
    #[serde(default, deserialize_with = "nullable")]
    pub sysctls: BTreeMap<SysctlKey, SysctlValue>,
    /// Files written under `etc/`.
    #[serde(default, deserialize_with = "nullable")]
    pub files: Files,
    /// Simulated services.
    #[serde(default, deserialize_with = "nullable")]
    pub services: Services,
}

/// The `network` section.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NetworkConfig {
    /// DNS servers; they replace those of every lower layer.
    #[serde(default, deserialize_with = "nullable")]
    pub nameservers: Vec<IpText>,
    /// DNS search domains.
    #[serde(default, deserialize_with = "nullable")]
    pub search_domains: Vec<String>,
    /// Per-interface settings.
    #[serde(default, deserialize_with = "nullable")]
    pub interfaces: Vec<InterfaceConfig>,
    /// Extra lines for `etc/hosts`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_host_entries: Vec<HostEntry>,
}

/// One interface.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct InterfaceConfig {
    /// The link name, as in `run/kernel/net.json` (`eth0`).
    pub name: LinkName,
    /// Whether to run the (fake) DHCP client on it.
    #[serde(default)]
    pub dhcp: bool,
    /// Static addresses, in CIDR form.
    #[serde(default, deserialize_with = "nullable")]
    pub addresses: Vec<Cidr>,
}

/// One extra `etc/hosts` line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HostEntry {
    /// The address.
    pub ip: IpText,
    /// The names for it.
    pub aliases: Vec<String>,
}

/// The `time` section.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TimeConfig {
    /// NTP servers; `pool.ntp.org` when empty. Names ending in `.invalid`
    /// never answer (the fake NTP client keeps retrying).
    #[serde(default, deserialize_with = "nullable")]
    pub servers: Vec<String>,
}

/// One file under `etc/`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FileConfig {
    /// The path under `etc/` (`motd`, `ssh/banner`).
    pub path: EtcPath,
    /// The permission bits, in octal (`0644`).
    #[serde(default)]
    pub mode: FileMode,
    /// The contents.
    pub content: String,
}

/// One simulated service.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ServiceConfig {
    /// Its name: also the name of its pid and log files.
    pub name: ServiceName,
    /// Files under `etc/` that must be written before it starts.
    #[serde(default, deserialize_with = "nullable")]
    pub after: Vec<EtcPath>,
    /// Whether it waits for the time to be synchronized.
    #[serde(default)]
    pub requires_time: bool,
    /// Makes the simulated process crash this long after each start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crash_after: Option<TextDuration>,
    /// How often it writes a heartbeat to its log (default 1s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat: Option<TextDuration>,
}

/// Why `machine.yaml` was not accepted.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ConfigError {
    message: String,
    location: Option<(usize, usize)>,
}

impl ConfigError {
    /// Where the mistake is: (line, column), both from 1.
    pub fn location(&self) -> Option<(usize, usize)> {
        self.location
    }
}

impl Config {
    /// Parses `machine.yaml`. An empty file is refused rather than read as
    /// "no configuration", since that is what an editor's half-written save looks like.
    pub fn parse(text: &str) -> Result<Config, ConfigError> {
        if text.lines().all(|line| line.trim().is_empty() || line.trim_start().starts_with('#')) {
            return Err(ConfigError {
                message: "machine.yaml is empty: write at least `{}` for an empty configuration".into(),
                location: None,
            });
        }
        // Bounded: aliases cannot expand a small file into an enormous one.
        cosi::resource::from_yaml(text)
            .map_err(|error| ConfigError { location: error.location(), message: error.to_string() })
    }

    /// The NTP servers to use.
    pub fn time_servers(&self) -> Vec<String> {
        match self.time.servers.is_empty() {
            true => vec!["pool.ntp.org".to_owned()],
            false => self.time.servers.clone(),
        }
    }
}

/// Reads an empty key (`files:` with its last entry deleted) as the default.
fn nullable<'de, D: Deserializer<'de>, T: Deserialize<'de> + Default>(deserializer: D) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// Declares a string newtype checked while it is deserialized, so that
/// serde_yaml reports a bad value with its line and column.
macro_rules! checked_string {
    ($(#[$meta:meta])* $name:ident, $check:path) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            /// The value as a string.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = String;

            fn try_from(value: String) -> Result<Self, String> {
                $check(&value)?;
                Ok($name(value))
            }
        }

        impl From<$name> for String {
            fn from(value: $name) -> String {
                value.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

checked_string!(
    /// A hostname: labels of letters, digits and `-`, separated by dots.
    Hostname,
    check_hostname
);
checked_string!(
    /// A link name: what `run/kernel/net.json` calls it.
    LinkName,
    check_link_name
);
checked_string!(
    /// An address in CIDR form, `192.168.50.10/24`.
    Cidr,
    check_cidr
);
checked_string!(
    /// An IP address.
    IpText,
    check_ip
);
checked_string!(
    /// A path under `etc/`, checked by the sandbox's rules (no `..`, not absolute).
    EtcPath,
    check_etc_path
);
checked_string!(
    /// A sysctl key, `net.ipv4.ip_forward`: dot-separated names.
    SysctlKey,
    check_sysctl_key
);
checked_string!(
    /// A service name: letters, digits, `-` and `_`.
    ServiceName,
    check_service_name
);

impl Hostname {
    /// The first label (`demo-node` of `demo-node.lab.local`) and the rest.
    pub fn split(&self) -> (&str, &str) {
        self.0.split_once('.').unwrap_or((&self.0, ""))
    }
}

impl EtcPath {
    /// The path as the sandbox takes it.
    pub fn relative(&self) -> Result<RelativePath, crate::sandbox::SandboxError> {
        RelativePath::new(&self.0)
    }
}

impl SysctlKey {
    /// The file under `proc/sys` (`net/ipv4/ip_forward`).
    pub fn proc_path(&self) -> String {
        format!("proc/sys/{}", self.0.replace('.', "/"))
    }
}

fn check_hostname(value: &str) -> Result<(), String> {
    let valid_label = |label: &str| {
        !label.is_empty()
            && label.len() <= 63
            && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            && !label.starts_with('-')
            && !label.ends_with('-')
    };
    match value.len() <= 253 && value.split('.').all(valid_label) {
        true => Ok(()),
        false => Err(format!(
            "invalid hostname {value:?}: use labels of letters, digits and `-` (not at either end), separated by dots"
        )),
    }
}

fn check_link_name(value: &str) -> Result<(), String> {
    match !value.is_empty()
        && value.len() <= 15
        && value.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        true => Ok(()),
        false => Err(format!("invalid link name {value:?}: up to 15 letters, digits, `-`, `_` or `.`")),
    }
}

fn check_cidr(value: &str) -> Result<(), String> {
    let invalid =
        || format!("invalid address {value:?}: expected an address with a prefix length, like 192.168.50.10/24");
    let (ip, prefix) = value.split_once('/').ok_or_else(invalid)?;
    let ip: std::net::IpAddr = ip.parse().map_err(|_| invalid())?;
    let prefix: u8 = prefix.parse().map_err(|_| invalid())?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    match prefix <= max {
        true => Ok(()),
        false => Err(format!("invalid address {value:?}: the prefix length is at most {max}")),
    }
}

fn check_ip(value: &str) -> Result<(), String> {
    value.parse::<std::net::IpAddr>().map(drop).map_err(|_| format!("invalid IP address {value:?}"))
}

fn check_etc_path(value: &str) -> Result<(), String> {
    RelativePath::new(value).map(drop).map_err(|error| format!("{error} (paths are relative to etc/)"))
}

fn check_sysctl_key(value: &str) -> Result<(), String> {
    let valid_part =
        |part: &str| !part.is_empty() && part.chars().all(|c| c.is_ascii_alphanumeric() || "-_".contains(c));
    match value.split('.').all(valid_part) {
        true => Ok(()),
        false => {
            Err(format!("invalid sysctl key {value:?}: expected dot-separated names of letters, digits, `-` and `_`"))
        }
    }
}

fn check_service_name(value: &str) -> Result<(), String> {
    match !value.is_empty() && value.len() <= 64 && value.chars().all(|c| c.is_ascii_alphanumeric() || "-_".contains(c))
    {
        true => Ok(()),
        false => Err(format!("invalid service name {value:?}: up to 64 letters, digits, `-` or `_`")),
    }
}

/// A sysctl value: YAML may write it as a string or a number; it is kept as text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct SysctlValue(pub String);

impl<'de> Deserialize<'de> for SysctlValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Text(String),
            Integer(i64),
            Boolean(bool),
        }
        let text = match Raw::deserialize(deserializer) {
            Ok(Raw::Text(text)) => text,
            Ok(Raw::Integer(number)) => number.to_string(),
            Ok(Raw::Boolean(flag)) => u8::from(flag).to_string(),
            Err(_) => return Err(serde::de::Error::custom("a sysctl value is a string or a number")),
        };
        if text.contains('\n') {
            return Err(serde::de::Error::custom("a sysctl value is one line"));
        }
        Ok(SysctlValue(text))
    }
}

/// Permission bits, written in octal: `0644`, `'0644'` or `644`.
///
/// YAML reads `0644` as the string "0644", which is what a mode looks like;
/// a plain number (`644`) is read the same way, digit by digit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileMode(pub u32);

impl Default for FileMode {
    fn default() -> Self {
        FileMode(0o644)
    }
}

impl Serialize for FileMode {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&format!("{:04o}", self.0))
    }
}

impl<'de> Deserialize<'de> for FileMode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Text(String),
            Integer(u64),
        }
        let text = match Raw::deserialize(deserializer) {
            Ok(Raw::Text(text)) => text,
            Ok(Raw::Integer(number)) => number.to_string(),
            Err(_) => return Err(serde::de::Error::custom("a mode is written in octal, like 0644")),
        };
        let digits = text.strip_prefix("0o").unwrap_or(&text);
        match u32::from_str_radix(digits, 8) {
            Ok(mode) if !digits.is_empty() && mode <= 0o7777 => Ok(FileMode(mode)),
            _ => Err(serde::de::Error::custom(format!("invalid mode {text:?}: expected octal digits, like 0644"))),
        }
    }
}

/// A duration written as text: `5s`, `500ms`, `1m 30s`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TextDuration(pub Duration);

impl Serialize for TextDuration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&humantime::format_duration(self.0).to_string())
    }
}

impl<'de> Deserialize<'de> for TextDuration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        match humantime::parse_duration(&text) {
            Ok(duration) if !duration.is_zero() => Ok(TextDuration(duration)),
            Ok(_) => Err(serde::de::Error::custom(format!("invalid duration {text:?}: it must be longer than zero"))),
            Err(error) => Err(serde::de::Error::custom(format!("invalid duration {text:?}: {error} (try `5s`)"))),
        }
    }
}

/// The `files` list: each path once.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Vec<FileConfig>", into = "Vec<FileConfig>")]
pub struct Files(pub Vec<FileConfig>);

impl TryFrom<Vec<FileConfig>> for Files {
    type Error = String;

    fn try_from(files: Vec<FileConfig>) -> Result<Self, String> {
        for (i, file) in files.iter().enumerate() {
            if files[..i].iter().any(|other| other.path == file.path) {
                return Err(format!("files: the path {:?} is listed twice", file.path.as_str()));
            }
        }
        Ok(Files(files))
    }
}

impl From<Files> for Vec<FileConfig> {
    fn from(files: Files) -> Self {
        files.0
    }
}

/// The `services` list: each name once.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Vec<ServiceConfig>", into = "Vec<ServiceConfig>")]
pub struct Services(pub Vec<ServiceConfig>);

impl TryFrom<Vec<ServiceConfig>> for Services {
    type Error = String;

    fn try_from(services: Vec<ServiceConfig>) -> Result<Self, String> {
        for (i, service) in services.iter().enumerate() {
            if services[..i].iter().any(|other| other.name == service.name) {
                return Err(format!("services: the name {:?} is listed twice", service.name.as_str()));
            }
        }
        Ok(Services(services))
    }
}

impl From<Services> for Vec<ServiceConfig> {
    fn from(services: Services) -> Self {
        services.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_starter_parses_as_documented() {
        let config = Config::parse(STARTER).expect("the starter parses");
        assert_eq!(config.hostname.as_ref().map(Hostname::as_str), Some("demo-node"));
        assert_eq!(config.network.nameservers, [IpText("9.9.9.9".into())]);
        assert_eq!(config.network.search_domains, ["lab.local"]);
        assert_eq!(config.network.interfaces.len(), 2);
        assert!(config.network.interfaces[0].dhcp);
        assert_eq!(config.network.interfaces[1].addresses, [Cidr("192.168.50.10/24".into())]);
        assert_eq!(config.time_servers(), ["time.example.org"]);
        assert_eq!(config.sysctls.len(), 2);
        assert_eq!(config.sysctls[&SysctlKey("vm.swappiness".into())], SysctlValue("10".into()));
        assert_eq!(config.files.0[0].mode, FileMode(0o644));
        assert_eq!(config.files.0[0].content, "Welcome to the example OS\n");
        assert_eq!(config.services.0[1].crash_after, Some(TextDuration(Duration::from_secs(5))));
        assert!(config.services.0[0].requires_time);
    }

    #[test]
    fn round_trips_through_its_own_yaml() {
        // The parsed form is stored in the MachineConfig resource as YAML and read back.
        let config = Config::parse(STARTER).expect("the starter parses");
        let yaml = serde_yaml_ng::to_string(&config).expect("serializes");
        assert_eq!(Config::parse(&yaml).expect("parses again"), config);
    }

    #[test]
    fn unknown_keys_are_errors_naming_the_key_with_its_location() {
        let error = Config::parse("hostname: a\nhostnme: b\n").expect_err("unknown key");
        assert!(error.to_string().contains("unknown field `hostnme`"), "{error}");
        assert_eq!(error.location(), Some((2, 1)));
        let error = Config::parse("network:\n  interfaces:\n    - { name: eth0, dhpc: true }\n").expect_err("nested");
        assert!(error.to_string().contains("unknown field `dhpc`"), "{error}");
        assert_eq!(error.location().map(|(line, _)| line), Some(3));
    }

    #[test]
    fn invalid_yaml_says_where() {
        let error = Config::parse("hostname: [demo\n").expect_err("broken flow sequence");
        assert!(error.location().is_some(), "{error}");
        assert!(error.to_string().contains("line"), "{error}");
    }

    #[test]
    fn values_are_checked_where_they_are_written() {
        for (yaml, expected, line) in [
            ("files:\n  - { path: ../../x, content: x }\n", "`..`", 2),
            ("files:\n  - { path: /etc/passwd, content: x }\n", "absolute", 2),
            ("hostname: -bad-\n", "invalid hostname", 1),
            ("network:\n  interfaces:\n    - { name: eth1, addresses: [10.0.0.1] }\n", "prefix length", 3),
            ("sysctls:\n  vm..x: '1'\n", "invalid sysctl key", 2),
            ("services:\n  - { name: web, crashAfter: soon }\n", "invalid duration", 2),
            ("files:\n  - { path: motd, mode: 0999, content: x }\n", "invalid mode", 2),
        ] {
            let error = Config::parse(yaml).expect_err(yaml);
            assert!(error.to_string().contains(expected), "{yaml}: {error}");
            assert_eq!(error.location().map(|(line, _)| line), Some(line), "{yaml}: {error}");
        }
    }

    #[test]
    fn lists_refuse_duplicates() {
        let error = Config::parse("services:\n  - { name: web }\n  - { name: web }\n").expect_err("twice");
        assert!(error.to_string().contains("listed twice"), "{error}");
    }

    #[test]
    fn modes_read_as_octal_in_every_spelling() {
        for (yaml, mode) in [("0644", 0o644), ("'0600'", 0o600), ("755", 0o755), ("'0o640'", 0o640)] {
            let config = Config::parse(&format!("files:\n  - {{ path: a, mode: {yaml}, content: x }}\n"))
                .unwrap_or_else(|error| panic!("{yaml}: {error}"));
            assert_eq!(config.files.0[0].mode, FileMode(mode), "{yaml}");
        }
    }

    #[test]
    fn empty_keys_are_empty_lists() {
        let config = Config::parse("files:\nservices:\nsysctls:\nnetwork:\n  nameservers:\n").expect("parses");
        assert_eq!(config, Config::default());
    }

    #[test]
    fn empty_files_are_refused() {
        assert!(Config::parse("").is_err());
        assert!(Config::parse("# nothing\n\n").is_err());
        assert_eq!(Config::parse("{}").expect("explicitly empty"), Config::default());
    }

    #[test]
    fn sysctl_keys_map_to_proc_files() {
        assert_eq!(SysctlKey("net.ipv4.ip_forward".into()).proc_path(), "proc/sys/net/ipv4/ip_forward");
    }
}
