//! `network.HostnameSpecController`: applies the merged hostname.

use cosi::controller::Transform;

use crate::env::Env;
use crate::resources::{HostnameSpec, HostnameStatus};

/// The name `network.HostnameSpecController` registers under.
pub const HOSTNAME_SPEC: &str = "network.HostnameSpecController";

/// `network.HostnameSpecController`: applies the merged hostname, writing
/// `proc/sys/kernel/hostname` (and `domainname`), and reports it as
/// `HostnameStatus/hostname`.
///
/// A generic transform, each spec to the status of the same ID: it holds a
/// finalizer on the spec while it is applied, and lets the spec go once the
/// status is gone.
pub fn hostname_spec(env: Env) -> Transform<HostnameSpec, HostnameStatus> {
    Transform::<HostnameSpec, HostnameStatus>::new(
        HOSTNAME_SPEC,
        |spec| Some(spec.id().to_owned()),
        move |spec, status| {
            let domainname = if spec.domainname.is_empty() { "(none)" } else { &spec.domainname };
            env.sandbox.write_existing("proc/sys/kernel/hostname", &format!("{}\n", spec.hostname))?;
            env.sandbox.write_existing("proc/sys/kernel/domainname", &format!("{domainname}\n"))?;
            let before = status.fqdn();
            status.hostname.clone_from(&spec.hostname);
            status.domainname.clone_from(&spec.domainname);
            if status.fqdn() != before {
                tracing::info!("hostname is now {} (from the {} layer)", status.fqdn(), spec.layer.as_str());
            }
            Ok(())
        },
    )
    .input_finalizers()
}
