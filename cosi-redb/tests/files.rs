//! The files a store opens with: a store file or key file that group or
//! others may read or write is opened with a warning, or refused when the
//! options ask; a key file holds 32 raw bytes or 64 hexadecimal digits.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;

use cosi_redb::{EncryptionKey, Error, KeyFileError, NotPrivate, Options, RedbState};
use parking_lot::Mutex;

use common::{KEY, dir, file};

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// Opens the store, returning what it logged.
fn open_logged(path: &Path, options: Options) -> (Result<RedbState, Error>, String) {
    let logged = Arc::new(Mutex::new(Vec::new()));
    let writer = Arc::clone(&logged);
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .without_time()
        .with_writer(move || Log(Arc::clone(&writer)))
        .finish();
    let opened = tracing::subscriber::with_default(subscriber, || RedbState::open(path, options));
    let text = String::from_utf8_lossy(&logged.lock()).into_owned();
    (opened, text)
}

struct Log(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Log {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_store_file_others_may_read_is_opened_with_a_warning_or_refused() {
    let dir = dir();
    let path = file(dir.path());
    let (opened, logged) = open_logged(&path, Options::default());
    drop(opened.expect("a new store opens"));
    assert_eq!(std::fs::metadata(&path).expect("stat").permissions().mode() & 0o777, 0o600);
    assert!(!logged.contains("WARN"), "a private store is opened quietly: {logged}");

    chmod(&path, 0o644);
    let (opened, logged) = open_logged(&path, Options::default());
    drop(opened.expect("opened, by default"));
    assert!(logged.contains("WARN") && logged.contains(&path.display().to_string()), "{logged}");
    assert!(logged.contains("mode 644") && logged.contains("chmod 600"), "{logged}");

    for mode in [0o644, 0o660, 0o602] {
        chmod(&path, mode);
        let (opened, _) = open_logged(&path, Options::default().require_private_files());
        let error = opened.expect_err("refused when asked");
        assert!(matches!(&error, Error::NotPrivate { source: NotPrivate::Open { mode: found }, .. } if *found == mode));
        let message = error.to_string();
        assert!(message.contains(&path.display().to_string()) && message.contains("chmod 600"), "{message}");
    }
    chmod(&path, 0o600);
    drop(RedbState::open(&path, Options::default().require_private_files()).expect("a private store opens"));
}

#[test]
fn a_key_file_others_may_read_is_used_with_a_warning_or_refused() {
    let dir = dir();
    let path = file(dir.path());
    let key_file = dir.path().join("key");
    std::fs::write(&key_file, format!("  {}\n", hex(&KEY))).expect("write the key");
    chmod(&key_file, 0o600);
    let (opened, logged) = open_logged(&path, Options::default().encryption_key_file(&key_file));
    drop(opened.expect("the key file's key makes the store"));
    assert!(!logged.contains("WARN"), "{logged}");
    // The key from the file is the key: the store opens with it given directly.
    drop(RedbState::open(&path, Options::default().encryption_key(EncryptionKey::new(KEY))).expect("the same key"));
    let wrong = RedbState::open(&path, Options::default().encryption_key(EncryptionKey::new([1; 32])));
    assert!(matches!(wrong, Err(Error::WrongKey)), "{wrong:?}");

    chmod(&key_file, 0o640);
    let (opened, logged) = open_logged(&path, Options::default().encryption_key_file(&key_file));
    drop(opened.expect("opened, by default"));
    assert!(logged.contains("WARN") && logged.contains("encryption key file"), "{logged}");
    assert!(logged.contains("mode 640"), "{logged}");

    let (opened, _) = open_logged(&path, Options::default().encryption_key_file(&key_file).require_private_files());
    let error = opened.expect_err("refused when asked");
    assert!(matches!(error, Error::KeyFile { source: KeyFileError::NotPrivate(_), .. }), "{error:?}");
    assert!(error.to_string().contains("chmod 600"), "{error}");

    // Raw bytes are a key too; both a key and a key file are one too many.
    std::fs::write(&key_file, KEY).expect("write the raw key");
    chmod(&key_file, 0o600);
    drop(RedbState::open(&path, Options::default().encryption_key_file(&key_file)).expect("the raw key"));
    let both = Options::default().encryption_key(EncryptionKey::new(KEY)).encryption_key_file(&key_file);
    let error = RedbState::open(&path, both).expect_err("two keys");
    assert!(error.to_string().contains("both a key and a key file"), "{error}");
}

#[test]
fn a_key_file_that_holds_no_key_says_what_it_holds() {
    let dir = dir();
    let key_file = dir.path().join("key");
    for (contents, expected) in [
        (b"abc".to_vec(), "it holds 3 bytes: expected 32 raw bytes or 64 hexadecimal digits"),
        ("0g".repeat(32).into_bytes(), "it holds 64 bytes"),
        (vec![0; 33], "it holds 33 bytes"),
    ] {
        std::fs::write(&key_file, &contents).expect("write");
        let error = EncryptionKey::from_file(&key_file).expect_err("not a key");
        assert!(error.to_string().contains(expected), "{error}");
    }
    let error = EncryptionKey::from_file(&dir.path().join("missing")).expect_err("no file");
    assert!(matches!(error, KeyFileError::Read(_)), "{error:?}");
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}
