//! What a controller declares: its inputs and outputs, and the rules a set of
//! declarations must keep.
//!
//! The rules are `const fn`s over plain data, so one piece of code serves
//! both checks: `cosi::system!` evaluates them at compile time, and the
//! runtime evaluates them again when a controller is registered.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::resource::{Kind, Resource, ResourceDefinition};

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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
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
}

/// How a controller owns an output type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OutputKind {
    /// The controller is the only writer of the type.
    Exclusive,
    /// Several controllers write the type, each only its own resources.
    Shared,
}

impl OutputKind {
    /// `exclusive` or `shared`.
    pub const fn as_str(self) -> &'static str {
        match self {
            OutputKind::Exclusive => "exclusive",
            OutputKind::Shared => "shared",
        }
    }
}

/// One declared input: a kind, optionally narrowed to one ID.
#[derive(Clone, Copy)]
pub struct InputDecl {
    /// The namespace watched.
    pub namespace: &'static str,
    /// The resource type.
    pub r#type: &'static str,
    /// The one ID watched, or every ID.
    pub id: Option<&'static str>,
    /// How the controller depends on it.
    pub kind: InputKind,
    /// Whether the namespace was named explicitly rather than taken from the type.
    pub explicit_namespace: bool,
    /// The type's definition (`T::definition`), which the runtime publishes.
    pub definition: fn() -> ResourceDefinition,
}

impl InputDecl {
    /// An input on `T` in its default namespace.
    pub const fn of<T: Resource>(kind: InputKind) -> Self {
        InputDecl {
            namespace: T::NAMESPACE,
            r#type: T::TYPE,
            id: None,
            kind,
            explicit_namespace: false,
            definition: T::definition,
        }
    }

    /// The same input in `namespace`.
    pub const fn in_namespace(mut self, namespace: &'static str) -> Self {
        self.namespace = namespace;
        self.explicit_namespace = true;
        self
    }

    /// The same input narrowed to the resource `id`.
    pub const fn with_id(mut self, id: &'static str) -> Self {
        self.id = Some(id);
        self
    }
}

/// One declared output type.
#[derive(Clone, Copy)]
pub struct OutputDecl {
    /// The resource type (outputs are per type, in any namespace).
    pub r#type: &'static str,
    /// The namespace the type lives in by default; where output cleanup looks.
    pub namespace: &'static str,
    /// Exclusive or shared.
    pub kind: OutputKind,
    /// The type's definition (`T::definition`), which the runtime publishes.
    pub definition: fn() -> ResourceDefinition,
}

impl OutputDecl {
    /// An output of type `T`.
    pub const fn of<T: Resource>(kind: OutputKind) -> Self {
        OutputDecl { r#type: T::TYPE, namespace: T::NAMESPACE, kind, definition: T::definition }
    }
}

// Compared and shown without `definition`: a function pointer says nothing
// the type does not, and its address is not stable across builds.

impl PartialEq for InputDecl {
    fn eq(&self, other: &Self) -> bool {
        (self.namespace, self.r#type, self.id, self.kind, self.explicit_namespace)
            == (other.namespace, other.r#type, other.id, other.kind, other.explicit_namespace)
    }
}

impl Eq for InputDecl {}

impl fmt::Debug for InputDecl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InputDecl")
            .field("namespace", &self.namespace)
            .field("type", &self.r#type)
            .field("id", &self.id)
            .field("kind", &self.kind)
            .field("explicit_namespace", &self.explicit_namespace)
            .finish_non_exhaustive()
    }
}

impl PartialEq for OutputDecl {
    fn eq(&self, other: &Self) -> bool {
        (self.r#type, self.namespace, self.kind) == (other.r#type, other.namespace, other.kind)
    }
}

impl Eq for OutputDecl {}

impl fmt::Debug for OutputDecl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OutputDecl")
            .field("type", &self.r#type)
            .field("namespace", &self.namespace)
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

/// Everything a controller declares, as `#[controller]` writes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Declaration {
    /// The controller's name: the owner of what it writes.
    pub name: &'static str,
    /// The inputs it starts with.
    pub inputs: &'static [InputDecl],
    /// The types it writes.
    pub outputs: &'static [OutputDecl],
    /// For queue controllers, how many items run at once; `None` for other controllers.
    pub concurrency: Option<usize>,
}

impl Declaration {
    /// Whether this is a queue controller.
    pub const fn is_queue(&self) -> bool {
        self.concurrency.is_some()
    }

    /// The inputs as the runtime keeps them.
    pub fn runtime_inputs(&self) -> Vec<Input> {
        self.inputs.iter().map(Input::from).collect()
    }

    /// The definitions of every type the controller reads or writes, once
    /// each: what the runtime publishes in the `meta` namespace.
    pub fn definitions(&self) -> Vec<ResourceDefinition> {
        let inputs = self.inputs.iter().map(|input| (input.r#type, input.definition));
        let outputs = self.outputs.iter().map(|output| (output.r#type, output.definition));
        let mut seen: Vec<&str> = Vec::new();
        let mut definitions = Vec::new();
        for (r#type, definition) in inputs.chain(outputs) {
            if !seen.contains(&r#type) {
                seen.push(r#type);
                definitions.push(definition());
            }
        }
        definitions
    }
}

/// An input as the runtime holds it; controllers can change theirs while they run.
///
/// # Example
///
/// ```
/// use cosi::prelude::*;
/// # #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
/// # #[resource(type = "HostnameSpecs.net.example.org", namespace = "network")]
/// # pub struct HostnameSpec { pub hostname: String }
///
/// let input = Input::of::<HostnameSpec>(InputKind::Weak)
///     .in_namespace("network-config")
///     .with_id("configuration/hostname");
/// assert_eq!(input.kind, Kind::new("network-config", "HostnameSpecs.net.example.org"));
/// assert!(input.covers("configuration/hostname"));
/// assert!(!input.covers("platform/hostname"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Input {
    /// The (namespace, type) watched.
    pub kind: Kind,
    /// The one ID watched, or every ID.
    pub id: Option<Arc<str>>,
    /// How the controller depends on it.
    pub dependency: InputKind,
}

impl Input {
    /// An input on `T` in its default namespace.
    pub fn of<T: Resource>(dependency: InputKind) -> Self {
        Input { kind: T::kind(), id: None, dependency }
    }

    /// The same input in `namespace`.
    pub fn in_namespace(mut self, namespace: impl AsRef<str>) -> Self {
        self.kind = Kind::new(namespace, self.kind.r#type());
        self
    }

    /// The same input narrowed to the resource `id`.
    pub fn with_id(mut self, id: impl AsRef<str>) -> Self {
        self.id = Some(id.as_ref().into());
        self
    }

    /// Whether the input covers the resource `id` of its kind.
    pub fn covers(&self, id: &str) -> bool {
        self.id.as_deref().is_none_or(|own| own == id)
    }
}

impl From<&InputDecl> for Input {
    fn from(decl: &InputDecl) -> Self {
        Input { kind: Kind::new(decl.namespace, decl.r#type), id: decl.id.map(Arc::from), dependency: decl.kind }
    }
}

/// A view of one input for the rule checks: borrowed strings, so that the
/// same `const fn` checks static declarations and runtime inputs.
#[derive(Clone, Copy, Debug)]
pub struct InputRef<'a> {
    /// The namespace.
    pub namespace: &'a str,
    /// The type.
    pub r#type: &'a str,
    /// The ID, if narrowed to one.
    pub id: Option<&'a str>,
    /// The dependency kind.
    pub kind: InputKind,
    /// Whether the namespace was chosen explicitly: a controller may read a
    /// kind of its output type in a namespace it names (a sum of sums), but
    /// not where it writes by default.
    pub explicit_namespace: bool,
}

impl<'a> InputRef<'a> {
    /// A view of a declared input.
    pub const fn from_decl(decl: &'a InputDecl) -> Self {
        InputRef {
            namespace: decl.namespace,
            r#type: decl.r#type,
            id: decl.id,
            kind: decl.kind,
            explicit_namespace: decl.explicit_namespace,
        }
    }

    /// A view of a runtime input; its namespace counts as explicit.
    pub fn from_input(input: &'a Input) -> Self {
        InputRef {
            namespace: input.kind.namespace(),
            r#type: input.kind.r#type(),
            id: input.id.as_deref(),
            kind: input.dependency,
            explicit_namespace: true,
        }
    }
}

/// A broken rule, naming everything involved.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Conflict<'a> {
    /// Two controllers have one name.
    #[error("two controllers are named `{name}`")]
    DuplicateName {
        /// The name.
        name: &'a str,
    },
    /// A controller writes a type another writes exclusively, or writes it
    /// exclusively while another writes it.
    #[error(
        "controllers `{first}` and `{second}` both write `{type}`, and `{exclusive}` declares it exclusive: a type has one exclusive writer, or only shared ones"
    )]
    OutputConflict {
        /// The controller registered first.
        first: &'a str,
        /// The controller registered second.
        second: &'a str,
        /// The one (of the two) that declares the type exclusive.
        exclusive: &'a str,
        /// The type.
        r#type: &'a str,
    },
    /// A controller declares one output type twice.
    #[error("controller `{controller}` declares output `{type}` twice")]
    DuplicateOutput {
        /// The controller.
        controller: &'a str,
        /// The type.
        r#type: &'a str,
    },
    /// A controller declares one input twice.
    #[error("controller `{controller}` declares input `{type}` in namespace `{namespace}` twice")]
    DuplicateInput {
        /// The controller.
        controller: &'a str,
        /// The namespace.
        namespace: &'a str,
        /// The type.
        r#type: &'a str,
    },
    /// An output is also an input that would wake the controller on its own writes.
    #[error(
        "controller `{controller}` writes `{type}` and also reads it as a {kind} input: an output can only be a destroy-ready input, or an input in a namespace named explicitly"
    )]
    OutputIsInput {
        /// The controller.
        controller: &'a str,
        /// The type.
        r#type: &'a str,
        /// The input kind declared.
        kind: &'static str,
    },
    /// Queue input kinds and other input kinds in one controller.
    #[error(
        "controller `{controller}` mixes queue inputs (primary, mapped) with other inputs: a controller is either a queue controller or not"
    )]
    MixedInputKinds {
        /// The controller.
        controller: &'a str,
    },
    /// A queue controller without a primary input, or another controller with queue settings.
    #[error("controller `{controller}`: {reason}")]
    InvalidQueue {
        /// The controller.
        controller: &'a str,
        /// What is wrong.
        reason: &'static str,
    },
    /// An empty controller name.
    #[error("a controller has an empty name")]
    EmptyName,
}

/// A controller as the graph checks see it.
#[derive(Clone, Copy, Debug)]
pub struct Entry<'a> {
    /// The controller's name.
    pub name: &'a str,
    /// Its outputs.
    pub outputs: &'a [OutputDecl],
}

/// Checks one controller's own declaration: a name, no input or output twice,
/// no output that is also a waking input, queue kinds only in queue controllers.
pub const fn check_declaration(declaration: &Declaration) -> Result<(), Conflict<'static>> {
    if declaration.name.is_empty() {
        return Err(Conflict::EmptyName);
    }
    let mut i = 0;
    while i < declaration.outputs.len() {
        let mut j = i + 1;
        while j < declaration.outputs.len() {
            if str_eq(declaration.outputs[i].r#type, declaration.outputs[j].r#type) {
                return Err(Conflict::DuplicateOutput {
                    controller: declaration.name,
                    r#type: declaration.outputs[i].r#type,
                });
            }
            j += 1;
        }
        i += 1;
    }
    let mut queue_inputs = 0;
    let mut primary_inputs = 0;
    let mut i = 0;
    while i < declaration.inputs.len() {
        let input = &declaration.inputs[i];
        if input.kind.is_queue() {
            queue_inputs += 1;
        }
        if matches!(input.kind, InputKind::Primary) {
            primary_inputs += 1;
        }
        i += 1;
    }
    if queue_inputs != 0 && queue_inputs != declaration.inputs.len() {
        return Err(Conflict::MixedInputKinds { controller: declaration.name });
    }
    match declaration.concurrency {
        Some(0) => {
            return Err(Conflict::InvalidQueue {
                controller: declaration.name,
                reason: "concurrency must be at least 1",
            });
        }
        Some(_) if primary_inputs == 0 => {
            return Err(Conflict::InvalidQueue {
                controller: declaration.name,
                reason: "a queue controller needs at least one primary input",
            });
        }
        None if queue_inputs != 0 => {
            return Err(Conflict::InvalidQueue {
                controller: declaration.name,
                reason: "primary and mapped inputs belong to queue controllers",
            });
        }
        _ => (),
    }
    let mut inputs =
        [InputRef { namespace: "", r#type: "", id: None, kind: InputKind::Weak, explicit_namespace: false }; 64];
    if declaration.inputs.len() > inputs.len() {
        // Too many to copy into the fixed buffer const evaluation allows; the
        // runtime checks them again with `check_inputs` over a `Vec`.
        return Ok(());
    }
    let mut i = 0;
    while i < declaration.inputs.len() {
        inputs[i] = InputRef::from_decl(&declaration.inputs[i]);
        i += 1;
    }
    let (inputs, _) = inputs.split_at(declaration.inputs.len());
    check_inputs(declaration.name, inputs, declaration.outputs)
}

/// Checks a controller's inputs against each other and against its outputs.
pub const fn check_inputs<'a>(
    controller: &'a str,
    inputs: &[InputRef<'a>],
    outputs: &[OutputDecl],
) -> Result<(), Conflict<'a>> {
    let mut i = 0;
    while i < inputs.len() {
        let input = inputs[i];
        let mut j = i + 1;
        while j < inputs.len() {
            let other = inputs[j];
            if str_eq(input.namespace, other.namespace)
                && str_eq(input.r#type, other.r#type)
                && opt_str_eq(input.id, other.id)
            {
                return Err(Conflict::DuplicateInput { controller, namespace: input.namespace, r#type: input.r#type });
            }
            j += 1;
        }
        let mut k = 0;
        while k < outputs.len() {
            if str_eq(input.r#type, outputs[k].r#type) && !input.kind.is_destroy_ready() && !input.explicit_namespace {
                return Err(Conflict::OutputIsInput { controller, r#type: input.r#type, kind: input.kind.as_str() });
            }
            k += 1;
        }
        i += 1;
    }
    Ok(())
}

/// Checks a set of controllers against each other: unique names, and at most
/// one exclusive writer per type, never beside shared ones.
pub const fn check_graph<'a>(controllers: &[Entry<'a>]) -> Result<(), Conflict<'a>> {
    let mut i = 0;
    while i < controllers.len() {
        let mut j = i + 1;
        while j < controllers.len() {
            if let Err(conflict) = check_pair(controllers[i], controllers[j]) {
                return Err(conflict);
            }
            j += 1;
        }
        i += 1;
    }
    Ok(())
}

/// Checks two controllers against each other.
pub const fn check_pair<'a>(first: Entry<'a>, second: Entry<'a>) -> Result<(), Conflict<'a>> {
    if str_eq(first.name, second.name) {
        return Err(Conflict::DuplicateName { name: first.name });
    }
    let mut i = 0;
    while i < first.outputs.len() {
        let mut j = 0;
        while j < second.outputs.len() {
            let (a, b) = (first.outputs[i], second.outputs[j]);
            if str_eq(a.r#type, b.r#type)
                && (matches!(a.kind, OutputKind::Exclusive) || matches!(b.kind, OutputKind::Exclusive))
            {
                let exclusive = match a.kind {
                    OutputKind::Exclusive => first.name,
                    OutputKind::Shared => second.name,
                };
                return Err(Conflict::OutputConflict {
                    first: first.name,
                    second: second.name,
                    exclusive,
                    r#type: a.r#type,
                });
            }
            j += 1;
        }
        i += 1;
    }
    Ok(())
}

/// Checks inputs a controller is given at run time, at its registration or
/// by `update_inputs`, against its declaration and each other; returns them
/// sorted, without duplicates.
///
/// Every input must be of a type the declaration names as an input, of a kind
/// of the same shape (queue or not), and together they must keep the rules of
/// the declaration itself (no input twice); a namespace given here counts as
/// named explicitly, so an output type may be read in it.
pub(crate) fn check_runtime_inputs(
    name: &str,
    declaration: &Declaration,
    mut inputs: Vec<Input>,
) -> std::result::Result<Vec<Input>, String> {
    inputs.sort();
    inputs.dedup();
    for input in &inputs {
        let declared = declaration.inputs.iter().any(|declared| declared.r#type == input.kind.r#type());
        if !declared {
            return Err(format!(
                "controller `{name}` cannot take {} as an input: the type is not among its declared inputs",
                input.kind
            ));
        }
        if input.dependency.is_queue() != declaration.is_queue() {
            return Err(format!(
                "controller `{name}` cannot take a {} input: {}",
                input.dependency,
                match declaration.is_queue() {
                    true => "queue controllers take primary and mapped inputs",
                    false => "primary and mapped inputs belong to queue controllers",
                }
            ));
        }
        if let Err(error) = input.kind.validate() {
            return Err(format!("controller `{name}`: invalid input: {error}"));
        }
        if let Some(id) = &input.id
            && let Err(error) = input.kind.pointer(&**id).validate()
        {
            return Err(format!("controller `{name}`: invalid input: {error}"));
        }
    }
    // A namespace given at run time is named explicitly: a merge reads its
    // layers of the type it writes, in a namespace of its own.
    let refs: Vec<InputRef<'_>> = inputs.iter().map(InputRef::from_input).collect();
    check_inputs(name, &refs, declaration.outputs).map_err(|conflict| conflict.to_string())?;
    drop(refs);
    Ok(inputs)
}

/// Compile-time entry point of `cosi::system!`: panics (a compile error in a
/// `const` item) with the conflict's message.
pub const fn assert_system(controllers: &[Entry<'_>], declarations: &[&Declaration]) {
    let mut i = 0;
    while i < declarations.len() {
        if let Err(conflict) = check_declaration(declarations[i]) {
            panic!("{}", const_message(conflict).as_str());
        }
        i += 1;
    }
    if let Err(conflict) = check_graph(controllers) {
        panic!("{}", const_message(conflict).as_str());
    }
}

/// The conflict's message, assembled in `const` evaluation, where `Display`
/// cannot run; the runtime uses `Display`, which says the same.
const fn const_message(conflict: Conflict<'_>) -> ConstMessage {
    let message = ConstMessage::new();
    match conflict {
        Conflict::DuplicateName { name } => message.push("two controllers are named `").push(name).push("`"),
        Conflict::OutputConflict { first, second, exclusive, r#type } => message
            .push("controllers `")
            .push(first)
            .push("` and `")
            .push(second)
            .push("` both write `")
            .push(r#type)
            .push("`, and `")
            .push(exclusive)
            .push("` declares it exclusive: a type has one exclusive writer, or only shared ones"),
        Conflict::DuplicateOutput { controller, r#type } => {
            message.push("controller `").push(controller).push("` declares output `").push(r#type).push("` twice")
        }
        Conflict::DuplicateInput { controller, namespace, r#type } => message
            .push("controller `")
            .push(controller)
            .push("` declares input `")
            .push(r#type)
            .push("` in namespace `")
            .push(namespace)
            .push("` twice"),
        Conflict::OutputIsInput { controller, r#type, kind } => message
            .push("controller `")
            .push(controller)
            .push("` writes `")
            .push(r#type)
            .push("` and also reads it as a ")
            .push(kind)
            .push(" input: an output can only be a destroy-ready input, or an input in a namespace named explicitly"),
        Conflict::MixedInputKinds { controller } => message
            .push("controller `")
            .push(controller)
            .push("` mixes queue inputs (primary, mapped) with other inputs"),
        Conflict::InvalidQueue { controller, reason } => {
            message.push("controller `").push(controller).push("`: ").push(reason)
        }
        Conflict::EmptyName => message.push("a controller has an empty name"),
    }
}

/// A message assembled in `const` evaluation, cut at 512 bytes.
struct ConstMessage {
    buf: [u8; 512],
    len: usize,
}

impl ConstMessage {
    const fn new() -> Self {
        ConstMessage { buf: [0; 512], len: 0 }
    }

    const fn push(mut self, text: &str) -> Self {
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() && self.len < self.buf.len() {
            self.buf[self.len] = bytes[i];
            self.len += 1;
            i += 1;
        }
        self
    }

    const fn as_str(&self) -> &str {
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
