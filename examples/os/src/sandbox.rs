//! The sandbox: the one directory every side effect of the OS lands in.
//!
//! Every path the OS reads or writes goes through [`SandboxRoot`], and every
//! relative path through [`RelativePath`], so one place decides what stays
//! inside: a relative path is refused when it is empty, absolute, or has a
//! `..` (or `.`) component, and a path on disk is refused when a symbolic link
//! along it leads outside the root. A hostile `machine.yaml`
//! (`files: [{path: ../../x}]`) or a link planted in the sandbox gets a clear
//! error, and nothing is written outside.
//!
//! The checks run before each operation. A process that swaps a directory for
//! a link between the check and the write could still redirect it; nothing
//! but the OS itself and its user write in the sandbox, so this is about
//! mistakes and hostile configuration, not about a hostile local process.

use std::fmt;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

/// A path that stays inside whatever directory it is joined to: relative,
/// not empty, and made of plain names only (no `..`, no `.`, no root).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RelativePath(String);

/// Why the sandbox refused a path or an operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// The path itself would leave the directory it is relative to.
    #[error("path {path:?} is not allowed: {reason}")]
    InvalidPath {
        /// The path as given.
        path: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A symbolic link along the path leads outside the sandbox.
    #[error("path {path} leads outside the sandbox: {link} is a symbolic link to {target}")]
    Escape {
        /// The path asked for, relative to the sandbox.
        path: String,
        /// The link, relative to the sandbox.
        link: String,
        /// Where it points.
        target: String,
    },
    /// The directory holds files of its own and was not made by the OS: it
    /// is not taken, since each boot deletes `proc/`, `run/` and `etc/`.
    #[error(
        "{path} is not a sandbox of the example OS: it is not empty and has no {MARKER} file. Each boot deletes \
         and rebuilds proc/, run/ and etc/ in its sandbox, so the OS boots only in a new or empty directory, or in \
         one it made; choose another directory"
    )]
    NotASandbox {
        /// The directory.
        path: String,
    },
    /// The file system refused.
    #[error("{operation} {path}: {source}")]
    Io {
        /// What was being done: `read`, `write`, `remove`, ...
        operation: &'static str,
        /// The path, relative to the sandbox.
        path: String,
        /// Why.
        source: std::io::Error,
    },
}

impl RelativePath {
    /// Checks `path`: it must be relative, not empty, and have no `..`, `.`
    /// or empty components (`a//b`).
    pub fn new(path: &str) -> Result<Self, SandboxError> {
        let invalid = |reason| SandboxError::InvalidPath { path: path.to_owned(), reason };
        if path.is_empty() {
            return Err(invalid("it is empty"));
        }
        if path.starts_with('/') {
            return Err(invalid("it is absolute; paths are relative to the sandbox"));
        }
        if path.contains('\0') {
            return Err(invalid("it contains a NUL character"));
        }
        for part in path.split('/') {
            match part {
                "" => return Err(invalid("it has an empty component")),
                "." => return Err(invalid("it has a `.` component")),
                ".." => return Err(invalid("it has a `..` component, which would leave its directory")),
                _ => (),
            }
        }
        // `Path` agrees: every component is a plain name.
        if !Path::new(path).components().all(|component| matches!(component, Component::Normal(_))) {
            return Err(invalid("it is not made of plain names"));
        }
        Ok(RelativePath(path.to_owned()))
    }

    /// The path as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// `self/other`.
    pub fn join(&self, other: &RelativePath) -> RelativePath {
        RelativePath(format!("{}/{}", self.0, other.0))
    }

    /// The parent directory, if the path has one.
    pub fn parent(&self) -> Option<RelativePath> {
        self.0.rsplit_once('/').map(|(parent, _)| RelativePath(parent.to_owned()))
    }

    /// The last component.
    pub fn file_name(&self) -> &str {
        self.0.rsplit_once('/').map_or(&self.0, |(_, name)| name)
    }
}

impl fmt::Display for RelativePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Anything that names a path inside the sandbox: a checked [`RelativePath`],
/// or a string, checked on use.
pub trait IntoRelative {
    /// The checked path.
    fn into_relative(self) -> Result<RelativePath, SandboxError>;
}

impl IntoRelative for &RelativePath {
    fn into_relative(self) -> Result<RelativePath, SandboxError> {
        Ok(self.clone())
    }
}

impl IntoRelative for &str {
    fn into_relative(self) -> Result<RelativePath, SandboxError> {
        RelativePath::new(self)
    }
}

impl IntoRelative for &String {
    fn into_relative(self) -> Result<RelativePath, SandboxError> {
        RelativePath::new(self)
    }
}

/// The sandbox directory, and the only way the OS touches files.
#[derive(Clone, Debug)]
pub struct SandboxRoot {
    root: PathBuf,
}

/// The file that marks a directory as a sandbox, written when the OS makes it.
pub const MARKER: &str = ".example-os-sandbox";

/// What the marker says to whoever finds it.
const MARKER_TEXT: &str =
    "This directory is a sandbox of the example OS: each boot deletes and rebuilds proc/, run/ and etc/.\n";

/// How many random letters and digits name a temporary file: 62^12 names,
/// which nobody guesses ahead of a write.
const TEMPORARY_RANDOM: usize = 12;

impl SandboxRoot {
    /// The sandbox at `dir`, created when missing. The root is resolved once
    /// (it may itself be reached through links); everything below it is checked.
    ///
    /// Since a boot deletes `proc/`, `run/` and `etc/` of its sandbox, `dir`
    /// must be one: a directory with the [`MARKER`] file, which this writes
    /// when it makes the sandbox. An existing directory without it is taken
    /// only when it is empty, holds nothing but the files the user edits
    /// (`machine.yaml`, `platform.json`, `cmdline`, written before a first
    /// boot), or holds the configuration store (a sandbox made before the
    /// marker was); anything else is refused ([`SandboxError::NotASandbox`]).
    ///
    /// The sandbox is its owner's only (0700): it holds the machine's
    /// configuration. One that group or others may enter is made so, with a
    /// warning.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self, SandboxError> {
        use std::os::unix::fs::DirBuilderExt;

        let dir = dir.as_ref();
        let io = |operation, source| SandboxError::Io { operation, path: dir.display().to_string(), source };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|source| io("create the sandbox", source))?;
        let root = dir.canonicalize().map_err(|source| io("resolve the sandbox", source))?;
        let sandbox = SandboxRoot { root };
        sandbox.claim()?;
        let shown = format!("the sandbox {}", sandbox.root.display());
        restrict(&sandbox.root, &shown).map_err(|source| io("make private", source))?;
        Ok(sandbox)
    }

    /// Checks that the root is a sandbox, or may become one; marks it.
    fn claim(&self) -> Result<(), SandboxError> {
        let is_file = |path: &str| std::fs::symlink_metadata(self.root.join(path)).is_ok_and(|m| m.is_file());
        if is_file(MARKER) {
            return Ok(());
        }
        let io = |source| SandboxError::Io { operation: "list", path: self.root.display().to_string(), source };
        let user_files = [crate::env::MACHINE_YAML, crate::env::PLATFORM_JSON, crate::env::CMDLINE];
        let mut only_user_files = true;
        for entry in std::fs::read_dir(&self.root).map_err(io)? {
            let name = entry.map_err(io)?.file_name();
            only_user_files &= user_files.iter().any(|file| name == *file);
        }
        if !only_user_files && !is_file(crate::boot::CONFIG_STORE) {
            return Err(SandboxError::NotASandbox { path: self.root.display().to_string() });
        }
        self.write_atomic(MARKER, MARKER_TEXT, 0o644).map(drop)
    }

    /// The sandbox at `dir`, without touching the disk: the root is taken as
    /// it is (made absolute), not resolved. Links inside are then checked
    /// against the unresolved root, which can only refuse more, never less.
    pub fn at(dir: impl AsRef<Path>) -> Self {
        let dir = dir.as_ref();
        SandboxRoot { root: std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf()) }
    }

    /// The sandbox directory, resolved.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where `path` is on disk, once checked: lexically (see [`RelativePath`]),
    /// and against every symbolic link along it that exists, which must
    /// resolve inside the sandbox.
    pub fn resolve(&self, path: impl IntoRelative) -> Result<PathBuf, SandboxError> {
        let relative = path.into_relative()?;
        let mut current = self.root.clone();
        let mut walked = String::new();
        for part in relative.as_str().split('/') {
            current.push(part);
            if !walked.is_empty() {
                walked.push('/');
            }
            walked.push_str(part);
            let metadata = match std::fs::symlink_metadata(&current) {
                Ok(metadata) => metadata,
                // The rest does not exist yet: it will be created as plain
                // directories and files, inside.
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => break,
                Err(source) => return Err(SandboxError::Io { operation: "inspect", path: walked, source }),
            };
            if metadata.file_type().is_symlink() {
                let target = std::fs::read_link(&current).map_or_else(|_| "?".to_owned(), |t| t.display().to_string());
                let escape = || SandboxError::Escape {
                    path: relative.to_string(),
                    link: walked.clone(),
                    target: target.clone(),
                };
                // A dangling link is refused too: where it would lead cannot be checked.
                let resolved = current.canonicalize().map_err(|_| escape())?;
                if !resolved.starts_with(&self.root) {
                    return Err(escape());
                }
            }
        }
        Ok(self.root.join(relative.as_str()))
    }

    /// The contents of a file, or `None` when it does not exist.
    pub fn read(&self, path: impl IntoRelative) -> Result<Option<String>, SandboxError> {
        let relative = path.into_relative()?;
        let full = self.resolve(&relative)?;
        match std::fs::read_to_string(&full) {
            Ok(contents) => Ok(Some(contents)),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(self.io("read", &relative, source)),
        }
    }

    /// Whether the file or directory exists.
    pub fn exists(&self, path: impl IntoRelative) -> Result<bool, SandboxError> {
        Ok(self.resolve(path)?.exists())
    }

    /// Creates a directory and its parents.
    pub fn create_dir_all(&self, path: impl IntoRelative) -> Result<(), SandboxError> {
        let relative = path.into_relative()?;
        let full = self.resolve(&relative)?;
        std::fs::create_dir_all(&full).map_err(|source| self.io("create the directory", &relative, source))?;
        // The directories just created were checked as "not there yet"; check
        // again now that they exist, in case one raced into a link.
        self.resolve(&relative).map(drop)
    }

    /// Writes a file atomically: the contents go to a temporary file in the
    /// same directory, which is then renamed over the file, so a reader sees
    /// the old contents or the new ones, never a mix. Creates the parent
    /// directories. Returns whether anything changed: a file that already
    /// has these contents and mode is left alone.
    ///
    /// The temporary file has a random name and is created exclusively, with
    /// `mode` from the start: whatever is planted in the directory (a link
    /// out of the sandbox at a name it might use) is never followed.
    pub fn write_atomic(&self, path: impl IntoRelative, contents: &str, mode: u32) -> Result<bool, SandboxError> {
        let relative = path.into_relative()?;
        let full = self.resolve(&relative)?;
        if unchanged(&full, contents, Some(mode)) {
            return Ok(false);
        }
        if let Some(parent) = relative.parent() {
            self.create_dir_all(&parent)?;
        }
        let directory = full.parent().unwrap_or(&self.root);
        let written = (|| {
            // A new file under a random name, created exclusively: a link or
            // a file planted at a name is never opened, and the next name is
            // tried. Its mode is set at creation, so contents meant for the
            // owner only are never readable by others, even for a moment.
            let mut file = tempfile::Builder::new()
                .prefix(&format!(".{}.", relative.file_name()))
                .suffix(".tmp")
                .rand_bytes(TEMPORARY_RANDOM)
                .permissions(std::fs::Permissions::from_mode(mode))
                .tempfile_in(directory)?;
            file.write_all(contents.as_bytes())?;
            // The umask may have taken bits away at creation; this sets the
            // exact mode, on the open file rather than by its name.
            file.as_file().set_permissions(std::fs::Permissions::from_mode(mode))?;
            // A failed rename drops the temporary file, which removes it.
            file.persist(&full).map(drop).map_err(|error| error.error)
        })();
        written.map_err(|source| self.io("write", &relative, source))?;
        Ok(true)
    }

    /// Writes an existing file in place, as `/proc/sys` is written: no
    /// temporary file, and a missing file is an error (`NotFound`), never
    /// created. Returns whether the contents changed.
    pub fn write_existing(&self, path: impl IntoRelative, contents: &str) -> Result<bool, SandboxError> {
        let relative = path.into_relative()?;
        let full = self.resolve(&relative)?;
        if unchanged(&full, contents, None) {
            return Ok(false);
        }
        let written = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&full)
            .and_then(|mut file| file.write_all(contents.as_bytes()));
        written.map_err(|source| self.io("write", &relative, source))?;
        Ok(true)
    }

    /// Appends to a file, creating it (and its directories) when missing.
    pub fn append(&self, path: impl IntoRelative, contents: &str) -> Result<(), SandboxError> {
        let relative = path.into_relative()?;
        let full = self.resolve(&relative)?;
        if let Some(parent) = relative.parent() {
            self.create_dir_all(&parent)?;
        }
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&full)
            .and_then(|mut file| file.write_all(contents.as_bytes()))
            .map_err(|source| self.io("append to", &relative, source))
    }

    /// Removes a file; returns whether there was one.
    pub fn remove(&self, path: impl IntoRelative) -> Result<bool, SandboxError> {
        let relative = path.into_relative()?;
        let full = self.resolve(&relative)?;
        match std::fs::remove_file(&full) {
            Ok(()) => Ok(true),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(source) => Err(self.io("remove", &relative, source)),
        }
    }

    /// Removes a directory and everything in it; nothing when it is missing.
    pub fn remove_dir_all(&self, path: impl IntoRelative) -> Result<(), SandboxError> {
        let relative = path.into_relative()?;
        let full = self.resolve(&relative)?;
        match std::fs::remove_dir_all(&full) {
            Ok(()) => Ok(()),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(self.io("remove", &relative, source)),
        }
    }

    /// Takes away whatever access group and others have to a file the OS
    /// keeps private (`machine.yaml`), logging a warning when they had any.
    pub fn make_private(&self, path: impl IntoRelative) -> Result<(), SandboxError> {
        let relative = path.into_relative()?;
        let full = self.resolve(&relative)?;
        restrict(&full, relative.as_str()).map_err(|source| self.io("make private", &relative, source))
    }

    /// Opens (creating when missing) a file to lock, as the fake kernel does.
    pub fn open_lock_file(&self, path: impl IntoRelative) -> Result<std::fs::File, SandboxError> {
        let relative = path.into_relative()?;
        let full = self.resolve(&relative)?;
        std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&full)
            .map_err(|source| self.io("open", &relative, source))
    }

    fn io(&self, operation: &'static str, path: &RelativePath, source: std::io::Error) -> SandboxError {
        SandboxError::Io { operation, path: path.to_string(), source }
    }
}

/// Clears the group and other bits of `full`'s mode, when it has any, and
/// says so (naming it `shown`): the owner keeps what it had.
fn restrict(full: &Path, shown: &str) -> std::io::Result<()> {
    let mode = std::fs::metadata(full)?.permissions().mode() & 0o7777;
    if mode & 0o077 == 0 {
        return Ok(());
    }
    let private = mode & 0o700;
    std::fs::set_permissions(full, std::fs::Permissions::from_mode(private))?;
    tracing::warn!(
        "{shown} was open to group or others (mode {mode:o}): made it {private:o}, since it holds the machine's configuration"
    );
    Ok(())
}

/// Whether the file at `full` is a plain file with `contents` (and `mode`).
fn unchanged(full: &Path, contents: &str, mode: Option<u32>) -> bool {
    let Ok(metadata) = std::fs::symlink_metadata(full) else { return false };
    if !metadata.is_file() || mode.is_some_and(|mode| metadata.permissions().mode() & 0o7777 != mode) {
        return false;
    }
    std::fs::read(full).is_ok_and(|current| current == contents.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sandbox() -> (tempfile::TempDir, SandboxRoot) {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let root = SandboxRoot::open(dir.path().join("sandbox")).expect("the sandbox opens");
        (dir, root)
    }

    #[test]
    fn opens_only_a_directory_that_is_or_may_become_a_sandbox() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let at = |name: &str| dir.path().join(name);
        let write = |path: &Path, contents: &str| {
            std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
            std::fs::write(path, contents).expect("write");
        };

        // Made: marked. Marked: taken, whatever it holds.
        SandboxRoot::open(at("new")).expect("a new directory");
        assert!(at("new").join(MARKER).is_file());
        write(&at("new/etc/hosts"), "x");
        SandboxRoot::open(at("new")).expect("a marked sandbox");

        // Empty, only the user's files, or a sandbox made before the marker: taken and marked.
        std::fs::create_dir(at("empty")).expect("mkdir");
        write(&at("prepared/machine.yaml"), "hostname: x\n");
        write(&at("older").join(crate::boot::CONFIG_STORE), "a store");
        write(&at("older/etc/hosts"), "x");
        for name in ["empty", "prepared", "older"] {
            SandboxRoot::open(at(name)).unwrap_or_else(|error| panic!("{name}: {error}"));
            assert!(at(name).join(MARKER).is_file(), "{name}");
        }

        // Anything else: refused, and left as it was.
        write(&at("home/etc/keep"), "mine");
        let error = SandboxRoot::open(at("home")).expect_err("not a sandbox");
        assert!(matches!(error, SandboxError::NotASandbox { .. }), "{error}");
        assert!(error.to_string().contains("rebuilds proc/, run/ and etc/"), "{error}");
        assert!(!at("home").join(MARKER).exists());
        assert_eq!(std::fs::read_to_string(at("home/etc/keep")).expect("etc/keep"), "mine");
    }

    #[test]
    fn relative_paths_stay_inside() {
        for good in ["motd", "etc/hosts", "a/b/c.conf", "..hidden", "a..b"] {
            assert_eq!(RelativePath::new(good).expect(good).as_str(), good);
        }
        for (bad, reason) in [
            ("", "empty"),
            ("/etc/passwd", "absolute"),
            ("../../x", "`..`"),
            ("etc/../../x", "`..`"),
            ("a/..", "`..`"),
            ("./motd", "`.`"),
            ("a//b", "empty component"),
            ("a/", "empty component"),
            ("a\0b", "NUL"),
        ] {
            let error = RelativePath::new(bad).expect_err(bad).to_string();
            assert!(error.contains(reason), "{bad:?}: {error}");
        }
    }

    #[test]
    fn writes_atomically_inside_and_reports_changes() {
        let (_dir, root) = sandbox();
        assert!(root.write_atomic("etc/motd", "hello\n", 0o644).expect("write"));
        assert!(!root.write_atomic("etc/motd", "hello\n", 0o644).expect("same again"));
        assert!(root.write_atomic("etc/motd", "hello\n", 0o600).expect("new mode"));
        let full = root.root().join("etc/motd");
        assert_eq!(std::fs::read_to_string(&full).expect("read"), "hello\n");
        assert_eq!(std::fs::metadata(&full).expect("stat").permissions().mode() & 0o777, 0o600);
        assert_eq!(root.read("etc/motd").expect("read").as_deref(), Some("hello\n"));
        assert_eq!(root.read("etc/missing").expect("read"), None);
        // No temporary file is left behind.
        let names: Vec<String> = std::fs::read_dir(root.root().join("etc"))
            .expect("list")
            .map(|entry| entry.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["motd"]);
        assert!(root.remove("etc/motd").expect("remove"));
        assert!(!root.remove("etc/motd").expect("remove again"));
    }

    #[test]
    fn refuses_escaping_paths_and_writes_nothing_outside() {
        let (dir, root) = sandbox();
        for bad in ["../x", "etc/../../x", "/tmp/x"] {
            assert!(matches!(root.write_atomic(bad, "x", 0o644), Err(SandboxError::InvalidPath { .. })), "{bad}");
        }
        assert!(!dir.path().join("x").exists());
    }

    #[test]
    fn refuses_a_symlink_planted_inside_that_points_out() {
        let (dir, root) = sandbox();
        let outside = dir.path().join("outside");
        std::fs::create_dir(&outside).expect("mkdir");
        std::fs::create_dir(root.root().join("etc")).expect("mkdir");
        // A directory link and a file link, both leading out.
        std::os::unix::fs::symlink(&outside, root.root().join("etc/evil")).expect("symlink");
        std::os::unix::fs::symlink(outside.join("passwd"), root.root().join("etc/motd")).expect("symlink");

        let error = root.write_atomic("etc/evil/x", "pwned", 0o644).expect_err("a link out");
        assert!(matches!(&error, SandboxError::Escape { link, .. } if link == "etc/evil"), "unexpected error: {error}");
        assert!(error.to_string().contains("leads outside the sandbox"), "{error}");
        let error = root.write_atomic("etc/motd", "pwned", 0o644).expect_err("a dangling link out");
        assert!(matches!(error, SandboxError::Escape { .. }), "{error}");
        assert!(matches!(root.read("etc/evil/x"), Err(SandboxError::Escape { .. })));
        assert!(matches!(root.remove("etc/motd"), Err(SandboxError::Escape { .. })));
        assert!(!outside.join("x").exists() && !outside.join("passwd").exists());
        assert_eq!(std::fs::read_dir(&outside).expect("list").count(), 0);
    }

    #[test]
    fn allows_a_symlink_that_stays_inside() {
        let (_dir, root) = sandbox();
        std::fs::create_dir_all(root.root().join("var/data")).expect("mkdir");
        std::os::unix::fs::symlink(root.root().join("var/data"), root.root().join("data")).expect("symlink");
        assert!(root.write_atomic("data/file", "ok", 0o644).expect("write through an inside link"));
        assert_eq!(std::fs::read_to_string(root.root().join("var/data/file")).expect("read"), "ok");
    }

    #[test]
    fn a_link_at_a_temporary_name_changes_nothing_outside() {
        let (dir, root) = sandbox();
        let outside = dir.path().join("outside");
        std::fs::write(&outside, "keep").expect("write");
        std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let created = dir.path().join("created");
        std::fs::create_dir(root.root().join("etc")).expect("mkdir");
        let plant = |name: &str, target: &Path| {
            std::os::unix::fs::symlink(target, root.root().join("etc").join(name)).expect("symlink");
        };
        // The names this process's writes would once have used (`.NAME.PID.N.tmp`),
        // to an existing file and to one a write would create...
        for n in 0..512 {
            plant(&format!(".motd.{}.{n}.tmp", std::process::id()), &outside);
            plant(&format!(".conf.{}.{n}.tmp", std::process::id()), &created);
        }
        // ...and guesses at any other scheme.
        for name in [".motd.tmp", "motd.tmp", ".motd.swp", "motd~", ".motd.000000.tmp", ".motd.aaaaaa.tmp"] {
            plant(name, &outside);
        }

        assert!(root.write_atomic("etc/motd", "new\n", 0o644).expect("written beside the links"));
        assert!(root.write_atomic("etc/conf", "new\n", 0o600).expect("written beside the links"));

        assert_eq!(std::fs::read_to_string(&outside).expect("read"), "keep");
        assert_eq!(std::fs::metadata(&outside).expect("stat").permissions().mode() & 0o777, 0o600);
        assert!(!created.exists(), "a write created a file outside the sandbox");
        for (name, mode) in [("etc/motd", 0o644), ("etc/conf", 0o600)] {
            let written = std::fs::symlink_metadata(root.root().join(name)).expect("stat");
            assert!(written.is_file(), "{name} is a plain file");
            assert_eq!(written.permissions().mode() & 0o777, mode, "{name}");
            assert_eq!(root.read(name).expect("read").as_deref(), Some("new\n"));
        }
    }

    #[test]
    fn writes_existing_files_in_place_only() {
        let (_dir, root) = sandbox();
        root.write_atomic("proc/sys/vm/swappiness", "60\n", 0o644).expect("seed");
        assert!(root.write_existing("proc/sys/vm/swappiness", "10\n").expect("write"));
        assert!(!root.write_existing("proc/sys/vm/swappiness", "10\n").expect("same"));
        let error = root.write_existing("proc/sys/vm/bogus", "1\n").expect_err("missing");
        assert!(matches!(&error, SandboxError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound));
        assert!(!root.root().join("proc/sys/vm/bogus").exists());
    }
}
