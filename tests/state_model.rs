//! Model-based property test of the in-memory state: random sequences of writes
//! are applied both to the state and to a plain model of COSI's rules; every
//! result, the stored resources after every step, and what a kind watch saw
//! must agree with the model.

use std::collections::{BTreeMap, BTreeSet};

use cosi::prelude::*;
use cosi::state::MemoryState;
use proptest::prelude::*;

#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "ModelSpecs.test.cosi.dev", namespace = "model")]
struct ModelSpec {
    value: u8,
}

const IDS: [&str; 3] = ["a", "b", "c"];
const OWNERS: [Option<&str>; 3] = [None, Some("x"), Some("y")];
const FINALIZERS: [&str; 2] = ["f1", "f2"];

#[derive(Clone, Debug)]
enum Op {
    Create { id: usize, owner: usize },
    Update { id: usize, owner: usize, version_offset: i8, expected_phase: Option<Phase>, value: u8 },
    Destroy { id: usize, owner: usize },
    Teardown { id: usize, owner: usize },
    AddFinalizer { id: usize, finalizer: usize },
    RemoveFinalizer { id: usize, finalizer: usize },
}

fn op() -> impl Strategy<Value = Op> {
    let id = 0..IDS.len();
    let owner = 0..OWNERS.len();
    let finalizer = 0..FINALIZERS.len();
    let phase = prop_oneof![Just(None), Just(Some(Phase::Running)), Just(Some(Phase::TearingDown))];
    prop_oneof![
        (id.clone(), owner.clone()).prop_map(|(id, owner)| Op::Create { id, owner }),
        (id.clone(), owner.clone(), -1i8..=1, phase, any::<u8>()).prop_map(
            |(id, owner, version_offset, expected_phase, value)| Op::Update {
                id,
                owner,
                version_offset,
                expected_phase,
                value
            }
        ),
        (id.clone(), owner.clone()).prop_map(|(id, owner)| Op::Destroy { id, owner }),
        (id.clone(), owner).prop_map(|(id, owner)| Op::Teardown { id, owner }),
        (id.clone(), finalizer.clone()).prop_map(|(id, finalizer)| Op::AddFinalizer { id, finalizer }),
        (id, finalizer).prop_map(|(id, finalizer)| Op::RemoveFinalizer { id, finalizer }),
    ]
}

/// A stored resource as the model sees it.
#[derive(Clone, Debug, PartialEq)]
struct Model {
    version: u64,
    owner: Option<String>,
    phase: Phase,
    finalizers: BTreeSet<String>,
    value: u8,
}

impl Model {
    fn of(resource: &DynamicResource) -> Model {
        let metadata = resource.metadata();
        Model {
            version: metadata.version().get().expect("a stored resource has a version"),
            owner: metadata.owner().map(str::to_owned),
            phase: metadata.phase(),
            finalizers: metadata.finalizers().iter().map(str::to_owned).collect(),
            value: resource.spec().downcast::<ModelSpec>().expect("a ModelSpec").value,
        }
    }
}

/// The outcome class of an operation.
#[derive(Debug, PartialEq)]
enum Outcome {
    Ok,
    NotFound,
    AlreadyExists,
    OwnerConflict,
    VersionConflict,
    PhaseConflict,
    PendingFinalizers,
}

fn outcome<T>(result: &cosi::Result<T>) -> Outcome {
    match result {
        Ok(_) => Outcome::Ok,
        Err(cosi::Error::NotFound(_)) => Outcome::NotFound,
        Err(cosi::Error::AlreadyExists(_)) => Outcome::AlreadyExists,
        Err(cosi::Error::OwnerConflict { .. }) => Outcome::OwnerConflict,
        Err(cosi::Error::VersionConflict { .. }) => Outcome::VersionConflict,
        Err(cosi::Error::PhaseConflict { .. }) => Outcome::PhaseConflict,
        Err(cosi::Error::PendingFinalizers { .. }) => Outcome::PendingFinalizers,
        Err(other) => panic!("unexpected error {other:?}"),
    }
}

/// Applies `op` to the model; returns the outcome COSI's rules prescribe.
fn apply(model: &mut BTreeMap<&'static str, Model>, op: &Op) -> Outcome {
    let owner_of = |owner: usize| OWNERS[owner].map(str::to_owned);
    match *op {
        Op::Create { id, owner } => {
            if model.contains_key(IDS[id]) {
                return Outcome::AlreadyExists;
            }
            let created = Model {
                version: 1,
                owner: owner_of(owner),
                phase: Phase::Running,
                finalizers: BTreeSet::new(),
                value: 0,
            };
            model.insert(IDS[id], created);
            Outcome::Ok
        }
        Op::Update { id, owner, version_offset, expected_phase, value } => {
            let Some(stored) = model.get_mut(IDS[id]) else { return Outcome::NotFound };
            if stored.owner != owner_of(owner) {
                return Outcome::OwnerConflict;
            }
            if version_offset != 0 {
                return Outcome::VersionConflict;
            }
            if expected_phase.is_some_and(|phase| phase != stored.phase) {
                return Outcome::PhaseConflict;
            }
            stored.version += 1;
            stored.value = value;
            Outcome::Ok
        }
        Op::Destroy { id, owner } => {
            let Some(stored) = model.get(IDS[id]) else { return Outcome::NotFound };
            if stored.owner != owner_of(owner) {
                return Outcome::OwnerConflict;
            }
            if !stored.finalizers.is_empty() {
                return Outcome::PendingFinalizers;
            }
            model.remove(IDS[id]);
            Outcome::Ok
        }
        Op::Teardown { id, owner } => {
            let Some(stored) = model.get_mut(IDS[id]) else { return Outcome::NotFound };
            // Torn down already: nothing to write, no owner to check.
            if stored.phase == Phase::TearingDown {
                return Outcome::Ok;
            }
            if stored.owner != owner_of(owner) {
                return Outcome::OwnerConflict;
            }
            stored.phase = Phase::TearingDown;
            stored.version += 1;
            Outcome::Ok
        }
        Op::AddFinalizer { id, finalizer } | Op::RemoveFinalizer { id, finalizer } => {
            let Some(stored) = model.get_mut(IDS[id]) else { return Outcome::NotFound };
            let name = FINALIZERS[finalizer].to_owned();
            let changed = match op {
                Op::AddFinalizer { .. } => stored.finalizers.insert(name),
                _ => stored.finalizers.remove(&name),
            };
            if changed {
                stored.version += 1;
            }
            Outcome::Ok
        }
    }
}

async fn run(state: &MemoryState, op: &Op) -> Outcome {
    let owner_of = |owner: usize| OWNERS[owner].map(str::to_owned);
    let pointer = |id: usize| ModelSpec::pointer(IDS[id]);
    match *op {
        Op::Create { id, owner } => {
            let resource = Typed::new(IDS[id], ModelSpec::default());
            outcome(&state.create_dynamic(resource.into(), CreateOptions { owner: owner_of(owner) }).await)
        }
        Op::Update { id, owner, version_offset, expected_phase, value } => {
            // Base the update on what is stored (when anything is), at a version off by `version_offset`.
            let mut metadata = match state.get_dynamic(&pointer(id)).await {
                Ok(stored) => stored.metadata().clone(),
                Err(_) => Typed::new(IDS[id], ModelSpec::default()).metadata().clone(),
            };
            let version = metadata.version().get().unwrap_or(1);
            metadata.set_version(Version::new(version.saturating_add_signed(version_offset.into())));
            let resource = DynamicResource::new(metadata, ModelSpec { value });
            let options = UpdateOptions { owner: owner_of(owner), expected_phase };
            outcome(&state.update_dynamic(resource, options).await)
        }
        Op::Destroy { id, owner } => {
            outcome(&state.destroy_dynamic(&pointer(id), DestroyOptions { owner: owner_of(owner) }).await)
        }
        Op::Teardown { id, owner } => {
            outcome(&state.teardown_dynamic(&pointer(id), TeardownOptions { owner: owner_of(owner) }).await)
        }
        Op::AddFinalizer { id, finalizer } => {
            outcome(&state.add_finalizers_dynamic(&pointer(id), &[FINALIZERS[finalizer]]).await)
        }
        Op::RemoveFinalizer { id, finalizer } => {
            outcome(&state.remove_finalizers_dynamic(&pointer(id), &[FINALIZERS[finalizer]]).await)
        }
    }
}

async fn stored(state: &MemoryState) -> BTreeMap<String, Model> {
    let listed = state.list_dynamic(&ModelSpec::kind(), &ListOptions::default()).await.expect("list");
    listed.iter().map(|resource| (resource.id().to_owned(), Model::of(resource))).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_state_follows_the_model_and_its_watch_replays_it(ops in prop::collection::vec(op(), 1..60)) {
        let runtime = tokio::runtime::Builder::new_current_thread().build().expect("a tokio runtime");
        runtime.block_on(async {
            let state = MemoryState::default();
            let mut watch = state.watch_kind_dynamic(&ModelSpec::kind(), WatchKindOptions::bootstrap()).await.expect("watch");
            let mut model = BTreeMap::new();

            for (step, op) in ops.iter().enumerate() {
                let expected = apply(&mut model, op);
                let actual = run(&state, op).await;
                prop_assert_eq!(&actual, &expected, "step {} {:?}", step, op);
                let expected_state: BTreeMap<String, Model> =
                    model.iter().map(|(id, resource)| ((*id).to_owned(), resource.clone())).collect();
                prop_assert_eq!(stored(&state).await, expected_state, "after step {} {:?}", step, op);
            }

            // Replaying the watch must rebuild exactly what is stored, version by version.
            let mut mirror: BTreeMap<String, Model> = BTreeMap::new();
            let mut last_version: BTreeMap<String, u64> = BTreeMap::new();
            let final_state = stored(&state).await;
            let sentinel = Typed::new("zz-end", ModelSpec::default());
            state.create_dynamic(sentinel.into(), CreateOptions::default()).await.expect("create the sentinel");
            while let Some(event) = watch.recv().await {
                match &event {
                    Event::Created { resource, .. } | Event::Updated { resource, .. } => {
                        if resource.id() == "zz-end" {
                            break;
                        }
                        let version = resource.metadata().version().get().expect("a version");
                        let previous = last_version.insert(resource.id().to_owned(), version);
                        prop_assert!(previous.is_none_or(|previous| previous < version), "versions go up: {:?}", event);
                        mirror.insert(resource.id().to_owned(), Model::of(resource));
                    }
                    Event::Destroyed { pointer, .. } => {
                        last_version.remove(pointer.id());
                        mirror.remove(pointer.id());
                    }
                    Event::Bootstrapped { .. } => {}
                    other => prop_assert!(false, "unexpected event {:?}", other),
                }
            }
            prop_assert_eq!(mirror, final_state);
            Ok(())
        })?;
    }
}
