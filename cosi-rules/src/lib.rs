//! The rules a controller's declaration keeps, and the message of each
//! broken rule. Not API: use them through `cosi` (`cosi::controller`).
//!
//! Three checks apply the rules, and one crate states them so that the three
//! say the same: `#[controller]` (in `cosi-macros`) checks the tokens of a
//! declaration and reports under the token at fault; `cosi::system!` and
//! every controller's `DECLARATION` are checked again in `const` evaluation,
//! which sees what tokens cannot (two paths that name one type); and the
//! runtime checks a controller when it is registered, and the inputs it is
//! given then or later. Each rule is one `const fn` here, which returns the
//! [`Conflict`] it finds; each message is one arm of [`Conflict::message`],
//! in pieces, so that `const` evaluation, where `Display` cannot run, puts
//! together the same text as `Display` does.
//!
//! The rules see plain data ([`InputRef`], [`OutputRef`]), which each check
//! fills from what it has: type paths as written and namespaces only where
//! named for the macro, type names and namespaces for the others.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]

use std::fmt;

/// How a controller depends on an input.
///
/// # Example
///
/// ```
/// use cosi::controller::Declared;
/// use cosi::prelude::*;
/// # #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
/// # #[resource(type = "HostnameSpecs.net.example.org", namespace = "network")]
/// # pub struct HostnameSpec { pub hostname: String }
///
/// #[controller(inputs = [Strong<HostnameSpec>])]
/// async fn hostname(_ctx: &mut Ctx) {}
///
/// assert_eq!(hostname::DECLARATION.inputs[0].kind, InputKind::Strong);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize), serde(rename_all = "kebab-case"))]
pub enum InputKind {
    /// Any change wakes the controller.
    Weak,
    /// Any change wakes the controller, which may also put finalizers on the input.
    Strong,
    /// Only a resource that is tearing down with no finalizers left wakes the controller.
    DestroyReady,
    /// Queue controllers: each changed resource is queued as an item to reconcile.
    Primary,
    /// Queue controllers: each changed resource is mapped to the primary items it affects.
    Mapped,
    /// Queue controllers: as [`Mapped`](InputKind::Mapped), for resources tearing down with no finalizers left.
    MappedDestroyReady,
}

impl InputKind {
    /// Every kind, in declaration order.
    pub const ALL: [InputKind; 6] = [
        InputKind::Weak,
        InputKind::Strong,
        InputKind::DestroyReady,
        InputKind::Primary,
        InputKind::Mapped,
        InputKind::MappedDestroyReady,
    ];

    /// Whether the kind belongs to queue controllers.
    pub const fn is_queue(self) -> bool {
        matches!(self, InputKind::Primary | InputKind::Mapped | InputKind::MappedDestroyReady)
    }

    /// Whether a change only counts once the resource is ready to be destroyed.
    pub const fn is_destroy_ready(self) -> bool {
        matches!(self, InputKind::DestroyReady | InputKind::MappedDestroyReady)
    }

    /// Whether the controller may edit the finalizers of such an input.
    pub const fn grants_finalizers(self) -> bool {
        matches!(self, InputKind::Strong | InputKind::Primary | InputKind::Mapped)
    }

    /// The name used in declarations and graphs: `weak`, `strong`, `destroy-ready`, ...
    pub const fn as_str(self) -> &'static str {
        match self {
            InputKind::Weak => "weak",
            InputKind::Strong => "strong",
            InputKind::DestroyReady => "destroy-ready",
            InputKind::Primary => "primary",
            InputKind::Mapped => "mapped",
            InputKind::MappedDestroyReady => "mapped-destroy-ready",
        }
    }

    /// The name of the variant as code writes it: `Weak`, `DestroyReady`, ...
    pub const fn variant(self) -> &'static str {
        match self {
            InputKind::Weak => "Weak",
            InputKind::Strong => "Strong",
            InputKind::DestroyReady => "DestroyReady",
            InputKind::Primary => "Primary",
            InputKind::Mapped => "Mapped",
            InputKind::MappedDestroyReady => "MappedDestroyReady",
        }
    }

    /// The kind whose [`variant`](InputKind::variant) name is `name`.
    pub fn from_variant(name: &str) -> Option<InputKind> {
        InputKind::ALL.into_iter().find(|kind| kind.variant() == name)
    }
}

/// How a controller owns an output type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize), serde(rename_all = "kebab-case"))]
pub enum OutputKind {
    /// The controller is the only writer of the type.
    Exclusive,
    /// Several controllers write the type, each only its own resources.
    Shared,
}

impl OutputKind {
    /// Every kind, in declaration order.
    pub const ALL: [OutputKind; 2] = [OutputKind::Exclusive, OutputKind::Shared];

    /// `exclusive` or `shared`.
    pub const fn as_str(self) -> &'static str {
        match self {
            OutputKind::Exclusive => "exclusive",
            OutputKind::Shared => "shared",
        }
    }

    /// The name of the variant as code writes it: `Exclusive` or `Shared`.
    pub const fn variant(self) -> &'static str {
        match self {
            OutputKind::Exclusive => "Exclusive",
            OutputKind::Shared => "Shared",
        }
    }

    /// The kind whose [`variant`](OutputKind::variant) name is `name`.
    pub fn from_variant(name: &str) -> Option<OutputKind> {
        OutputKind::ALL.into_iter().find(|kind| kind.variant() == name)
    }
}

impl fmt::Display for InputKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for OutputKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A view of one input for the rules: borrowed strings, so that the same
/// `const fn`s check tokens, static declarations and runtime inputs.
#[derive(Clone, Copy, Debug)]
pub struct InputRef<'a> {
    /// The namespace; empty where not known (the macro sees a type's path,
    /// not its default namespace), which two inputs of one type share.
    pub namespace: &'a str,
    /// The type.
    pub r#type: &'a str,
    /// The ID, if narrowed to one.
    pub id: Option<&'a str>,
    /// The dependency kind.
    pub kind: InputKind,
    /// Whether the namespace was chosen explicitly: a controller may read a
    /// kind of its output type in another namespace it names (a sum of
    /// sums), but not where it writes by default.
    pub explicit_namespace: bool,
}

impl InputRef<'_> {
    /// Whether this input reads `type` destroy-ready: what a writer of the
    /// type needs when another controller may hold finalizers on it.
    pub const fn reads_destroy_ready(&self, r#type: &str) -> bool {
        self.kind.is_destroy_ready() && str_eq(self.r#type, r#type)
    }
}

/// A view of one output for the rules.
#[derive(Clone, Copy, Debug)]
pub struct OutputRef<'a> {
    /// The namespace the type lives in by default; empty where not known
    /// (the macro sees a type's path, and at run time an instance writes
    /// where it chooses).
    pub namespace: &'a str,
    /// The type.
    pub r#type: &'a str,
    /// Exclusive or shared.
    pub kind: OutputKind,
}

/// A broken rule, naming everything involved; [`Conflict::message`] says
/// what is wrong and what to do.
///
/// The names are borrowed (`Conflict<&str>`, what the checks return, also
/// in `const` evaluation) or owned (`Conflict<String>`, what a runtime
/// keeps in its error: [`Conflict::to_owned`]); [`Conflict::as_str`]
/// borrows an owned one back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Conflict<S = &'static str> {
    /// Two controllers have one name.
    DuplicateName {
        /// The name.
        name: S,
    },
    /// A controller writes a type another writes exclusively, or writes it
    /// exclusively while another writes it.
    OutputConflict {
        /// The controller registered first.
        first: S,
        /// The controller registered second.
        second: S,
        /// The one (of the two) that declares the type exclusive.
        exclusive: S,
        /// The type.
        r#type: S,
    },
    /// A controller declares one output type twice.
    DuplicateOutput {
        /// The controller.
        controller: S,
        /// The type.
        r#type: S,
    },
    /// A controller declares one input twice.
    DuplicateInput {
        /// The controller.
        controller: S,
        /// The namespace, empty where not known.
        namespace: S,
        /// The type.
        r#type: S,
    },
    /// An output is also an input that would wake the controller on its own writes.
    OutputIsInput {
        /// The controller.
        controller: S,
        /// The type.
        r#type: S,
        /// The input kind declared.
        kind: InputKind,
    },
    /// An input of a queue kind in a controller that is not a queue
    /// controller, or of another kind in a queue controller.
    MixedInputKinds {
        /// The controller.
        controller: S,
        /// The kind that does not belong.
        kind: InputKind,
    },
    /// A queue controller's settings are wrong.
    InvalidQueue {
        /// The controller.
        controller: S,
        /// What is wrong.
        reason: QueueRule,
    },
    /// An empty controller name.
    EmptyName,
    /// A controller named as the runtime itself ([`RESERVED_NAME`]).
    ReservedName {
        /// The name.
        name: S,
    },
    /// A controller name with whitespace or a control character, or longer
    /// than a state's longest ID: the name is the ID of the controller's
    /// status and the owner of its outputs, and stricter than an ID.
    InvalidName {
        /// The name.
        name: S,
        /// What is wrong with it.
        reason: NameRule,
    },
    /// An input given at run time of a type the controller does not declare.
    UndeclaredInput {
        /// The controller.
        controller: S,
        /// The namespace.
        namespace: S,
        /// The type.
        r#type: S,
    },
    /// A controller may hold finalizers on a type another writes, and the
    /// writer has no destroy-ready input on it: what the writer tears down
    /// would wait for the finalizers to go, and nothing would wake it then.
    NoDestroyReady {
        /// The controller that writes the type.
        writer: S,
        /// The controller that may hold finalizers on it.
        reader: S,
        /// The type.
        r#type: S,
        /// Whether the writer is a queue controller (which takes
        /// `MappedDestroyReady` inputs, not `DestroyReady` ones).
        queue: bool,
    },
    /// An input whose namespace, type or ID a state would refuse.
    InvalidInput {
        /// The controller.
        controller: S,
        /// What is wrong with it, as the naming rules say.
        reason: S,
    },
}

/// What [`Conflict::InvalidName`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameRule {
    /// A whitespace or control character.
    Whitespace,
    /// More than [`MAX_NAME_LEN`] bytes.
    TooLong,
}

/// What [`Conflict::InvalidQueue`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueRule {
    /// `concurrency = 0`.
    ZeroConcurrency,
    /// A `concurrency` without queue inputs.
    ConcurrencyWithoutQueue,
    /// Queue inputs without a primary one.
    NoPrimaryInput,
}

impl<'a> Conflict<&'a str> {
    /// The message, in pieces: the one text of each conflict, which
    /// `Display` writes and `const` evaluation copies ([`Message::to_const`]).
    pub const fn message(&self) -> Message<'a> {
        match *self {
            Conflict::DuplicateName { name } => Message::new(&["two controllers are named `", name, "`"]),
            Conflict::OutputConflict { first, second, exclusive, r#type } => Message::new(&[
                "controllers `",
                first,
                "` and `",
                second,
                "` both write `",
                r#type,
                "`, and `",
                exclusive,
                "` declares it exclusive: a type has one exclusive writer, or only shared ones",
            ]),
            Conflict::DuplicateOutput { controller, r#type } => {
                Message::new(&["controller `", controller, "` declares output `", r#type, "` twice; keep one"])
            }
            Conflict::DuplicateInput { controller, namespace, r#type } => {
                let (before, after) = match namespace.is_empty() {
                    true => ("", ""),
                    false => (" in namespace `", "`"),
                };
                Message::new(&[
                    "controller `",
                    controller,
                    "` declares input `",
                    r#type,
                    "`",
                    before,
                    namespace,
                    after,
                    " twice; keep one",
                ])
            }
            Conflict::OutputIsInput { controller, r#type, kind } => Message::new(&[
                "controller `",
                controller,
                "` writes `",
                r#type,
                "` and also reads it as a `",
                kind.variant(),
                "` input, so its own writes would wake it: read it as a `DestroyReady` or `MappedDestroyReady` \
                 input, or name another namespace for it",
            ]),
            Conflict::MixedInputKinds { controller, kind } if kind.is_queue() => Message::new(&[
                "controller `",
                controller,
                "` is not a queue controller, so it cannot take `",
                kind.variant(),
                "` inputs: primary and mapped inputs belong to queue controllers, which are structs with \
                 `async fn reconcile(&self, ctx: &Ctx<Self>, item: &Pointer)`; make it one, or take `Weak`, \
                 `Strong` or `DestroyReady` inputs",
            ]),
            Conflict::MixedInputKinds { controller, kind } => Message::new(&[
                "controller `",
                controller,
                "` is a queue controller, so it cannot take `",
                kind.variant(),
                "` inputs: a queue controller takes only `Primary`, `Mapped` and `MappedDestroyReady` inputs",
            ]),
            Conflict::InvalidQueue { controller, reason: QueueRule::ZeroConcurrency } => {
                Message::new(&["controller `", controller, "` has `concurrency = 0`; it must be at least 1"])
            }
            Conflict::InvalidQueue { controller, reason: QueueRule::ConcurrencyWithoutQueue } => Message::new(&[
                "controller `",
                controller,
                "` has a `concurrency` but no queue inputs: `concurrency` is for queue controllers; add a \
                 `Primary` input or remove `concurrency`",
            ]),
            Conflict::InvalidQueue { controller, reason: QueueRule::NoPrimaryInput } => Message::new(&[
                "queue controller `",
                controller,
                "` has no `Primary` input; add one: its resources are the items the controller reconciles",
            ]),
            Conflict::EmptyName => Message::new(&["a controller has an empty name; give it one"]),
            Conflict::ReservedName { name } => Message::new(&[
                "the controller name `",
                name,
                "` is reserved: the runtime owns the controller statuses under it; choose another",
            ]),
            Conflict::InvalidName { name, reason: NameRule::Whitespace } => Message::new(&[
                "the controller name `",
                name,
                "` contains whitespace or a control character: a controller's name is the ID of its status and \
                 the owner of its outputs; remove them",
            ]),
            Conflict::InvalidName { reason: NameRule::TooLong, .. } => Message::new(&[
                "a controller name is longer than ",
                MAX_NAME_LEN_TEXT,
                " bytes, the most a state takes as an ID; shorten it",
            ]),
            Conflict::UndeclaredInput { controller, namespace, r#type } => Message::new(&[
                "controller `",
                controller,
                "` cannot take `",
                r#type,
                "` in namespace `",
                namespace,
                "` as an input: the type is not among its declared inputs; declare an input of the type",
            ]),
            Conflict::InvalidInput { controller, reason } => {
                Message::new(&["controller `", controller, "` has an invalid input: ", reason])
            }
            Conflict::NoDestroyReady { writer, reader, r#type, queue } => Message::new(&[
                "controller `",
                reader,
                "` may hold finalizers on `",
                r#type,
                "`, which `",
                writer,
                "` writes, and what a writer tears down waits for those finalizers: without a destroy-ready \
                 input, nothing wakes it to destroy it once they are gone; add a `",
                if queue { "MappedDestroyReady" } else { "DestroyReady" },
                "` input of the type to `",
                writer,
                "`",
            ]),
        }
    }
}

impl<S: AsRef<str>> Conflict<S> {
    /// The conflict with its names borrowed.
    pub fn as_str(&self) -> Conflict<&str> {
        self.map(AsRef::as_ref)
    }

    /// The conflict with its names owned.
    pub fn to_owned(&self) -> Conflict<String> {
        self.map(|name| name.as_ref().to_owned())
    }

    /// The conflict with each name given to `name`.
    fn map<'s, T>(&'s self, name: impl Fn(&'s S) -> T) -> Conflict<T> {
        match self {
            Conflict::DuplicateName { name: named } => Conflict::DuplicateName { name: name(named) },
            Conflict::OutputConflict { first, second, exclusive, r#type } => Conflict::OutputConflict {
                first: name(first),
                second: name(second),
                exclusive: name(exclusive),
                r#type: name(r#type),
            },
            Conflict::DuplicateOutput { controller, r#type } => {
                Conflict::DuplicateOutput { controller: name(controller), r#type: name(r#type) }
            }
            Conflict::DuplicateInput { controller, namespace, r#type } => Conflict::DuplicateInput {
                controller: name(controller),
                namespace: name(namespace),
                r#type: name(r#type),
            },
            Conflict::OutputIsInput { controller, r#type, kind } => {
                Conflict::OutputIsInput { controller: name(controller), r#type: name(r#type), kind: *kind }
            }
            Conflict::MixedInputKinds { controller, kind } => {
                Conflict::MixedInputKinds { controller: name(controller), kind: *kind }
            }
            Conflict::InvalidQueue { controller, reason } => {
                Conflict::InvalidQueue { controller: name(controller), reason: *reason }
            }
            Conflict::EmptyName => Conflict::EmptyName,
            Conflict::ReservedName { name: named } => Conflict::ReservedName { name: name(named) },
            Conflict::InvalidName { name: named, reason } => {
                Conflict::InvalidName { name: name(named), reason: *reason }
            }
            Conflict::UndeclaredInput { controller, namespace, r#type } => Conflict::UndeclaredInput {
                controller: name(controller),
                namespace: name(namespace),
                r#type: name(r#type),
            },
            Conflict::InvalidInput { controller, reason } => {
                Conflict::InvalidInput { controller: name(controller), reason: name(reason) }
            }
            Conflict::NoDestroyReady { writer, reader, r#type, queue } => Conflict::NoDestroyReady {
                writer: name(writer),
                reader: name(reader),
                r#type: name(r#type),
                queue: *queue,
            },
        }
    }
}

impl<S: AsRef<str>> fmt::Display for Conflict<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.as_str().message(), f)
    }
}

impl<S: AsRef<str> + fmt::Debug> std::error::Error for Conflict<S> {}

/// The most pieces a message has.
const MAX_PARTS: usize = 12;

/// A message in pieces of borrowed text, so that `const` evaluation can put
/// it together as well as `Display`.
#[derive(Clone, Copy, Debug)]
pub struct Message<'a> {
    parts: [&'a str; MAX_PARTS],
    len: usize,
}

impl<'a> Message<'a> {
    // Pieces beyond `MAX_PARTS` are dropped rather than panicking; a test
    // writes every message, so none is cut.
    const fn new(parts: &[&'a str]) -> Self {
        let mut message = Message { parts: [""; MAX_PARTS], len: 0 };
        while message.len < parts.len() && message.len < MAX_PARTS {
            message.parts[message.len] = parts[message.len];
            message.len += 1;
        }
        message
    }

    /// The pieces, in order.
    pub const fn parts(&self) -> &[&'a str] {
        self.parts.split_at(self.len).0
    }

    /// The text put together in `const` evaluation, cut at 512 bytes.
    pub const fn to_const(&self) -> ConstText {
        let mut text = ConstText { buf: [0; 512], len: 0 };
        let mut i = 0;
        while i < self.len {
            let bytes = self.parts[i].as_bytes();
            let mut j = 0;
            while j < bytes.len() && text.len < text.buf.len() {
                text.buf[text.len] = bytes[j];
                text.len += 1;
                j += 1;
            }
            i += 1;
        }
        text
    }
}

impl fmt::Display for Message<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.parts().iter().try_for_each(|part| f.write_str(part))
    }
}

/// A message put together in `const` evaluation, where `Display` cannot run.
pub struct ConstText {
    buf: [u8; 512],
    len: usize,
}

impl ConstText {
    /// The text.
    pub const fn as_str(&self) -> &str {
        let (mut head, _) = self.buf.split_at(self.len);
        // A cut can split a character; drop bytes until the rest is valid.
        loop {
            match core::str::from_utf8(head) {
                Ok(text) => return text,
                Err(_) => head = head.split_at(head.len() - 1).0,
            }
        }
    }
}

/// The name the runtime owns the controller statuses under; no controller may take it.
pub const RESERVED_NAME: &str = "runtime";

/// The longest controller name, in bytes: the longest ID a state takes
/// (`cosi-naming`'s `MAX_NAME_LEN`, which a test compares).
pub const MAX_NAME_LEN: usize = 1024;

/// [`MAX_NAME_LEN`] as text, for a message put together in `const` evaluation.
const MAX_NAME_LEN_TEXT: &str = "1024";

/// A controller's name is the owner of what it writes and the ID of its
/// status: not empty, not [`RESERVED_NAME`], without whitespace or control
/// characters, and at most [`MAX_NAME_LEN`] bytes.
pub const fn controller_name(name: &str) -> Result<(), Conflict<&str>> {
    if name.is_empty() {
        return Err(Conflict::EmptyName);
    }
    if str_eq(name, RESERVED_NAME) {
        return Err(Conflict::ReservedName { name });
    }
    if name.len() > MAX_NAME_LEN {
        return Err(Conflict::InvalidName { name, reason: NameRule::TooLong });
    }
    let bytes = name.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let (c, width) = decode(bytes, i);
        // `char::is_control` is not `const`; the control characters are the category Cc.
        if c.is_whitespace() || matches!(c, '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}') {
            return Err(Conflict::InvalidName { name, reason: NameRule::Whitespace });
        }
        i += width;
    }
    Ok(())
}

/// The character starting at byte `i` of the UTF-8 `bytes`, and its width.
const fn decode(bytes: &[u8], i: usize) -> (char, usize) {
    let first = bytes[i] as u32;
    let (mut code, width) = match first {
        0x00..=0x7f => return (first as u8 as char, 1),
        0xc0..=0xdf => (first & 0x1f, 2),
        0xe0..=0xef => (first & 0x0f, 3),
        _ => (first & 0x07, 4),
    };
    let mut k = 1;
    while k < width {
        code = (code << 6) | (bytes[i + k] as u32 & 0x3f);
        k += 1;
    }
    match char::from_u32(code) {
        Some(c) => (c, width),
        None => (char::REPLACEMENT_CHARACTER, width),
    }
}

/// An output is one type: `output` is not of the type of an `earlier` one.
pub const fn duplicate_output<'a>(
    controller: &'a str,
    earlier: OutputRef<'_>,
    output: OutputRef<'a>,
) -> Result<(), Conflict<&'a str>> {
    match str_eq(earlier.r#type, output.r#type) {
        true => Err(Conflict::DuplicateOutput { controller, r#type: output.r#type }),
        false => Ok(()),
    }
}

/// An input is one (namespace, type, ID): `input` is not an `earlier` one again.
pub const fn duplicate_input<'a>(
    controller: &'a str,
    earlier: InputRef<'_>,
    input: InputRef<'a>,
) -> Result<(), Conflict<&'a str>> {
    match str_eq(earlier.namespace, input.namespace)
        && str_eq(earlier.r#type, input.r#type)
        && opt_str_eq(earlier.id, input.id)
    {
        true => Err(Conflict::DuplicateInput { controller, namespace: input.namespace, r#type: input.r#type }),
        false => Ok(()),
    }
}

/// A controller is not woken by its own writes: an output can only be a
/// destroy-ready input, or an input in another namespace than the output's,
/// named explicitly (a sum of sums reads integers in one namespace and
/// writes them to another). Naming the output's own namespace changes
/// nothing; where that namespace is not known, a namespace named is taken
/// to be another.
pub const fn output_is_input<'a>(
    controller: &'a str,
    input: InputRef<'a>,
    output: OutputRef<'_>,
) -> Result<(), Conflict<&'a str>> {
    let elsewhere = input.explicit_namespace && !str_eq(input.namespace, output.namespace);
    match str_eq(input.r#type, output.r#type) && !input.kind.is_destroy_ready() && !elsewhere {
        true => Err(Conflict::OutputIsInput { controller, r#type: input.r#type, kind: input.kind }),
        false => Ok(()),
    }
}

/// A controller is a queue controller or not (`queue`), and its inputs are
/// of its kinds: `Primary`, `Mapped` and `MappedDestroyReady` for queue
/// controllers, `Weak`, `Strong` and `DestroyReady` for the others.
pub const fn input_shape<'a>(controller: &'a str, queue: bool, input: InputRef<'_>) -> Result<(), Conflict<&'a str>> {
    match input.kind.is_queue() == queue {
        true => Ok(()),
        false => Err(Conflict::MixedInputKinds { controller, kind: input.kind }),
    }
}

/// A `concurrency` (which makes a queue controller) is at least 1, and comes
/// with queue inputs, one of them primary; `queue_inputs` and `primary_input`
/// say whether any input is of a queue kind, and of `Primary`.
pub const fn queue_settings(
    controller: &str,
    concurrency: Option<usize>,
    queue_inputs: bool,
    primary_input: bool,
) -> Result<(), Conflict<&str>> {
    let reason = match concurrency {
        None => return Ok(()),
        Some(_) if !queue_inputs => QueueRule::ConcurrencyWithoutQueue,
        Some(0) => QueueRule::ZeroConcurrency,
        Some(_) if !primary_input => QueueRule::NoPrimaryInput,
        Some(_) => return Ok(()),
    };
    Err(Conflict::InvalidQueue { controller, reason })
}

/// Controllers have different names.
pub const fn duplicate_name<'a>(first: &'a str, second: &str) -> Result<(), Conflict<&'a str>> {
    match str_eq(first, second) {
        true => Err(Conflict::DuplicateName { name: first }),
        false => Ok(()),
    }
}

/// A type has one exclusive writer, or only shared ones: output `a` of the
/// controller `first` and `b` of `second` are not of one type unless both are shared.
pub const fn output_conflict<'a>(
    first: &'a str,
    a: OutputRef<'a>,
    second: &'a str,
    b: OutputRef<'_>,
) -> Result<(), Conflict<&'a str>> {
    let exclusive = match (a.kind, b.kind) {
        _ if !str_eq(a.r#type, b.r#type) => return Ok(()),
        (OutputKind::Shared, OutputKind::Shared) => return Ok(()),
        (OutputKind::Exclusive, _) => first,
        (OutputKind::Shared, OutputKind::Exclusive) => second,
    };
    Err(Conflict::OutputConflict { first, second, exclusive, r#type: a.r#type })
}

/// A type's writer learns when what it tore down may be destroyed: when the
/// controller `reader` may hold finalizers on `input` (a `Strong` or
/// `Primary` input) of a type that `writer` writes exclusively (`output`), `writer`
/// reads that type destroy-ready (`reads_destroy_ready`: whether any of its
/// inputs does, [`InputRef::reads_destroy_ready`]).
pub const fn destroy_ready<'a>(
    writer: &'a str,
    queue: bool,
    output: OutputRef<'a>,
    reads_destroy_ready: bool,
    reader: &'a str,
    input: InputRef<'_>,
) -> Result<(), Conflict<&'a str>> {
    // A mapped input is mostly read to find items, and is not counted.
    let finalizes = matches!(input.kind, InputKind::Strong | InputKind::Primary);
    let finalized = finalizes && str_eq(input.r#type, output.r#type);
    // An exclusive writer writes every resource of its type, so a reader of
    // the type may finalize its resources; a shared one may write elsewhere
    // than the reader reads (a merge's layers), so the rule cannot tell.
    match finalized && matches!(output.kind, OutputKind::Exclusive) && !reads_destroy_ready {
        true => Err(Conflict::NoDestroyReady { writer, reader, r#type: output.r#type, queue }),
        false => Ok(()),
    }
}

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

const fn opt_str_eq(a: Option<&str>, b: Option<&str>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => str_eq(a, b),
        (None, None) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_conflict() -> Vec<Conflict<&'static str>> {
        let (controller, r#type, namespace) = ("c", "T", "ns");
        let mut conflicts = vec![
            Conflict::DuplicateName { name: controller },
            Conflict::OutputConflict { first: "a", second: "b", exclusive: "a", r#type },
            Conflict::DuplicateOutput { controller, r#type },
            Conflict::DuplicateInput { controller, namespace, r#type },
            Conflict::DuplicateInput { controller, namespace: "", r#type },
            Conflict::EmptyName,
            Conflict::ReservedName { name: RESERVED_NAME },
            Conflict::InvalidName { name: " c", reason: NameRule::Whitespace },
            Conflict::InvalidName { name: "c", reason: NameRule::TooLong },
            Conflict::UndeclaredInput { controller, namespace, r#type },
            Conflict::InvalidInput { controller, reason: "id is empty" },
            Conflict::NoDestroyReady { writer: "w", reader: "r", r#type, queue: false },
            Conflict::NoDestroyReady { writer: "w", reader: "r", r#type, queue: true },
        ];
        for kind in InputKind::ALL {
            conflicts.push(Conflict::OutputIsInput { controller, r#type, kind });
            conflicts.push(Conflict::MixedInputKinds { controller, kind });
        }
        for reason in [QueueRule::ZeroConcurrency, QueueRule::ConcurrencyWithoutQueue, QueueRule::NoPrimaryInput] {
            conflicts.push(Conflict::InvalidQueue { controller, reason });
        }
        conflicts
    }

    #[test]
    fn every_message_fits_its_pieces_and_reads_as_one_lowercase_clause() {
        for conflict in every_conflict() {
            let message = conflict.message();
            assert!(message.len < MAX_PARTS, "{conflict:?} may have lost pieces");
            let text = conflict.to_string();
            assert_eq!(message.to_const().as_str(), text);
            assert!(text.starts_with(|c: char| c.is_ascii_lowercase()), "{text}");
            assert!(!text.ends_with('.'), "{text}");
        }
    }

    #[test]
    fn a_namespace_is_named_only_when_known() {
        let r#type = "T";
        let known = Conflict::DuplicateInput { controller: "c", namespace: "ns", r#type };
        let unknown = Conflict::DuplicateInput { controller: "c", namespace: "", r#type };
        assert_eq!(known.to_string(), "controller `c` declares input `T` in namespace `ns` twice; keep one");
        assert_eq!(unknown.to_string(), "controller `c` declares input `T` twice; keep one");
    }

    #[test]
    fn a_const_text_is_cut_between_characters() {
        let long = "é".repeat(300);
        let text = Message::new(&["x", &long]).to_const();
        assert_eq!(text.as_str().len(), 511);
        assert!(text.as_str().ends_with('é'));
    }

    #[test]
    fn each_rule_finds_its_conflict() {
        let input = |r#type, kind| InputRef { namespace: "ns", r#type, id: None, kind, explicit_namespace: false };
        let output = |r#type, kind| OutputRef { namespace: "ns", r#type, kind };
        let (weak, strong) = (input("A", InputKind::Weak), input("A", InputKind::Strong));
        let (shared, exclusive) = (output("A", OutputKind::Shared), output("A", OutputKind::Exclusive));
        assert_eq!(controller_name(""), Err(Conflict::EmptyName));
        assert_eq!(controller_name("c"), Ok(()));

        assert_eq!(
            duplicate_output("c", shared, exclusive),
            Err(Conflict::DuplicateOutput { controller: "c", r#type: "A" })
        );
        assert_eq!(duplicate_output("c", shared, output("B", OutputKind::Shared)), Ok(()));

        let twice = Err(Conflict::DuplicateInput { controller: "c", namespace: "ns", r#type: "A" });
        assert_eq!(duplicate_input("c", weak, strong), twice);
        assert_eq!(duplicate_input("c", weak, InputRef { id: Some("x"), ..strong }), Ok(()));
        assert_eq!(duplicate_input("c", weak, InputRef { namespace: "other", ..strong }), Ok(()));

        let woken = Err(Conflict::OutputIsInput { controller: "c", r#type: "A", kind: InputKind::Weak });
        assert_eq!(output_is_input("c", weak, shared), woken);
        assert_eq!(output_is_input("c", InputRef { explicit_namespace: true, ..weak }, shared), woken);
        let elsewhere = InputRef { namespace: "other", explicit_namespace: true, ..weak };
        assert_eq!(output_is_input("c", elsewhere, shared), Ok(()));
        assert_eq!(
            output_is_input("c", InputRef { explicit_namespace: true, ..weak }, OutputRef { namespace: "", ..shared }),
            Ok(())
        );
        assert_eq!(
            output_is_input("c", InputRef { namespace: "", ..weak }, OutputRef { namespace: "", ..shared }),
            woken
        );
        assert_eq!(output_is_input("c", input("A", InputKind::DestroyReady), exclusive), Ok(()));
        assert_eq!(output_is_input("c", input("A", InputKind::MappedDestroyReady), exclusive), Ok(()));
        assert_eq!(output_is_input("c", input("B", InputKind::Weak), exclusive), Ok(()));

        for kind in InputKind::ALL {
            let mixed = Err(Conflict::MixedInputKinds { controller: "c", kind });
            let expected = |queue: bool| match kind.is_queue() == queue {
                true => Ok(()),
                false => mixed,
            };
            assert_eq!(input_shape("c", true, input("A", kind)), expected(true));
            assert_eq!(input_shape("c", false, input("A", kind)), expected(false));
        }

        let queue = |reason| Err(Conflict::InvalidQueue { controller: "c", reason });
        assert_eq!(queue_settings("c", Some(0), true, true), queue(QueueRule::ZeroConcurrency));
        assert_eq!(queue_settings("c", Some(2), false, false), queue(QueueRule::ConcurrencyWithoutQueue));
        assert_eq!(queue_settings("c", Some(0), false, false), queue(QueueRule::ConcurrencyWithoutQueue));
        assert_eq!(queue_settings("c", Some(1), true, false), queue(QueueRule::NoPrimaryInput));
        assert_eq!(queue_settings("c", Some(3), true, true), Ok(()));
        assert_eq!(queue_settings("c", None, true, false), Ok(()));
    }

    #[test]
    fn a_writer_whose_output_another_may_finalize_reads_it_destroy_ready() {
        let input = |r#type, kind| InputRef { namespace: "ns", r#type, id: None, kind, explicit_namespace: false };
        let output = OutputRef { namespace: "ns", r#type: "T", kind: OutputKind::Exclusive };
        let missing = |queue| Err(Conflict::NoDestroyReady { writer: "w", reader: "r", r#type: "T", queue });
        for kind in InputKind::ALL {
            let expected = match kind {
                InputKind::Strong | InputKind::Primary => missing(false),
                _ => Ok(()),
            };
            assert_eq!(destroy_ready("w", false, output, false, "r", input("T", kind)), expected, "{kind:?}");
        }
        let strong = input("T", InputKind::Strong);
        assert_eq!(destroy_ready("w", true, output, false, "r", strong), missing(true));
        assert_eq!(destroy_ready("w", false, output, true, "r", strong), Ok(()));
        // A finalizing input of another type is none of the writer's business,
        // nor, of a type written shared, of any one writer's.
        assert_eq!(destroy_ready("w", false, output, false, "r", input("U", InputKind::Strong)), Ok(()));
        let shared = OutputRef { kind: OutputKind::Shared, ..output };
        assert_eq!(destroy_ready("w", false, shared, false, "r", strong), Ok(()));

        // Either destroy-ready kind of the type counts; another type's does not.
        assert!(!input("U", InputKind::DestroyReady).reads_destroy_ready("T"));
        assert!(!strong.reads_destroy_ready("T"));
        assert!(input("T", InputKind::DestroyReady).reads_destroy_ready("T"));
        assert!(input("T", InputKind::MappedDestroyReady).reads_destroy_ready("T"));
    }

    #[test]
    fn a_controller_name_is_one_a_state_takes_as_an_id() {
        assert_eq!(controller_name(RESERVED_NAME), Err(Conflict::ReservedName { name: "runtime" }));
        for name in ["runtime-1", "network.HostnameController", "é-ß", "控制器", "a-b_c"] {
            assert_eq!(controller_name(name), Ok(()), "{name:?}");
        }
        for name in [" a", "a ", "a b", "a\tb", "a\nb", "a\u{7f}", "a\u{85}", "a\u{a0}b", "a\u{3000}", "\u{2028}"] {
            let whitespace = Err(Conflict::InvalidName { name, reason: NameRule::Whitespace });
            assert_eq!(controller_name(name), whitespace, "{name:?}");
        }
        let longest = "é".repeat(MAX_NAME_LEN / 2);
        assert_eq!(controller_name(&longest), Ok(()));
        let too_long = format!("{longest}a");
        assert_eq!(
            controller_name(&too_long),
            Err(Conflict::InvalidName { name: too_long.as_str(), reason: NameRule::TooLong })
        );
        // The runtime's own check of the name, at compile time.
        const _: () = assert!(controller_name("hostname").is_ok() && controller_name("host name").is_err());
    }

    #[test]
    fn the_longest_name_is_the_one_of_the_naming_rules() {
        assert_eq!(MAX_NAME_LEN, cosi_naming::MAX_NAME_LEN);
        assert_eq!(MAX_NAME_LEN_TEXT, MAX_NAME_LEN.to_string());
    }

    #[test]
    fn a_type_has_one_exclusive_writer_or_only_shared_ones() {
        let (exclusive, shared) = (
            OutputRef { namespace: "ns", r#type: "T", kind: OutputKind::Exclusive },
            OutputRef { namespace: "ns", r#type: "T", kind: OutputKind::Shared },
        );
        let conflict = |exclusive| Err(Conflict::OutputConflict { first: "a", second: "b", exclusive, r#type: "T" });
        assert_eq!(output_conflict("a", exclusive, "b", shared), conflict("a"));
        assert_eq!(output_conflict("a", shared, "b", exclusive), conflict("b"));
        assert_eq!(output_conflict("a", exclusive, "b", exclusive), conflict("a"));
        assert_eq!(output_conflict("a", shared, "b", shared), Ok(()));
        assert_eq!(output_conflict("a", exclusive, "b", OutputRef { r#type: "U", ..shared }), Ok(()));
        assert_eq!(duplicate_name("a", "a"), Err(Conflict::DuplicateName { name: "a" }));
        assert_eq!(duplicate_name("a", "b"), Ok(()));
    }
}
