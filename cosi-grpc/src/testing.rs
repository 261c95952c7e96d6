//! Certificates for tests of mutual TLS (feature `testing`): a CA generated
//! per run and the certificates it signs, so that no key is ever committed.
//!
//! ```
//! use cosi_grpc::{READER_ROLE, testing::Pki};
//!
//! let pki = Pki::new("test CA");
//! let server = pki.server_tls(); // for `Security::MutualTls`, named `localhost`
//! let reader = pki.client_tls(&[READER_ROLE]); // for `ClientSecurity::MutualTls`
//! assert_eq!(server.client_ca, reader.server_ca);
//! ```
//!
//! # Panics
//!
//! Every function panics if the certificate library fails, which it does
//! only for parameters these functions never pass: it is test support.

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

use crate::{ClientTls, ServerTls};

/// A certificate authority and what it signs.
pub struct Pki {
    ca_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Pki {
    /// A new CA whose common name is `name`.
    pub fn new(name: &str) -> Self {
        let key = KeyPair::generate().expect("a CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let certificate = params.self_signed(&key).expect("a self-signed CA");
        Pki { ca_pem: certificate.pem(), issuer: Issuer::new(params, key) }
    }

    /// The CA's certificate (PEM).
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// A certificate and its key (PEM) for the DNS `names`, with
    /// `organizations` in its subject (where COSI reads a client's roles).
    pub fn issue(&self, names: &[&str], organizations: &[&str]) -> (String, String) {
        let key = KeyPair::generate().expect("a key");
        let names: Vec<String> = names.iter().map(|name| (*name).to_owned()).collect();
        let mut params = CertificateParams::new(names).expect("certificate parameters");
        params.distinguished_name.push(DnType::CommonName, "cosi test");
        for organization in organizations {
            params.distinguished_name.push(DnType::OrganizationName, *organization);
        }
        let certificate = params.signed_by(&key, &self.issuer).expect("a signed certificate");
        (certificate.pem(), key.serialize_pem())
    }

    /// A server named `localhost` that accepts the clients this CA signs.
    pub fn server_tls(&self) -> ServerTls {
        let (certificate, key) = self.issue(&["localhost"], &[]);
        ServerTls { certificate, key, client_ca: self.ca_pem.clone() }
    }

    /// A client with `roles` (such as [`ADMIN_ROLE`](crate::ADMIN_ROLE)) of
    /// the server [`server_tls`](Self::server_tls) describes.
    pub fn client_tls(&self, roles: &[&str]) -> ClientTls {
        let (certificate, key) = self.issue(&["client"], roles);
        ClientTls { server_ca: self.ca_pem.clone(), certificate, key, server_name: "localhost".into() }
    }
}
