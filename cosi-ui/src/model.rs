//! What the page shows, read from the state: the resource definitions, the
//! controller statuses, and resources rendered for a person.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use cosi::resource::{DynamicResource, Kind, Readable, Resource as _, ResourceDefinition, Sensitivity, Typed};
use cosi::runtime::ControllerStatus;
use cosi::state::{ListOptions, META_NAMESPACE, State};
use parking_lot::Mutex;
use serde::Serialize;
use serde_json::Value;

use crate::Ui;

/// The resource definitions the state publishes: every one, for the rule
/// that hides sensitive types, and one per type, for what the page draws.
#[derive(Debug, Default)]
pub(crate) struct Definitions {
    /// One definition per type: the one under the type's own ID, else the
    /// last by ID. For names, namespaces and columns only: whether the type
    /// is shown is [`Definitions::readable`]'s to say.
    pub(crate) by_type: BTreeMap<String, ResourceDefinition>,
    /// Every stored definition: its ID, and the type and sensitivity it
    /// names (`None` when it does not decode).
    said: Vec<(String, Option<(String, Sensitivity)>)>,
}

impl Definitions {
    /// The definition the page shows for `type`.
    pub(crate) fn get(&self, r#type: &str) -> Option<&ResourceDefinition> {
        self.by_type.get(r#type)
    }

    /// Whether `type` may be shown to a client that reads no sensitive
    /// type, from all its definitions (the rule the gRPC server applies to
    /// readers): one that says it is not sensitive does not outweigh
    /// another that says it is.
    pub(crate) fn readable(&self, r#type: &str) -> Readable {
        let said = self.said.iter().map(|(id, said)| (id.as_str(), said.as_ref().map(|(t, s)| (t.as_str(), *s))));
        cosi::resource::readable(r#type, said)
    }
}

/// What each stored definition says, by ID, kept while its spec stays the
/// same: the live page reads the definitions on every request and every
/// batch of its feeds, and decoding an encoded one (through a gRPC client)
/// is far dearer than comparing it with the one read before.
#[derive(Default)]
pub(crate) struct DefinitionCache {
    read: Mutex<HashMap<String, (DynamicResource, Option<ResourceDefinition>)>>,
}

impl DefinitionCache {
    /// What the definitions `stored` (all there are) say; only those not
    /// read before, or whose spec changed since, are decoded. Only the
    /// definitions stored now stay cached.
    fn read(&self, stored: &[DynamicResource]) -> Definitions {
        let mut cache = self.read.lock();
        let mut current = HashMap::with_capacity(stored.len());
        let mut definitions = Definitions::default();
        let mut own = Vec::new();
        for resource in stored {
            let decoded = match cache.remove(resource.id()) {
                Some((cached, decoded)) if cached.spec() == resource.spec() => decoded,
                _ => decode(resource),
            };
            let said = decoded.as_ref().map(|definition| (definition.r#type.clone(), definition.sensitivity));
            definitions.said.push((resource.id().to_owned(), said));
            match &decoded {
                Some(definition) if resource.id() == definition.id() => own.push(definition.clone()),
                Some(definition) => {
                    definitions.by_type.insert(definition.r#type.clone(), definition.clone());
                }
                None => (),
            }
            current.insert(resource.id().to_owned(), (resource.clone(), decoded));
        }
        *cache = current;
        drop(cache);
        // The definition under the type's own ID wins.
        for definition in own {
            definitions.by_type.insert(definition.r#type.clone(), definition);
        }
        definitions
    }
}

/// What a stored definition says; `None`, and a warning for the operator
/// (once per spec: [`DefinitionCache`] keeps what it read), when it does not decode.
fn decode(resource: &DynamicResource) -> Option<ResourceDefinition> {
    let decoded = cosi_grpc::definition_from_spec(resource.spec());
    if decoded.is_none() {
        let form = match resource.spec().as_encoded() {
            Some(encoded) if encoded.yaml.is_some() => "neither its YAML nor its protobuf form is",
            Some(_) => "its protobuf form is not",
            None => "its spec is not",
        };
        tracing::warn!(
            id = resource.id(),
            "the resource definition {} does not decode ({form} a resource definition): the page does not show \
             the type it defines, nor, if it is the type's own, the type",
            resource.id()
        );
    }
    decoded
}

/// The resource definitions the page's state publishes now.
pub(crate) async fn definitions(ui: &Ui) -> cosi::Result<Definitions> {
    let kind = Kind::new(META_NAMESPACE, ResourceDefinition::TYPE);
    let stored = ui.state.list_dynamic(&kind, &ListOptions::default()).await?;
    Ok(ui.definitions.read(&stored))
}

/// The controller statuses published in `namespace`, by controller name.
pub(crate) async fn statuses(state: &dyn State, namespace: &str) -> cosi::Result<BTreeMap<String, ControllerStatus>> {
    let kind = Kind::new(namespace, ControllerStatus::TYPE);
    let resources = state.list_dynamic(&kind, &ListOptions::default()).await?;
    Ok(resources.into_iter().filter_map(status).collect())
}

/// A controller status resource as its name and status; `None` for what does not decode.
pub(crate) fn status(resource: DynamicResource) -> Option<(String, ControllerStatus)> {
    let typed = Typed::<ControllerStatus>::try_from(resource).ok()?;
    Some((typed.id().to_owned(), ControllerStatus::clone(&typed)))
}

/// Every kind the page shows: each defined type in its default namespace,
/// and every namespace a controller reads a type from.
pub(crate) fn kinds(
    definitions: &Definitions,
    statuses: &BTreeMap<String, ControllerStatus>,
) -> BTreeSet<(String, String)> {
    let mut kinds: BTreeSet<(String, String)> = definitions
        .by_type
        .values()
        .map(|definition| (definition.default_namespace.clone(), definition.r#type.clone()))
        .collect();
    for status in statuses.values() {
        for input in &status.inputs {
            kinds.insert((input.namespace.clone(), input.r#type.clone()));
        }
    }
    kinds
}

/// A controller as the page shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ControllerView {
    pub(crate) name: String,
    /// `running`, `failing` (a retry is scheduled) or `stopped` (its task ended for good).
    pub(crate) state: &'static str,
    pub(crate) reconciles: u64,
    pub(crate) errors: u64,
    pub(crate) restarts: u64,
    /// Reconciles per second, lately.
    pub(crate) rate: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) last_error: Option<String>,
    /// When a failing controller is retried, in milliseconds since the Unix epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) next_retry_ms: Option<u64>,
    /// Polls that held their thread longer than the runtime's `long_poll`.
    pub(crate) long_polls: u64,
    /// The longest of those, in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) longest_poll_ms: Option<u64>,
}

impl ControllerView {
    pub(crate) fn new(name: &str, status: &ControllerStatus, rate: f64) -> Self {
        ControllerView {
            name: name.to_owned(),
            state: match (status.healthy, status.next_retry_ms) {
                (true, _) => "running",
                (false, Some(_)) => "failing",
                (false, None) => "stopped",
            },
            reconciles: status.reconciles,
            errors: status.errors,
            restarts: status.restarts,
            rate,
            last_error: status.last_error.clone(),
            next_retry_ms: status.next_retry_ms,
            long_polls: status.long_polls,
            longest_poll_ms: status.longest_poll_ms,
        }
    }
}

/// How many resources one kind holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct Count {
    pub(crate) namespace: String,
    #[serde(rename = "type")]
    pub(crate) r#type: String,
    pub(crate) count: usize,
}

/// One resource changed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct Change {
    pub(crate) namespace: String,
    #[serde(rename = "type")]
    pub(crate) r#type: String,
    pub(crate) id: String,
    pub(crate) version: String,
    /// `created`, `updated` or `destroyed`.
    pub(crate) change: &'static str,
}

/// The spec as a JSON value; `null` when it cannot be shown.
pub(crate) fn spec_value(resource: &DynamicResource) -> Value {
    crate::columns::spec(resource).unwrap_or(Value::Null)
}

/// The resource as YAML: its metadata and its spec, as `cosictl get -o yaml`
/// prints it; or why it cannot be rendered. A spec that cannot be shown is
/// no error: the document says why instead (`specError`).
pub(crate) fn yaml(resource: &DynamicResource) -> Result<String, String> {
    let mut document = serde_json::Map::new();
    let metadata = serde_json::to_value(resource.metadata()).map_err(|error| format!("its metadata: {error}"))?;
    document.insert("metadata".into(), metadata);
    crate::columns::insert_spec(&mut document, resource);
    serde_yaml_ng::to_string(&Value::Object(document)).map_err(|error| error.to_string())
}
