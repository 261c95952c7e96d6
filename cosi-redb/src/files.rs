//! The files a store is opened with: their modes, and the key file.
//!
//! A store's metadata is never encrypted and its key decrypts every spec,
//! so both files are their owner's only. [`check_private`] is the one check
//! of that rule: [`RedbState::open`](crate::RedbState::open) applies it to
//! the store file and the key file (warning, or refusing with
//! [`Options::require_private_files`](crate::Options::require_private_files)),
//! and `cosictl` to the secret files it reads.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use zeroize::Zeroize;

use crate::EncryptionKey;

/// Why a file that should be its owner's only is not, or cannot be checked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NotPrivate {
    /// Group or others may read or write it.
    #[error("its mode {mode:o} lets group or others read or write it; chmod 600 it")]
    Open {
        /// Its permission bits.
        mode: u32,
    },
    /// Its mode cannot be read.
    #[error("cannot read its mode: {0}")]
    Stat(#[source] std::io::Error),
}

/// Checks that only its owner may read or write the file at `path` (its
/// mode has no group or other bits), following links.
pub fn check_private(path: &Path) -> Result<(), NotPrivate> {
    let mode = std::fs::metadata(path).map_err(NotPrivate::Stat)?.permissions().mode() & 0o7777;
    match mode & 0o077 {
        0 => Ok(()),
        _ => Err(NotPrivate::Open { mode }),
    }
}

/// Why a key file gives no key.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyFileError {
    /// The file cannot be read.
    #[error("{0}")]
    Read(#[source] std::io::Error),
    /// It holds neither 32 bytes nor 64 hexadecimal digits.
    #[error("it holds {len} bytes: expected 32 raw bytes or 64 hexadecimal digits")]
    Malformed {
        /// How many bytes it holds.
        len: usize,
    },
    /// Group or others may read it, and the options refuse that.
    #[error(transparent)]
    NotPrivate(#[from] NotPrivate),
}

impl EncryptionKey {
    /// The key in the file at `path`: 32 raw bytes, or 64 hexadecimal
    /// digits (surrounding whitespace ignored). Every copy of the bytes read
    /// is wiped. This does not check the file's mode ([`check_private`] does).
    pub fn from_file(path: &Path) -> Result<Self, KeyFileError> {
        let mut bytes = std::fs::read(path).map_err(KeyFileError::Read)?;
        let key = match <[u8; 32]>::try_from(bytes.as_slice()) {
            Ok(raw) => Ok(EncryptionKey::new(raw)),
            Err(_) => {
                let text = std::str::from_utf8(&bytes).map(str::trim).unwrap_or_default();
                let mut decoded = [0u8; 32];
                let key = match decode_hex(text, &mut decoded) {
                    true => Ok(EncryptionKey::new(decoded)),
                    false => Err(KeyFileError::Malformed { len: bytes.len() }),
                };
                decoded.zeroize();
                key
            }
        };
        // The key wipes itself when dropped; the bytes read are wiped here.
        bytes.zeroize();
        key
    }
}

/// Decodes 64 hexadecimal digits into `out`; `false` for anything else.
fn decode_hex(text: &str, out: &mut [u8; 32]) -> bool {
    let digits = text.as_bytes();
    if digits.len() != 64 {
        return false;
    }
    for (byte, pair) in out.iter_mut().zip(digits.chunks_exact(2)) {
        let digit = |index: usize| char::from(pair[index]).to_digit(16);
        match (digit(0), digit(1)) {
            (Some(high), Some(low)) => match u8::try_from(high * 16 + low) {
                Ok(value) => *byte = value,
                Err(_) => return false,
            },
            _ => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hexadecimal_keys_decode_and_nothing_else_does() {
        let mut out = [0u8; 32];
        assert!(decode_hex(&"0aFf".repeat(16), &mut out));
        assert_eq!(out[..4], [0x0a, 0xff, 0x0a, 0xff]);
        for bad in ["", "0a", &"0g".repeat(32), &"0a".repeat(33), &"é".repeat(32)] {
            assert!(!decode_hex(bad, &mut out), "{bad:?}");
        }
    }
}
