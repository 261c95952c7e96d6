//! The resource types of a simulated system.
//!
//! Resource types are Rust types, and the runtime's exclusive-output rule is
//! per type, so a random graph needs a pool of them: `Stage0s` to `Stage23s`
//! are the types an exclusive writer may own (one writer per type and
//! graph), `Shares` the type every shared writer writes (each in its own
//! namespace, so each (namespace, type) is a kind of its own), `Sources` the
//! type the simulated clients write, in several namespaces, and `Selectors`
//! the switches that make controllers call `update_inputs`. All have the same
//! spec: a value and a layer (what `Merge` orders by). Code generic over a
//! stage's type reaches it from the stage's index through [`visit_stage`].

use cosi::controller::InputDecl;
use cosi::prelude::*;

/// What every simulated spec holds.
pub trait SimSpec: Resource + Default {
    fn value(&self) -> u64;
    fn set(&mut self, value: u64, layer: i64);
}

/// A stage's type, and the one before it (what a transform to it reads).
pub trait Stage: SimSpec {
    type Previous: SimSpec;
}

/// Code generic over a stage's type, called with the type of an index (see [`visit_stage`]).
pub trait StageVisitor {
    type Output;
    fn visit<Out: Stage>(self) -> Self::Output;
}

macro_rules! sim_types {
    (
        clients { $($name:ident = $type:tt in $namespace:tt;)* }
        stages { $($stage:ident = $stage_type:tt in $stage_namespace:tt after $previous:ident;)* }
    ) => {
        $(sim_types!(@spec $name = $type in $namespace);)*
        $(
            sim_types!(@spec $stage = $stage_type in $stage_namespace);

            impl Stage for $stage {
                type Previous = $previous;
            }
        )*

        /// How many stage types there are: at most this many exclusive writers per graph.
        pub const STAGES: usize = [$(stringify!($stage)),*].len();

        /// Calls `visitor` with the type of stage `index`.
        ///
        /// # Panics
        ///
        /// If there is no such stage.
        pub fn visit_stage<V: StageVisitor>(index: usize, visitor: V) -> V::Output {
            let types = [$(stringify!($stage)),*];
            match types.get(index).copied() {
                $(Some(stringify!($stage)) => visitor.visit::<$stage>(),)*
                _ => panic!("no stage {index}: there are {STAGES}"),
            }
        }

        /// The value and layer of a resource of any simulated type; `None`
        /// for another type or a spec that does not decode.
        pub fn value_of(resource: &DynamicResource) -> Option<(u64, i64)> {
            let r#type = resource.metadata().r#type();
            $(
                if r#type == <$name as Resource>::TYPE {
                    let typed = Typed::<$name>::try_from(resource).ok()?;
                    return Some((typed.value, typed.layer));
                }
            )*
            $(
                if r#type == <$stage as Resource>::TYPE {
                    let typed = Typed::<$stage>::try_from(resource).ok()?;
                    return Some((typed.value, typed.layer));
                }
            )*
            None
        }

        /// Every simulated type as an input of a controller writing `Out`:
        /// `Sources` as `first`, `Out` as `own`, every other as `kind`. A
        /// declaration names each, so that a registration may give the
        /// controller any of them, in any namespace.
        pub const fn every_input<Out: Resource>(
            first: InputKind,
            kind: InputKind,
            own: InputKind,
        ) -> [InputDecl; [$(stringify!($name),)* $(stringify!($stage)),*].len()] {
            [
                $(input::<$name, Out>(if same($name::TYPE, Src::TYPE) { first } else { kind }, own),)*
                $(input::<$stage, Out>(kind, own),)*
            ]
        }
    };
    (@spec $name:ident = $type:tt in $namespace:tt) => {
        #[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
        #[resource(type = $type, namespace = $namespace)]
        pub struct $name {
            pub value: u64,
            pub layer: i64,
        }

        impl SimSpec for $name {
            fn value(&self) -> u64 {
                self.value
            }

            fn set(&mut self, value: u64, layer: i64) {
                self.value = value;
                self.layer = layer;
            }
        }
    };
}

sim_types! {
    clients {
        Src = "Sources.sim.cosi.dev" in "src";
        Sel = "Selectors.sim.cosi.dev" in "sel";
        Sh = "Shares.sim.cosi.dev" in "sh";
    }
    stages {
        Stage0 = "Stage0s.sim.cosi.dev" in "stage0" after Src;
        Stage1 = "Stage1s.sim.cosi.dev" in "stage1" after Stage0;
        Stage2 = "Stage2s.sim.cosi.dev" in "stage2" after Stage1;
        Stage3 = "Stage3s.sim.cosi.dev" in "stage3" after Stage2;
        Stage4 = "Stage4s.sim.cosi.dev" in "stage4" after Stage3;
        Stage5 = "Stage5s.sim.cosi.dev" in "stage5" after Stage4;
        Stage6 = "Stage6s.sim.cosi.dev" in "stage6" after Stage5;
        Stage7 = "Stage7s.sim.cosi.dev" in "stage7" after Stage6;
        Stage8 = "Stage8s.sim.cosi.dev" in "stage8" after Stage7;
        Stage9 = "Stage9s.sim.cosi.dev" in "stage9" after Stage8;
        Stage10 = "Stage10s.sim.cosi.dev" in "stage10" after Stage9;
        Stage11 = "Stage11s.sim.cosi.dev" in "stage11" after Stage10;
        Stage12 = "Stage12s.sim.cosi.dev" in "stage12" after Stage11;
        Stage13 = "Stage13s.sim.cosi.dev" in "stage13" after Stage12;
        Stage14 = "Stage14s.sim.cosi.dev" in "stage14" after Stage13;
        Stage15 = "Stage15s.sim.cosi.dev" in "stage15" after Stage14;
        Stage16 = "Stage16s.sim.cosi.dev" in "stage16" after Stage15;
        Stage17 = "Stage17s.sim.cosi.dev" in "stage17" after Stage16;
        Stage18 = "Stage18s.sim.cosi.dev" in "stage18" after Stage17;
        Stage19 = "Stage19s.sim.cosi.dev" in "stage19" after Stage18;
        Stage20 = "Stage20s.sim.cosi.dev" in "stage20" after Stage19;
        Stage21 = "Stage21s.sim.cosi.dev" in "stage21" after Stage20;
        Stage22 = "Stage22s.sim.cosi.dev" in "stage22" after Stage21;
        Stage23 = "Stage23s.sim.cosi.dev" in "stage23" after Stage22;
    }
}

/// The kind of stage `index` in its own namespace, where its one writer writes it.
pub fn stage_kind(index: usize) -> Kind {
    struct KindOf;
    impl StageVisitor for KindOf {
        type Output = Kind;
        fn visit<Out: Stage>(self) -> Kind {
            Out::kind()
        }
    }
    visit_stage(index, KindOf)
}

/// Whether two strings are equal, in a `const fn`.
pub const fn same(a: &str, b: &str) -> bool {
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

/// `T` as an input of `kind`, or of `own` when it is the output type `Out`.
const fn input<T: Resource, Out: Resource>(kind: InputKind, own: InputKind) -> InputDecl {
    match same(T::TYPE, Out::TYPE) {
        true => InputDecl::of::<T>(own),
        false => InputDecl::of::<T>(kind),
    }
}
