//! What a controller declares: its inputs and outputs, and the checks of
//! the rules a set of declarations must keep.
//!
//! The rules and their messages are `cosi-rules`'s, which `#[controller]`
//! applies to its tokens too; here they are applied to declarations and to
//! the inputs a controller is given at run time. They are `const fn`s over
//! plain data, so one piece of code serves both checks of a declaration:
//! `cosi::system!` evaluates them at compile time, and the runtime evaluates
//! them again when a controller is registered.

use std::fmt;
use std::sync::Arc;

use cosi_rules as rules;
pub use cosi_rules::{Conflict, InputKind, InputRef, NameRule, OutputKind, OutputRef, QueueRule};

use crate::resource::{Kind, Pointer, Resource, ResourceDefinition};

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

    /// The input as the rules see it.
    pub const fn to_ref(&self) -> InputRef<'static> {
        InputRef {
            namespace: self.namespace,
            r#type: self.r#type,
            id: self.id,
            kind: self.kind,
            explicit_namespace: self.explicit_namespace,
        }
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

    /// The output as the rules see it.
    pub const fn to_ref(&self) -> OutputRef<'static> {
        OutputRef { namespace: self.namespace, r#type: self.r#type, kind: self.kind }
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

/// A declaration built at run time, for a generic controller whose inputs
/// and outputs depend on how it was built: kept for the rest of the program,
/// as the ones `#[controller]` writes are, once per distinct declaration, so
/// that building the same controller again keeps nothing more.
pub(crate) fn intern(
    name: &'static str,
    inputs: Vec<InputDecl>,
    outputs: Vec<OutputDecl>,
    concurrency: Option<usize>,
) -> &'static Declaration {
    static INTERNED: std::sync::Mutex<Vec<&'static Declaration>> = std::sync::Mutex::new(Vec::new());
    let mut interned = INTERNED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let same = |declaration: &&&'static Declaration| {
        (declaration.name, declaration.inputs, declaration.outputs, declaration.concurrency)
            == (name, &inputs[..], &outputs[..], concurrency)
    };
    if let Some(declaration) = interned.iter().find(same) {
        return declaration;
    }
    let inputs = Box::leak(inputs.into_boxed_slice());
    let outputs = Box::leak(outputs.into_boxed_slice());
    let declaration: &'static Declaration = Box::leak(Box::new(Declaration { name, inputs, outputs, concurrency }));
    interned.push(declaration);
    declaration
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

    /// Whether `pointer` is of the input's kind, whatever its ID.
    pub fn is_of_kind(&self, pointer: &Pointer) -> bool {
        self.kind.namespace() == pointer.namespace() && self.kind.r#type() == pointer.r#type()
    }

    /// Whether the input reads the resource at `pointer`: of its kind, and covered.
    pub fn reads(&self, pointer: &Pointer) -> bool {
        self.is_of_kind(pointer) && self.covers(pointer.id())
    }

    /// The input as the rules see it; a namespace given at run time counts
    /// as named explicitly, so a merge may read its layers of the type it
    /// writes, in a namespace of its own.
    pub fn to_ref(&self) -> InputRef<'_> {
        InputRef {
            namespace: self.kind.namespace(),
            r#type: self.kind.r#type(),
            id: self.id.as_deref(),
            kind: self.dependency,
            explicit_namespace: true,
        }
    }
}

impl From<&InputDecl> for Input {
    fn from(decl: &InputDecl) -> Self {
        Input { kind: Kind::new(decl.namespace, decl.r#type), id: decl.id.map(Arc::from), dependency: decl.kind }
    }
}

/// A controller as the graph checks see it: its name, which an instance
/// may choose, and its declaration.
#[derive(Clone, Copy, Debug)]
pub struct Entry<'a> {
    /// The controller's name.
    pub name: &'a str,
    /// What it declares.
    pub declaration: &'a Declaration,
}

/// Checks one controller's own declaration: a name a state takes (and not
/// the runtime's own), no output twice, queue settings that make a queue
/// controller, inputs of its shape, no input twice, no output that is also a
/// waking input.
pub const fn check_declaration(declaration: &Declaration) -> Result<(), Conflict<&'static str>> {
    let Declaration { name, inputs, outputs, concurrency } = *declaration;
    if let Err(conflict) = rules::controller_name(name) {
        return Err(conflict);
    }
    let mut i = 0;
    while i < outputs.len() {
        let mut j = 0;
        while j < i {
            if let Err(conflict) = rules::duplicate_output(name, outputs[j].to_ref(), outputs[i].to_ref()) {
                return Err(conflict);
            }
            j += 1;
        }
        i += 1;
    }
    let (mut queue_inputs, mut primary_input) = (false, false);
    let mut i = 0;
    while i < inputs.len() {
        queue_inputs |= inputs[i].kind.is_queue();
        primary_input |= matches!(inputs[i].kind, InputKind::Primary);
        i += 1;
    }
    if let Err(conflict) = rules::queue_settings(name, concurrency, queue_inputs, primary_input) {
        return Err(conflict);
    }
    let mut i = 0;
    while i < inputs.len() {
        if let Err(conflict) = rules::input_shape(name, declaration.is_queue(), inputs[i].to_ref()) {
            return Err(conflict);
        }
        let mut j = 0;
        while j < i {
            if let Err(conflict) = rules::duplicate_input(name, inputs[j].to_ref(), inputs[i].to_ref()) {
                return Err(conflict);
            }
            j += 1;
        }
        if let Err(conflict) = output_is_input(name, inputs[i].to_ref(), outputs, true) {
            return Err(conflict);
        }
        i += 1;
    }
    Ok(())
}

/// Checks the inputs a controller is given at run time against each other
/// and against its outputs, wherever the controller writes those.
pub const fn check_inputs<'a>(
    controller: &'a str,
    inputs: &[InputRef<'a>],
    outputs: &[OutputDecl],
) -> Result<(), Conflict<&'a str>> {
    let mut i = 0;
    while i < inputs.len() {
        let mut j = 0;
        while j < i {
            if let Err(conflict) = rules::duplicate_input(controller, inputs[j], inputs[i]) {
                return Err(conflict);
            }
            j += 1;
        }
        if let Err(conflict) = output_is_input(controller, inputs[i], outputs, false) {
            return Err(conflict);
        }
        i += 1;
    }
    Ok(())
}

/// `declared`: whether `input` is declared, so that the outputs are where
/// their declaration says. An instance given inputs at run time writes where
/// it chooses (a merge, to its target), so its outputs' namespaces are not
/// known there, and any namespace it names is taken to be another.
const fn output_is_input<'a>(
    controller: &'a str,
    input: InputRef<'a>,
    outputs: &[OutputDecl],
    declared: bool,
) -> Result<(), Conflict<&'a str>> {
    let mut k = 0;
    while k < outputs.len() {
        let mut output = outputs[k].to_ref();
        if !declared {
            output.namespace = "";
        }
        if let Err(conflict) = rules::output_is_input(controller, input, output) {
            return Err(conflict);
        }
        k += 1;
    }
    Ok(())
}

/// Checks a set of controllers against each other: unique names, and at most
/// one exclusive writer per type, never beside shared ones.
pub const fn check_graph<'a>(controllers: &[Entry<'a>]) -> Result<(), Conflict<&'a str>> {
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

/// Checks two controllers against each other: different names, at most one
/// exclusive writer of a type, and a writer that reads destroy-ready what
/// the other may hold finalizers on.
pub const fn check_pair<'a>(first: Entry<'a>, second: Entry<'a>) -> Result<(), Conflict<&'a str>> {
    if let Err(conflict) = rules::duplicate_name(first.name, second.name) {
        return Err(conflict);
    }
    let (a, b) = (first.declaration.outputs, second.declaration.outputs);
    let mut i = 0;
    while i < a.len() {
        let mut j = 0;
        while j < b.len() {
            if let Err(conflict) = rules::output_conflict(first.name, a[i].to_ref(), second.name, b[j].to_ref()) {
                return Err(conflict);
            }
            j += 1;
        }
        i += 1;
    }
    if let Err(conflict) = finalized_outputs(first, second) {
        return Err(conflict);
    }
    finalized_outputs(second, first)
}

/// `writer` reads destroy-ready each of its outputs that `reader` may hold
/// finalizers on.
const fn finalized_outputs<'a>(writer: Entry<'a>, reader: Entry<'a>) -> Result<(), Conflict<&'a str>> {
    let (outputs, inputs) = (writer.declaration.outputs, reader.declaration.inputs);
    let mut i = 0;
    while i < outputs.len() {
        let output = outputs[i].to_ref();
        let reads = reads_destroy_ready(writer.declaration.inputs, output.r#type);
        let mut j = 0;
        while j < inputs.len() {
            let queue = writer.declaration.is_queue();
            if let Err(conflict) =
                rules::destroy_ready(writer.name, queue, output, reads, reader.name, inputs[j].to_ref())
            {
                return Err(conflict);
            }
            j += 1;
        }
        i += 1;
    }
    Ok(())
}

/// Whether `inputs` read `type` destroy-ready.
const fn reads_destroy_ready(inputs: &[InputDecl], r#type: &str) -> bool {
    let mut i = 0;
    while i < inputs.len() {
        if inputs[i].to_ref().reads_destroy_ready(r#type) {
            return true;
        }
        i += 1;
    }
    false
}

/// Checks inputs a controller is given at run time, at its registration or
/// by `update_inputs`, against its declaration and each other; returns them
/// sorted, without duplicates.
///
/// Every input must be of a type the declaration names as an input, of a kind
/// of the controller's shape (queue or not), with names a state accepts, and
/// together they must keep the rules of the declaration itself (no input
/// twice); a namespace given here counts as named explicitly, so an output
/// type may be read in it.
pub(crate) fn check_runtime_inputs(
    name: &str,
    declaration: &Declaration,
    mut inputs: Vec<Input>,
) -> std::result::Result<Vec<Input>, Conflict<String>> {
    inputs.sort();
    inputs.dedup();
    for input in &inputs {
        let view = input.to_ref();
        if !declaration.inputs.iter().any(|declared| declared.r#type == view.r#type) {
            let conflict =
                Conflict::UndeclaredInput { controller: name, namespace: view.namespace, r#type: view.r#type };
            return Err(conflict.to_owned());
        }
        rules::input_shape(name, declaration.is_queue(), view).map_err(|conflict| conflict.to_owned())?;
        check_input_names(name, input)?;
    }
    let views: Vec<InputRef<'_>> = inputs.iter().map(Input::to_ref).collect();
    check_inputs(name, &views, declaration.outputs).map_err(|conflict| conflict.to_owned())?;
    Ok(inputs)
}

/// Checks the namespaces and IDs a controller declares, as a state would:
/// `#[controller]` checks them in tokens, but a `Declared` impl written by
/// hand can name any string.
pub(crate) fn check_declared_inputs(
    name: &str,
    declaration: &Declaration,
) -> std::result::Result<(), Conflict<String>> {
    declaration.inputs.iter().try_for_each(|declared| check_input_names(name, &Input::from(declared)))
}

/// The namespace, type and ID of `input` are names a state accepts.
fn check_input_names(name: &str, input: &Input) -> std::result::Result<(), Conflict<String>> {
    let valid = match &input.id {
        Some(id) => input.kind.pointer(&**id).validate(),
        None => input.kind.validate(),
    };
    valid.map_err(|reason| Conflict::InvalidInput { controller: name.to_owned(), reason })
}

/// Compile-time entry point of `cosi::system!`: panics (a compile error in a
/// `const` item) with the conflict's message.
pub const fn assert_system(controllers: &[Entry<'_>], declarations: &[&Declaration]) {
    let mut i = 0;
    while i < declarations.len() {
        if let Err(conflict) = check_declaration(declarations[i]) {
            panic!("{}", conflict.message().to_const().as_str());
        }
        i += 1;
    }
    if let Err(conflict) = check_graph(controllers) {
        panic!("{}", conflict.message().to_const().as_str());
    }
}
