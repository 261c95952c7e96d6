//! `platform.json` (what a cloud's metadata service would say about the
//! machine) and `cmdline` (the kernel command line): the two sources below
//! `machine.yaml`.

use serde::{Deserialize, Serialize};

use crate::machine_config::{Cidr, Hostname, IpText, LinkName};

/// The `platform.json` a first boot writes.
pub const STARTER_PLATFORM: &str = r#"{"hostname":"platform-host","dns":["169.254.169.253"],"instanceId":"i-123"}
"#;

/// The `cmdline` a first boot writes.
pub const STARTER_CMDLINE: &str = "hostname=cmdline-host nameserver=1.1.1.1\n";

/// The platform's metadata: `platform.json`. Every key is optional; unknown
/// keys are errors, so a typo does not pass silently.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PlatformConfig {
    /// The hostname the platform assigns.
    #[serde(default)]
    pub hostname: Option<Hostname>,
    /// DNS servers.
    #[serde(default)]
    pub dns: Vec<IpText>,
    /// Addresses the platform assigns.
    #[serde(default)]
    pub addresses: Vec<PlatformAddress>,
    /// The instance's ID.
    #[serde(default)]
    pub instance_id: Option<String>,
}

/// An address the platform assigns to a link.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PlatformAddress {
    /// The link.
    pub link: LinkName,
    /// The address, in CIDR form.
    pub address: Cidr,
}

/// Why `platform.json` was not accepted.
#[derive(Debug, thiserror::Error)]
#[error("{message} at line {line} column {column}")]
pub struct PlatformError {
    message: String,
    line: usize,
    column: usize,
}

impl PlatformConfig {
    /// Parses `platform.json`.
    pub fn parse(text: &str) -> Result<PlatformConfig, PlatformError> {
        serde_json::from_str(text).map_err(|error| {
            // serde_json's message ends with its own "at line L column C"; keep one.
            let message = error.to_string();
            let message = match message.rfind(" at line ") {
                Some(at) => message[..at].to_owned(),
                None => message,
            };
            PlatformError { message, line: error.line(), column: error.column() }
        })
    }
}

/// What the OS takes from the kernel command line: `hostname=NAME` and
/// `nameserver=IP` (repeatable); other parameters are the kernel's business.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cmdline {
    /// `hostname=`.
    pub hostname: Option<String>,
    /// Every `nameserver=`.
    pub nameservers: Vec<String>,
}

impl Cmdline {
    /// Parses a command line; values that are not valid are skipped with a warning.
    pub fn parse(text: &str) -> Cmdline {
        let mut cmdline = Cmdline::default();
        for parameter in text.split_whitespace() {
            match parameter.split_once('=') {
                Some(("hostname", value)) => match Hostname::try_from(value.to_owned()) {
                    Ok(_) => cmdline.hostname = Some(value.to_owned()),
                    Err(error) => tracing::warn!("cmdline: ignoring hostname={value}: {error}"),
                },
                Some(("nameserver", value)) => match IpText::try_from(value.to_owned()) {
                    Ok(_) => cmdline.nameservers.push(value.to_owned()),
                    Err(error) => tracing::warn!("cmdline: ignoring nameserver={value}: {error}"),
                },
                _ => (),
            }
        }
        cmdline
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_starters_parse() {
        let platform = PlatformConfig::parse(STARTER_PLATFORM).expect("parses");
        assert_eq!(platform.hostname.as_ref().map(Hostname::as_str), Some("platform-host"));
        assert_eq!(platform.dns.len(), 1);
        assert_eq!(platform.instance_id.as_deref(), Some("i-123"));
        let cmdline = Cmdline::parse(STARTER_CMDLINE);
        assert_eq!(cmdline.hostname.as_deref(), Some("cmdline-host"));
        assert_eq!(cmdline.nameservers, ["1.1.1.1"]);
    }

    #[test]
    fn platform_errors_say_where() {
        let error = PlatformConfig::parse("{\n  \"hostname\": \"a\",\n  \"dsn\": []\n}").expect_err("typo");
        assert_eq!(error.to_string().matches(" at line ").count(), 1, "{error}");
        assert!(error.to_string().contains("unknown field `dsn`"), "{error}");
        assert!(error.to_string().contains("line 3"), "{error}");
        let error = PlatformConfig::parse("{\"hostname\": ").expect_err("truncated");
        assert!(error.to_string().contains("line 1"), "{error}");
    }

    #[test]
    fn cmdline_skips_what_is_not_ours_or_not_valid() {
        let cmdline = Cmdline::parse("console=ttyS0 hostname=-x- nameserver=nope nameserver=8.8.8.8 quiet");
        assert_eq!(cmdline, Cmdline { hostname: None, nameservers: vec!["8.8.8.8".into()] });
    }
}
