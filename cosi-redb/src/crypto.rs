//! Encryption at rest of specs: AES-256-GCM with a key the caller supplies.
//!
//! A sealed spec is `0x01 || 12-byte random nonce || ciphertext and tag`, the
//! layout of Go COSI's encryption marshaler. The associated data binds it to
//! its record: the record's key (namespace, type, ID) and, from record format
//! 2 on, the record's whole clear header (metadata with its version, spec
//! tag), so a sealed spec moved to another record, or an older one put back
//! under newer metadata, fails to open (see `format.rs`).

use std::fmt;

use aes_gcm::aead::{Aead, Generate, Payload};
use aes_gcm::{Aes256Gcm, KeyInit, Nonce};
use zeroize::Zeroize;

use crate::Error;

/// The first byte of a sealed spec: the format, so another one can follow.
const FORMAT: u8 = 0x01;
const NONCE_LEN: usize = 12;
const TAG_LEN: usize = 16;

/// A 256-bit AES key for encrypting specs at rest.
///
/// Its `Debug` output never shows the key, and its bytes are overwritten with
/// zeros when it is dropped (so are the cipher's round keys, when the store closes).
#[derive(Clone, PartialEq, Eq)]
pub struct EncryptionKey([u8; 32]);

impl Drop for EncryptionKey {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

impl EncryptionKey {
    /// A key from its 32 bytes.
    pub fn new(bytes: [u8; 32]) -> Self {
        EncryptionKey(bytes)
    }
}

impl From<[u8; 32]> for EncryptionKey {
    fn from(bytes: [u8; 32]) -> Self {
        EncryptionKey(bytes)
    }
}

impl TryFrom<&[u8]> for EncryptionKey {
    type Error = Error;

    /// Fails unless `bytes` is exactly 32 bytes long.
    fn try_from(bytes: &[u8]) -> Result<Self, Error> {
        let bytes: [u8; 32] = bytes
            .try_into()
            .map_err(|_| Error::Encryption(format!("the key is {} bytes long, AES-256 needs 32", bytes.len())))?;
        Ok(EncryptionKey(bytes))
    }
}

impl fmt::Debug for EncryptionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("EncryptionKey(..)")
    }
}

/// Seals and opens specs with one key.
pub(crate) struct Cipher(Aes256Gcm);

impl Cipher {
    pub(crate) fn new(key: &EncryptionKey) -> Self {
        let mut bytes = aes_gcm::Key::<Aes256Gcm>::from(key.0);
        let cipher = Cipher(Aes256Gcm::new(&bytes));
        // The copy made for the key schedule is wiped too.
        bytes.as_mut_slice().zeroize();
        cipher
    }

    /// `plaintext` sealed, bound to `aad`.
    pub(crate) fn seal(&self, plaintext: &[u8], aad: &[u8]) -> Result<Vec<u8>, Error> {
        let nonce = Nonce::generate();
        let ciphertext = self
            .0
            .encrypt(&nonce, Payload { msg: plaintext, aad })
            .map_err(|_| Error::Encryption("AES-GCM refused to encrypt the spec".to_owned()))?;
        let mut sealed = Vec::with_capacity(1 + NONCE_LEN + ciphertext.len());
        sealed.push(FORMAT);
        sealed.extend_from_slice(&nonce);
        sealed.extend_from_slice(&ciphertext);
        Ok(sealed)
    }

    /// The plaintext of `sealed`; fails with a wrong key, other associated data or damaged bytes.
    pub(crate) fn open(&self, sealed: &[u8], aad: &[u8]) -> Result<Vec<u8>, Error> {
        let Some((&format, rest)) = sealed.split_first() else {
            return Err(Error::Encryption("the encrypted spec is empty".to_owned()));
        };
        if format != FORMAT {
            return Err(Error::Encryption(format!("unknown encrypted data format {format:#04x}")));
        }
        if rest.len() < NONCE_LEN + TAG_LEN {
            return Err(Error::Encryption("the encrypted spec is too short".to_owned()));
        }
        let (nonce, ciphertext) = rest.split_at(NONCE_LEN);
        let nonce = Nonce::try_from(nonce)
            .map_err(|_| Error::Encryption("the nonce of the encrypted spec is malformed".to_owned()))?;
        self.0
            .decrypt(&nonce, Payload { msg: ciphertext, aad })
            .map_err(|_| Error::Encryption("cannot decrypt a spec: the key is wrong or the data is damaged".to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_wrong_key() {
        let cipher = Cipher::new(&EncryptionKey::new([7; 32]));
        let sealed = cipher.seal(b"secret", b"aad").expect("seal");
        assert_eq!(sealed[0], FORMAT);
        assert_eq!(sealed.len(), 1 + NONCE_LEN + 6 + TAG_LEN);
        assert_eq!(cipher.open(&sealed, b"aad").expect("open"), b"secret");

        let other = Cipher::new(&EncryptionKey::new([8; 32]));
        assert!(matches!(other.open(&sealed, b"aad"), Err(Error::Encryption(_))));
        assert!(matches!(cipher.open(&sealed, b"other"), Err(Error::Encryption(_))));
        assert!(matches!(cipher.open(&sealed[..10], b"aad"), Err(Error::Encryption(_))));
        assert!(matches!(cipher.open(&[], b"aad"), Err(Error::Encryption(_))));
        let mut wrong_format = sealed.clone();
        wrong_format[0] = 2;
        assert!(matches!(cipher.open(&wrong_format, b"aad"), Err(Error::Encryption(_))));
    }

    #[test]
    fn nonces_differ() {
        let cipher = Cipher::new(&EncryptionKey::new([7; 32]));
        assert_ne!(cipher.seal(b"x", b"").expect("seal"), cipher.seal(b"x", b"").expect("seal"));
    }

    #[test]
    fn key_length_is_checked_and_never_printed() {
        assert!(EncryptionKey::try_from(&[0u8; 31][..]).is_err());
        let key = EncryptionKey::try_from(&[0x5a; 32][..]).expect("32 bytes");
        assert_eq!(format!("{key:?}"), "EncryptionKey(..)");
    }
}
