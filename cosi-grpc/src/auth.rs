//! Who may do what: roles from the client certificate.
//!
//! Over mutual TLS the server reads the roles from the Organization (`O=`)
//! entries of the client certificate's subject, as Talos reads `os:admin` and
//! `os:reader`: [`ADMIN_ROLE`] may read and write, [`READER_ROLE`] may only
//! read and does not see resources whose definition is sensitive. A
//! certificate with neither role is refused.
//!
//! A Unix socket (mode 0600) and an explicitly insecure loopback listener
//! trust their callers: every call has the admin role there.

use tonic::transport::CertificateDer;

/// The Organization that grants read-write access.
pub const ADMIN_ROLE: &str = "cosi:admin";

/// The Organization that grants read-only access to non-sensitive resources.
pub const READER_ROLE: &str = "cosi:reader";

/// What a caller may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Read and write everything.
    Admin,
    /// Read resources whose definition is not sensitive; write nothing.
    Reader,
}

impl Role {
    /// The strongest role among the Organizations of the first (leaf) certificate, if any.
    pub fn from_certificates(certificates: &[CertificateDer<'static>]) -> Option<Role> {
        let leaf = certificates.first()?;
        let (_, certificate) = x509_parser::parse_x509_certificate(leaf.as_ref()).ok()?;
        let mut role = None;
        for organization in certificate.subject().iter_organization() {
            match organization.as_str() {
                Ok(ADMIN_ROLE) => return Some(Role::Admin),
                Ok(READER_ROLE) => role = Some(Role::Reader),
                _ => {}
            }
        }
        role
    }

    /// Whether the role may write.
    pub fn can_write(self) -> bool {
        self == Role::Admin
    }
}

/// How the server learns a caller's role.
#[derive(Clone, Debug)]
pub(crate) enum Authenticator {
    /// Every caller is an admin: the transport already restricts who can connect.
    Trusted,
    /// Roles come from the verified client certificate.
    Certificates,
}

impl Authenticator {
    /// The role of a caller whose verified client certificate (the leaf) is `certificate`.
    pub(crate) fn role(&self, certificate: Option<&CertificateDer<'static>>) -> Option<Role> {
        match self {
            Authenticator::Trusted => Some(Role::Admin),
            Authenticator::Certificates => {
                certificate.and_then(|leaf| Role::from_certificates(std::slice::from_ref(leaf)))
            }
        }
    }
}
