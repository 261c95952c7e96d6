//! Errors across the wire: `cosi::Error` to gRPC status and back.
//!
//! The status codes are Go COSI's, per RPC, so Go clients recognise our errors
//! and we recognise a Go server's:
//!
//! | error | code |
//! |---|---|
//! | not found | `NOT_FOUND` |
//! | owner conflict | `PERMISSION_DENIED` |
//! | phase conflict on Update | `INVALID_ARGUMENT` |
//! | already exists (Create) | `ALREADY_EXISTS` |
//! | version conflict, pending finalizers, other phase conflicts | `FAILED_PRECONDITION` |
//! | invalid watch bookmark | `FAILED_PRECONDITION` (Watch) |
//! | invalid argument (bad query, malformed message) | `INVALID_ARGUMENT`; `UNKNOWN` on Update |
//! | unknown label operator | `UNIMPLEMENTED` |
//! | role does not allow the call | `PERMISSION_DENIED` |
//! | backend failure | `UNAVAILABLE` |
//!
//! On Update, `INVALID_ARGUMENT` means a phase conflict to a Go client, so
//! a malformed Update (a bad version or phase, a name that fails validation,
//! metadata naming another owner than the stored one) goes as `UNKNOWN`, as
//! Go's server sends its plain errors, rather than as a conflict that did not
//! happen. The codes alone are still ambiguous (`PERMISSION_DENIED` is
//! both an owner conflict and a refused role), so a Rust server also sends the
//! error itself in the `cosi-error-bin` trailer, which Go peers ignore. A Rust client rebuilds the
//! exact error from it, and falls back to Go's reading of the code without it.
//! One Go error has no code at all: a phase conflict of a racing Teardown, which
//! Go's server sends as `UNKNOWN`; the client recognises it by its message.

use cosi::resource::{Finalizers, Kind, Phase, Pointer, Version};
use cosi::state::Error;
use prost::Message;
use tonic::{Code, Status};

/// The trailer carrying the encoded error.
const ERROR_TRAILER: &str = "cosi-error-bin";

/// The RPC an error belongs to: the mapping depends on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rpc {
    Get,
    List,
    Create,
    Update,
    Destroy,
    Teardown,
    TeardownAndDestroy,
    Watch,
}

/// An error a remote peer reported that has no `cosi::Error` variant of its own.
///
/// It reaches callers inside [`Error::Backend`]; downcast to tell the cases apart.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RemoteError {
    /// The call failed with another status.
    #[error("gRPC status {code:?}: {message}")]
    Status {
        /// The gRPC status code.
        code: Code,
        /// The server's message.
        message: String,
    },
    /// A watch failed on the server's side.
    #[error("watch failed on the server: {0}")]
    Watch(String),
    /// The client could not connect or reconnect.
    #[error("transport error: {0}")]
    Transport(String),
}

/// The error, as the trailer carries it.
#[derive(Clone, PartialEq, prost::Message)]
struct ErrorDetail {
    #[prost(string, tag = "1")]
    kind: String,
    #[prost(string, tag = "2")]
    namespace: String,
    #[prost(string, tag = "3")]
    r#type: String,
    #[prost(string, tag = "4")]
    id: String,
    #[prost(string, optional, tag = "5")]
    owner: Option<String>,
    #[prost(string, tag = "6")]
    given: String,
    #[prost(string, tag = "7")]
    stored: String,
    #[prost(string, repeated, tag = "8")]
    finalizers: Vec<String>,
    #[prost(string, tag = "9")]
    phase: String,
    #[prost(string, tag = "10")]
    reason: String,
    #[prost(uint64, tag = "11")]
    behind: u64,
    #[prost(uint64, tag = "12")]
    capacity: u64,
}

/// The status for `err` returned by `rpc`.
pub(crate) fn to_status(err: &Error, rpc: Rpc) -> Status {
    let code = match err {
        Error::NotFound(_) => Code::NotFound,
        Error::OwnerConflict { .. } => Code::PermissionDenied,
        Error::PhaseConflict { .. } if rpc == Rpc::Update => Code::InvalidArgument,
        Error::AlreadyExists(_) => Code::AlreadyExists,
        Error::PhaseConflict { .. }
        | Error::VersionConflict { .. }
        | Error::PendingFinalizers { .. }
        | Error::InvalidBookmark { .. } => Code::FailedPrecondition,
        Error::InvalidArgument(_) if rpc == Rpc::Update => Code::Unknown,
        Error::InvalidArgument(_) => Code::InvalidArgument,
        Error::BufferOverrun { .. } => Code::ResourceExhausted,
        Error::Backend(_) => Code::Unavailable,
        Error::AccessDenied(_) => Code::PermissionDenied,
        _ => Code::Unknown,
    };
    let mut status = Status::new(code, public_message(err));
    if let Some(detail) = detail(err) {
        status
            .metadata_mut()
            .insert_bin(ERROR_TRAILER, tonic::metadata::MetadataValue::from_bytes(&detail.encode_to_vec()));
    }
    status
}

/// The text a client may see for `err`.
///
/// A backend's own failure (redb's or etcd's error, an I/O error) can name
/// files, hosts or keys of the server's machine: the client gets a generic
/// message with a correlation ID, and the server logs the full error under
/// that ID. Every other error is about the request and names only what the
/// client sent.
pub(crate) fn public_message(err: &Error) -> String {
    match err {
        Error::Backend(_) => {
            let id = format!("{:016x}", fastrand::u64(..));
            tracing::error!(correlation_id = %id, error = %err, "state backend failure");
            format!("the state backend failed (correlation ID {id}; the server's log has the details)")
        }
        other => other.to_string(),
    }
}

/// A refusal for the caller's role.
pub(crate) fn denied(message: String) -> Status {
    let mut status = Status::permission_denied(message.clone());
    let detail = ErrorDetail { kind: "denied".into(), reason: message, ..ErrorDetail::default() };
    status
        .metadata_mut()
        .insert_bin(ERROR_TRAILER, tonic::metadata::MetadataValue::from_bytes(&detail.encode_to_vec()));
    status
}

fn detail(err: &Error) -> Option<ErrorDetail> {
    let mut detail = ErrorDetail::default();
    if let Some(pointer) = err.pointer() {
        detail.namespace = pointer.namespace().to_owned();
        detail.r#type = pointer.r#type().to_owned();
        detail.id = pointer.id().to_owned();
    }
    let kind = match err {
        Error::NotFound(_) => "not_found",
        Error::AlreadyExists(_) => "already_exists",
        Error::VersionConflict { given, stored, .. } => {
            detail.given = given.to_string();
            detail.stored = stored.to_string();
            "version_conflict"
        }
        Error::PendingFinalizers { finalizers, .. } => {
            detail.finalizers = finalizers.iter().map(str::to_owned).collect();
            "pending_finalizers"
        }
        Error::OwnerConflict { owner, .. } => {
            detail.owner.clone_from(owner);
            "owner_conflict"
        }
        Error::PhaseConflict { expected, .. } => {
            detail.phase = expected.to_string();
            "phase_conflict"
        }
        Error::InvalidBookmark { kind, reason } => {
            detail.namespace = kind.namespace().to_owned();
            detail.r#type = kind.r#type().to_owned();
            detail.reason.clone_from(reason);
            "invalid_bookmark"
        }
        Error::BufferOverrun { kind, behind, capacity } => {
            detail.namespace = kind.namespace().to_owned();
            detail.r#type = kind.r#type().to_owned();
            detail.behind = *behind;
            detail.capacity = u64::try_from(*capacity).unwrap_or(u64::MAX);
            "buffer_overrun"
        }
        Error::InvalidArgument(reason) => {
            detail.reason.clone_from(reason);
            "invalid_argument"
        }
        // A state that refuses a caller (a controller's context, say) is
        // read back as a refusal, like the server's own role checks.
        Error::AccessDenied(reason) => {
            detail.reason.clone_from(reason);
            "denied"
        }
        _ => return None,
    };
    detail.kind = kind.to_owned();
    Some(detail)
}

/// What the client knew when it made the call, to rebuild an error from a bare status code.
pub(crate) struct CallContext<'a> {
    pub rpc: Rpc,
    pub pointer: &'a Pointer,
    /// The version an update was based on.
    pub version: Version,
    /// The phase an update expected.
    pub expected_phase: Option<Phase>,
}

/// The error for `status`, returned by a call described by `context`.
pub(crate) fn from_status(status: &Status, context: &CallContext<'_>) -> Error {
    if let Some(err) = status
        .metadata()
        .get_bin(ERROR_TRAILER)
        .and_then(|value| value.to_bytes().ok())
        .and_then(|bytes| ErrorDetail::decode(bytes.as_ref()).ok())
        .and_then(from_detail)
    {
        return err;
    }
    let pointer = context.pointer.clone();
    let message = status.message().to_owned();
    match (status.code(), context.rpc) {
        (Code::NotFound, _) => Error::NotFound(pointer),
        // A read refused for the caller's role; a write's bare PERMISSION_DENIED
        // is Go's owner conflict.
        (Code::PermissionDenied, Rpc::Get | Rpc::List | Rpc::Watch) => Error::AccessDenied(message),
        (Code::PermissionDenied, _) => Error::OwnerConflict { pointer, owner: None },
        (Code::AlreadyExists, _) => Error::AlreadyExists(pointer),
        (Code::InvalidArgument, Rpc::Update) => {
            Error::PhaseConflict { pointer, expected: context.expected_phase.unwrap_or(Phase::Running) }
        }
        (Code::InvalidArgument, _) => Error::InvalidArgument(message),
        (Code::FailedPrecondition, Rpc::Update) => {
            Error::VersionConflict { pointer, given: context.version, stored: Version::UNDEFINED }
        }
        (Code::FailedPrecondition, Rpc::Watch) => Error::InvalidBookmark { kind: pointer.kind(), reason: message },
        (Code::FailedPrecondition, _) => Error::PendingFinalizers { pointer, finalizers: Finalizers::default() },
        (Code::Unknown, Rpc::Teardown | Rpc::TeardownAndDestroy) => match go_phase_conflict(&message) {
            Some(expected) => Error::PhaseConflict { pointer, expected },
            None => Error::backend(RemoteError::Status { code: Code::Unknown, message }),
        },
        (code, _) => Error::backend(RemoteError::Status { code, message }),
    }
}

/// The expected phase of a Go phase conflict that reached us without a status code.
///
/// Go COSI's server maps a Teardown error to a code only when it is a "conflict"
/// in Go's sense, which needs the error to name its resource. The phase conflict
/// of Go's `UpdateWithConflicts` (hit when two teardowns race: both read the
/// resource running, one wins, the other re-reads it tearing down) names none,
/// so it arrives as `UNKNOWN` with the bare message
/// `resource TYPE(NAMESPACE/ID@VERSION) is not in phase PHASE`.
fn go_phase_conflict(message: &str) -> Option<Phase> {
    let (subject, phase) = message.rsplit_once(" is not in phase ")?;
    subject.starts_with("resource ").then_some(())?;
    phase.parse().ok()
}

fn from_detail(detail: ErrorDetail) -> Option<Error> {
    let pointer = Pointer::new(&detail.namespace, &detail.r#type, &detail.id);
    let kind = Kind::new(&detail.namespace, &detail.r#type);
    Some(match detail.kind.as_str() {
        "not_found" => Error::NotFound(pointer),
        "already_exists" => Error::AlreadyExists(pointer),
        "version_conflict" => Error::VersionConflict {
            pointer,
            given: detail.given.parse().unwrap_or(Version::UNDEFINED),
            stored: detail.stored.parse().unwrap_or(Version::UNDEFINED),
        },
        "pending_finalizers" => {
            Error::PendingFinalizers { pointer, finalizers: detail.finalizers.into_iter().collect() }
        }
        "owner_conflict" => Error::OwnerConflict { pointer, owner: detail.owner },
        "phase_conflict" => Error::PhaseConflict { pointer, expected: detail.phase.parse().ok()? },
        "invalid_bookmark" => Error::InvalidBookmark { kind, reason: detail.reason },
        "buffer_overrun" => Error::BufferOverrun {
            kind,
            behind: detail.behind,
            capacity: usize::try_from(detail.capacity).unwrap_or(usize::MAX),
        },
        "invalid_argument" => Error::InvalidArgument(detail.reason),
        "denied" => Error::AccessDenied(detail.reason),
        _ => return None,
    })
}

/// The error of an `ERRORED` watch event, which carries only text.
///
/// A buffer overrun is recognised by its message (ours, or Go's
/// `buffer overrun: namespace ... type ...`), so the watcher learns it fell
/// behind and may restart from a list; anything else is a [`RemoteError::Watch`].
pub(crate) fn remote_watch_error(message: String, kind: &Kind) -> Error {
    if message.starts_with("buffer overrun") {
        let number_after = |marker: &str| {
            message.split(marker).nth(1).and_then(|rest| rest.split(' ').next()).and_then(|n| n.parse::<u64>().ok())
        };
        return Error::BufferOverrun {
            kind: kind.clone(),
            behind: number_after("the watcher is ").unwrap_or(0),
            capacity: number_after("the history holds ").and_then(|n| usize::try_from(n).ok()).unwrap_or(0),
        };
    }
    Error::backend(RemoteError::Watch(message))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pointer() -> Pointer {
        Pointer::new("ns", "Things.test.cosi.dev", "a")
    }

    fn errors() -> Vec<Error> {
        let pointer = pointer();
        vec![
            Error::NotFound(pointer.clone()),
            Error::AlreadyExists(pointer.clone()),
            Error::VersionConflict { pointer: pointer.clone(), given: Version::new(1), stored: Version::new(2) },
            Error::PendingFinalizers { pointer: pointer.clone(), finalizers: ["f1", "f2"].into_iter().collect() },
            Error::OwnerConflict { pointer: pointer.clone(), owner: Some("ctrl".into()) },
            Error::OwnerConflict { pointer: pointer.clone(), owner: None },
            Error::PhaseConflict { pointer: pointer.clone(), expected: Phase::TearingDown },
            Error::InvalidBookmark { kind: pointer.kind(), reason: "stale".into() },
            Error::BufferOverrun { kind: pointer.kind(), behind: 5000, capacity: 1024 },
            Error::InvalidArgument("bad".into()),
        ]
    }

    #[test]
    fn errors_cross_the_wire_exactly_with_the_trailer() {
        let pointer = pointer();
        for err in errors() {
            let status = to_status(&err, Rpc::Update);
            let context =
                CallContext { rpc: Rpc::Update, pointer: &pointer, version: Version::new(1), expected_phase: None };
            let back = from_status(&status, &context);
            assert_eq!(back.to_string(), err.to_string(), "{err:?} came back as {back:?}");
        }
    }

    #[test]
    fn an_access_refusal_crosses_as_permission_denied() {
        let pointer = pointer();
        let refusal = Error::AccessDenied("controller `a` cannot read it".into());
        let status = to_status(&refusal, Rpc::Get);
        assert_eq!(status.code(), Code::PermissionDenied);
        let context = CallContext { rpc: Rpc::Get, pointer: &pointer, version: Version::new(1), expected_phase: None };
        let back = from_status(&status, &context);
        assert!(matches!(&back, Error::AccessDenied(reason) if reason.contains("cannot read it")), "{back:?}");
    }

    #[test]
    fn bare_codes_read_as_go_reads_them() {
        let pointer = pointer();
        let read = |code: Code, rpc: Rpc| {
            let context =
                CallContext { rpc, pointer: &pointer, version: Version::new(3), expected_phase: Some(Phase::Running) };
            from_status(&Status::new(code, "from a Go server"), &context)
        };
        assert!(read(Code::NotFound, Rpc::Get).is_not_found());
        assert!(read(Code::AlreadyExists, Rpc::Create).is_conflict());
        assert!(read(Code::PermissionDenied, Rpc::Update).is_owner_conflict());
        assert!(read(Code::InvalidArgument, Rpc::Update).is_phase_conflict());
        assert!(read(Code::InvalidArgument, Rpc::List).is_invalid_argument());
        let conflict = read(Code::FailedPrecondition, Rpc::Update);
        assert!(conflict.is_conflict() && !conflict.is_owner_conflict() && !conflict.is_phase_conflict());
        assert!(read(Code::FailedPrecondition, Rpc::Destroy).is_conflict());
        assert!(read(Code::FailedPrecondition, Rpc::Watch).is_invalid_bookmark());
        assert!(matches!(read(Code::Unavailable, Rpc::Get), Error::Backend(_)));
        assert!(read(Code::PermissionDenied, Rpc::Get).is_access_denied());
    }

    #[test]
    fn go_teardown_phase_conflicts_without_a_code_are_phase_conflicts() {
        let pointer = pointer();
        let read =
            |code: Code, rpc: Rpc, message: &str| from_status(&Status::new(code, message), &context_for(rpc, &pointer));
        // The message Go COSI's `UpdateWithConflicts` returns, verbatim but for the names.
        let go = "resource Things.test.cosi.dev(ns/a@3) is not in phase running";
        for rpc in [Rpc::Teardown, Rpc::TeardownAndDestroy] {
            match read(Code::Unknown, rpc, go) {
                Error::PhaseConflict { pointer: got, expected: Phase::Running } => assert_eq!(got, pointer),
                other => panic!("{rpc:?}: expected a phase conflict, got {other:?}"),
            }
            let torn = read(Code::Unknown, rpc, "resource T(ns/a@1) is not in phase tearingDown");
            assert!(matches!(torn, Error::PhaseConflict { expected: Phase::TearingDown, .. }), "{torn:?}");
            // Anything else unknown stays a backend failure, with Go's message.
            for other in
                ["boom", "resource T(ns/a@1) is not in phase sideways", "context canceled: is not in phase running"]
            {
                let err = read(Code::Unknown, rpc, other);
                assert!(matches!(err, Error::Backend(_)) && err.to_string().contains(other), "{other}: {err:?}");
            }
        }
        // Only Teardown's unmapped errors are read this way: other RPCs carry a code for phase conflicts.
        assert!(matches!(read(Code::Unknown, Rpc::Destroy, go), Error::Backend(_)));
        assert!(matches!(read(Code::Internal, Rpc::Teardown, go), Error::Backend(_)));
    }

    fn context_for(rpc: Rpc, pointer: &Pointer) -> CallContext<'_> {
        CallContext { rpc, pointer, version: Version::UNDEFINED, expected_phase: None }
    }

    #[test]
    fn codes_are_go_codes_per_rpc() {
        let pointer = pointer();
        let phase = Error::PhaseConflict { pointer: pointer.clone(), expected: Phase::Running };
        assert_eq!(to_status(&phase, Rpc::Update).code(), Code::InvalidArgument);
        assert_eq!(to_status(&phase, Rpc::Teardown).code(), Code::FailedPrecondition);
        assert_eq!(to_status(&Error::AlreadyExists(pointer.clone()), Rpc::Create).code(), Code::AlreadyExists);
        let owner = Error::OwnerConflict { pointer, owner: None };
        assert_eq!(to_status(&owner, Rpc::Destroy).code(), Code::PermissionDenied);
        // A Go client reads INVALID_ARGUMENT on Update as a phase conflict.
        let malformed = Error::InvalidArgument("bad version".into());
        assert_eq!(to_status(&malformed, Rpc::Update).code(), Code::Unknown);
        assert_eq!(to_status(&malformed, Rpc::Create).code(), Code::InvalidArgument);
    }

    #[test]
    fn overrun_messages_are_recognised() {
        let kind = Kind::new("ns", "Things.test.cosi.dev");
        let ours = Error::BufferOverrun { kind: kind.clone(), behind: 5000, capacity: 1024 };
        assert_eq!(remote_watch_error(ours.to_string(), &kind).to_string(), ours.to_string());
        let go = remote_watch_error("buffer overrun: namespace \"ns\" type \"t\"".into(), &kind);
        assert!(matches!(go, Error::BufferOverrun { kind: ref k, .. } if *k == kind));
        assert!(matches!(remote_watch_error("boom".into(), &kind), Error::Backend(_)));
    }
}
