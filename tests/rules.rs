//! Every rule of a declaration has one message, whichever check finds it
//! broken: the runtime's, when a controller is registered or given inputs;
//! `const` evaluation's, which `cosi::system!` and each `#[controller]`'s
//! `DECLARATION` go through at compile time (here run as the function it is,
//! whose panic is the compiler's error); and `#[controller]`'s own, on
//! tokens, as the ui-tests record it. For each conflict the test breaks the
//! rule through every check that sees it, and compares each message with
//! the others and with the conflict's.

use std::panic::{self, AssertUnwindSafe};
use std::sync::Mutex;

use cosi::controller::Registration;
use cosi::controller::{
    Conflict, Controller, Declaration, Declared, Entry, InputDecl, NameRule, Outcome, OutputDecl, OutputKind,
    QueueRule, Requeue,
};
use cosi::prelude::*;
use cosi::runtime::RuntimeError;

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Specs.rules-test.cosi.dev", namespace = "default")]
pub struct Spec {}

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Statuses.rules-test.cosi.dev", namespace = "default")]
pub struct Status {}

const fn declaration(
    name: &'static str,
    inputs: &'static [InputDecl],
    outputs: &'static [OutputDecl],
    concurrency: Option<usize>,
) -> Declaration {
    Declaration { name, inputs, outputs, concurrency }
}

const fn input<T: Resource>(kind: InputKind) -> InputDecl {
    InputDecl::of::<T>(kind)
}

const fn output<T: Resource>(kind: OutputKind) -> OutputDecl {
    OutputDecl::of::<T>(kind)
}

/// Declarations written by hand, as `#[controller]` would refuse to write them.
const DECLARATIONS: [Declaration; 17] = [
    declaration("", &[], &[], None),
    declaration(
        "outputs-twice",
        &[],
        &[output::<Status>(OutputKind::Exclusive), output::<Status>(OutputKind::Shared)],
        None,
    ),
    declaration("inputs-twice", &[input::<Spec>(InputKind::Weak), input::<Spec>(InputKind::Strong)], &[], None),
    declaration(
        "woken-by-itself",
        &[input::<Status>(InputKind::Weak)],
        &[output::<Status>(OutputKind::Exclusive)],
        None,
    ),
    declaration(
        "queue-with-weak",
        &[input::<Spec>(InputKind::Primary), input::<Status>(InputKind::Weak)],
        &[],
        Some(1),
    ),
    declaration("primary-without-queue", &[input::<Spec>(InputKind::Primary)], &[], None),
    declaration("no-concurrency", &[input::<Spec>(InputKind::Primary)], &[], Some(0)),
    declaration("concurrency-alone", &[input::<Spec>(InputKind::Weak)], &[], Some(2)),
    declaration("mapped-only", &[input::<Spec>(InputKind::Mapped)], &[], Some(1)),
    // Valid ones, for the rules between controllers and the inputs given at run time.
    declaration("reader", &[input::<Spec>(InputKind::Weak)], &[output::<Status>(OutputKind::Exclusive)], None),
    declaration("queue", &[input::<Spec>(InputKind::Primary)], &[], Some(1)),
    declaration("writer", &[], &[output::<Status>(OutputKind::Shared)], None),
    // More broken ones.
    declaration("runtime", &[], &[], None),
    declaration("two words", &[], &[], None),
    declaration(
        "woken-in-its-namespace",
        &[input::<Status>(InputKind::Weak).in_namespace("default")],
        &[output::<Status>(OutputKind::Exclusive)],
        None,
    ),
    // For the rule between a writer and a controller that may finalize what it writes.
    declaration("finalizer", &[input::<Status>(InputKind::Strong)], &[], None),
    declaration(
        "tidy-reader",
        &[input::<Spec>(InputKind::Weak), input::<Status>(InputKind::DestroyReady)],
        &[output::<Status>(OutputKind::Exclusive)],
        None,
    ),
];
const READER: usize = 9;
const QUEUE: usize = 10;
const WRITER: usize = 11;
const FINALIZER: usize = 15;
const TIDY_READER: usize = 16;

/// The controller of `DECLARATIONS[N]`; never started.
#[derive(Default)]
struct Hand<const N: usize>;

impl<const N: usize> Declared for Hand<N> {
    const DECLARATION: Declaration = DECLARATIONS[N];
}

impl<const N: usize> Controller for Hand<N> {
    async fn reconcile(&mut self, _ctx: &mut Ctx<Self>) -> Outcome {
        Outcome::Done(Requeue::default())
    }
}

/// The rule the runtime says is broken when it refuses `registrations`, in
/// order, the last one.
fn refused(registrations: impl IntoIterator<Item = Registration>) -> Conflict<String> {
    let runtime = Runtime::new(cosi::state::memory());
    let mut last = None;
    for registration in registrations {
        last = Some(runtime.register(registration));
    }
    match last {
        Some(Err(RuntimeError::InvalidController(conflict) | RuntimeError::Conflict(conflict))) => conflict,
        other => panic!("expected a refusal of the last controller, got {other:?}"),
    }
}

/// What the runtime says when it refuses `registrations` (see [`refused`]).
fn refusal(registrations: impl IntoIterator<Item = Registration>) -> String {
    refused(registrations).to_string()
}

/// The panic message of the compile-time check, run as a function.
fn compile_time(controllers: &[Entry<'_>], declarations: &[&Declaration]) -> String {
    // The panic hook is global: one check at a time, each without the default hook's output.
    static HOOK: Mutex<()> = Mutex::new(());
    let _one_at_a_time = HOOK.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let hook = panic::take_hook();
    panic::set_hook(Box::new(|_| {}));
    let outcome = panic::catch_unwind(AssertUnwindSafe(|| cosi::__private::assert_system(controllers, declarations)));
    panic::set_hook(hook);
    match outcome {
        Err(payload) => payload.downcast_ref::<String>().cloned().expect("a formatted panic message"),
        Ok(()) => panic!("the compile-time check passed"),
    }
}

fn declared(n: usize) -> String {
    compile_time(&[], &[&DECLARATIONS[n]])
}

fn entry(n: usize) -> Entry<'static> {
    Entry { name: DECLARATIONS[n].name, declaration: &DECLARATIONS[n] }
}

/// The messages of the ui-test `case` (under `ui-tests/`): each `error: ...`,
/// and each `evaluation panicked: ...` of `const` evaluation.
fn ui_messages(case: &str) -> Vec<String> {
    let path = format!("{}/ui-tests/{case}.stderr", env!("CARGO_MANIFEST_DIR"));
    let stderr = std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{path}: {error}"));
    stderr
        .lines()
        .filter_map(|line| {
            line.strip_prefix("error: ")
                .or_else(|| line.split_once("evaluation panicked: ").map(|(_, message)| message))
        })
        .map(str::to_owned)
        .collect()
}

/// `conflict`'s message is one of the ui-test `case`'s.
fn assert_ui(case: &str, conflict: Conflict<&str>) {
    let messages = ui_messages(case);
    let expected = conflict.to_string();
    assert!(messages.contains(&expected), "{case}: {expected:?} is not among {messages:#?}");
}

/// The run-time and the compile-time check of `DECLARATIONS[n]` say
/// `conflict`, and the runtime's error is that conflict, typed.
fn assert_declaration(n: usize, conflict: Conflict<&str>) {
    assert_eq!(refused([registration(n)]), conflict.to_owned());
    let runtime = refusal([registration(n)]);
    let compile = declared(n);
    assert_eq!(runtime, compile, "the runtime and the compile-time check of {:?} differ", DECLARATIONS[n].name);
    assert_eq!(runtime, conflict.to_string());
}

/// `Hand::<n>`, for the `n` of a const generic known only at run time here.
fn hand(n: usize) -> Option<Registration> {
    macro_rules! hands {
        ($($n:literal)*) => {
            match n {
                $($n => Some(Registration::controller(Hand::<$n>)),)*
                _ => None,
            }
        };
    }
    hands!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16)
}

fn registration(n: usize) -> Registration {
    hand(n).expect("a declaration of the table")
}

#[test]
fn empty_name() {
    assert_declaration(0, Conflict::EmptyName);
    assert_ui("controller/fail/empty-name", Conflict::EmptyName);
}

#[test]
fn reserved_name() {
    assert_declaration(12, Conflict::ReservedName { name: "runtime" });
    let renamed = refusal([registration(READER).with_name("runtime")]);
    assert_eq!(renamed, Conflict::ReservedName { name: "runtime" }.to_string());
    assert_ui("controller/fail/reserved-name", Conflict::ReservedName { name: "runtime" });
}

#[test]
fn invalid_name() {
    let invalid = |name| Conflict::InvalidName { name, reason: NameRule::Whitespace };
    assert_declaration(13, invalid("two words"));
    assert_eq!(refusal([registration(READER).with_name(" reader")]), invalid(" reader").to_string());
    assert_ui("controller/fail/name-with-whitespace", invalid(" hostname"));
}

#[test]
fn duplicate_output() {
    assert_declaration(1, Conflict::DuplicateOutput { controller: "outputs-twice", r#type: Status::TYPE });
    assert_ui(
        "controller/fail/duplicate-output",
        Conflict::DuplicateOutput { controller: "reconcile_status", r#type: "Status" },
    );
}

#[test]
fn duplicate_input() {
    let twice = |controller| Conflict::DuplicateInput { controller, namespace: "default", r#type: Spec::TYPE };
    assert_declaration(2, twice("inputs-twice"));
    let given = Input::of::<Spec>(InputKind::Weak);
    let runtime =
        refusal([registration(READER).with_inputs([given.clone(), Input { dependency: InputKind::Strong, ..given }])]);
    assert_eq!(runtime, twice("reader").to_string());
    assert_ui(
        "controller/fail/duplicate-input",
        Conflict::DuplicateInput { controller: "reconcile_status", namespace: "", r#type: "Spec" },
    );
    // Two paths of one type: only the compile-time check of the declaration sees it.
    assert_ui(
        "controller/fail/same-type-two-paths",
        Conflict::DuplicateInput { controller: "reconcile_status", namespace: "default", r#type: "Specs.example.org" },
    );
}

#[test]
fn output_is_input() {
    let woken = Conflict::OutputIsInput { controller: "woken-by-itself", r#type: Status::TYPE, kind: InputKind::Weak };
    assert_declaration(3, woken);
    // Naming the namespace the output lives in changes nothing.
    let named =
        Conflict::OutputIsInput { controller: "woken-in-its-namespace", r#type: Status::TYPE, kind: InputKind::Weak };
    assert_declaration(14, named);
    assert_ui(
        "controller/fail/output-is-input-in-its-namespace",
        Conflict::OutputIsInput {
            controller: "reconcile_status",
            r#type: "Statuses.example.org",
            kind: InputKind::Weak,
        },
    );
    assert_ui(
        "controller/fail/output-is-input",
        Conflict::OutputIsInput { controller: "reconcile_status", r#type: "Status", kind: InputKind::Weak },
    );
}

#[test]
fn mixed_input_kinds() {
    let mixed = |controller, kind| Conflict::MixedInputKinds { controller, kind };
    assert_declaration(4, mixed("queue-with-weak", InputKind::Weak));
    assert_declaration(5, mixed("primary-without-queue", InputKind::Primary));
    // The inputs given at run time keep the rule of the declaration.
    let weak = Input::of::<Spec>(InputKind::Weak).in_namespace("other");
    assert_eq!(refusal([registration(QUEUE).with_inputs([weak])]), mixed("queue", InputKind::Weak).to_string());
    let primary = Input::of::<Spec>(InputKind::Primary);
    assert_eq!(refusal([registration(READER).with_inputs([primary])]), mixed("reader", InputKind::Primary).to_string());
    assert_ui("controller/fail/mixed-queue-kinds", mixed("Mixed", InputKind::Weak));
    assert_ui("controller/fail/queue-input-on-fn", mixed("reconcile_status", InputKind::Primary));
}

#[test]
fn invalid_queue() {
    let invalid = |controller, reason| Conflict::InvalidQueue { controller, reason };
    assert_declaration(6, invalid("no-concurrency", QueueRule::ZeroConcurrency));
    assert_declaration(7, invalid("concurrency-alone", QueueRule::ConcurrencyWithoutQueue));
    assert_declaration(8, invalid("mapped-only", QueueRule::NoPrimaryInput));
    assert_ui("controller/fail/concurrency-zero", invalid("Stalled", QueueRule::ZeroConcurrency));
    assert_ui(
        "controller/fail/concurrency-without-primary",
        invalid("reconcile_status", QueueRule::ConcurrencyWithoutQueue),
    );
    assert_ui("controller/fail/mapped-without-primary", invalid("MapsOnly", QueueRule::NoPrimaryInput));
}

#[test]
fn duplicate_name() {
    let runtime = refusal([registration(READER), registration(READER)]);
    let compile = compile_time(&[entry(READER), entry(READER)], &[]);
    assert_eq!(runtime, compile);
    assert_eq!(runtime, Conflict::DuplicateName { name: "reader" }.to_string());
    assert_ui("system/fail/duplicate-names", Conflict::DuplicateName { name: "status" });
}

#[test]
fn output_conflict() {
    let runtime = refusal([registration(READER), registration(WRITER)]);
    let compile = compile_time(&[entry(READER), entry(WRITER)], &[]);
    assert_eq!(runtime, compile);
    let conflict =
        |exclusive| Conflict::OutputConflict { first: "reader", second: "writer", exclusive, r#type: Status::TYPE };
    assert_eq!(runtime, conflict("reader").to_string());
    let exclusive_second = compile_time(&[entry(WRITER), entry(READER)], &[]);
    assert_eq!(exclusive_second, refusal([registration(WRITER), registration(READER)]));
    assert_eq!(
        exclusive_second,
        Conflict::OutputConflict { first: "writer", second: "reader", exclusive: "reader", r#type: Status::TYPE }
            .to_string()
    );
    let ui = |exclusive| Conflict::OutputConflict {
        first: "first",
        second: "second",
        exclusive,
        r#type: "Statuses.example.org",
    };
    assert_ui("system/fail/two-exclusive-writers", ui("first"));
    assert_ui("system/fail/exclusive-and-shared-writer", ui("second"));
}

#[test]
fn no_destroy_ready() {
    let missing =
        Conflict::NoDestroyReady { writer: "reader", reader: "finalizer", r#type: Status::TYPE, queue: false };
    // Whichever registers first, and at compile time alike.
    for order in [[READER, FINALIZER], [FINALIZER, READER]] {
        assert_eq!(refused(order.map(registration)), missing.to_owned());
        assert_eq!(compile_time(&order.map(entry), &[]), missing.to_string());
    }
    // A writer that reads its output destroy-ready is woken when the finalizers are gone.
    let runtime = Runtime::new(cosi::state::memory());
    runtime.register(registration(TIDY_READER)).expect("a writer that reads its output destroy-ready");
    runtime.register(registration(FINALIZER)).expect("may finalize what a tidy writer writes");
    assert_ui(
        "system/fail/no-destroy-ready",
        Conflict::NoDestroyReady {
            writer: "files",
            reader: "service",
            r#type: "FileStatuses.example.org",
            queue: false,
        },
    );
}

#[test]
fn undeclared_input() {
    let status = Input::of::<Status>(InputKind::Weak).in_namespace("other");
    let undeclared = Conflict::UndeclaredInput { controller: "reader", namespace: "other", r#type: Status::TYPE };
    assert_eq!(refusal([registration(READER).with_inputs([status])]), undeclared.to_string());
}

#[test]
fn invalid_input() {
    let empty_id = Input::of::<Spec>(InputKind::Weak).with_id("");
    let reason = Spec::pointer("").validate().expect_err("an empty ID");
    let invalid = Conflict::InvalidInput { controller: "reader", reason: &reason };
    assert_eq!(refusal([registration(READER).with_inputs([empty_id])]), invalid.to_string());
    let reason = Kind::new("my ns", "Specs.example.org").validate().expect_err("a namespace with a space");
    assert_ui(
        "controller/fail/namespace-with-whitespace",
        Conflict::InvalidInput { controller: "reconcile_status", reason: &reason },
    );
}
