//! Conversions between `cosi` values and their wire form.
//!
//! Invariants:
//! - A spec that arrived encoded goes back out byte for byte: its protobuf
//!   bytes and YAML text are never re-encoded.
//! - A typed Rust spec travels as YAML (`yaml_spec`), the form Go clients show
//!   and the form `cosi` decodes typed reads from; the `meta` specs also carry
//!   their protobuf encoding, which Go clients decode them from.
//! - A spec with neither bytes nor text is the empty spec, so tombstones stay tombstones.
//! - Decoding untrusted messages never panics: every missing or malformed part
//!   is an [`Error::InvalidArgument`] naming the part.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cosi::resource::{
    DefinitionOptions, DynamicResource, EncodedSpec, IdQuery, Kind, LabelOp, LabelQuery, LabelTerm, Metadata, Phase,
    PrintColumn, ResourceDefinition, Sensitivity, Spec, Version,
};
use cosi::state::{Bookmark, Error, Event, Namespace, Result};
use prost::Message;

use crate::limits::{
    ID_QUERY_SIZE_LIMIT, MAX_ID_QUERY_LEN, MAX_LABEL_QUERIES, MAX_LABEL_QUERY_BYTES, MAX_LABEL_TERMS, MAX_LABEL_VALUES,
};
use crate::proto;

// ---- resources ---------------------------------------------------------------------------------

/// The wire form of a resource.
pub fn resource_to_proto(resource: &DynamicResource) -> Result<proto::Resource> {
    Ok(proto::Resource {
        metadata: Some(metadata_to_proto(resource.metadata())),
        spec: Some(spec_to_proto(&resource.spec())?),
    })
}

/// A resource from its wire form; `what` names it in errors ("resource", "old resource").
pub fn resource_from_proto(resource: Option<proto::Resource>, what: &str) -> Result<DynamicResource> {
    let resource = resource.ok_or_else(|| Error::invalid_argument(format!("the {what} is missing")))?;
    let metadata =
        resource.metadata.ok_or_else(|| Error::invalid_argument(format!("the metadata of the {what} is missing")))?;
    let spec = resource.spec.ok_or_else(|| Error::invalid_argument(format!("the spec of the {what} is missing")))?;
    Ok(resource_of(metadata_from_proto(metadata)?, spec))
}

fn metadata_to_proto(metadata: &Metadata) -> proto::Metadata {
    proto::Metadata {
        namespace: metadata.namespace().to_owned(),
        r#type: metadata.r#type().to_owned(),
        id: metadata.id().to_owned(),
        version: metadata.version().to_string(),
        owner: metadata.owner().unwrap_or_default().to_owned(),
        phase: metadata.phase().to_string(),
        created: Some(timestamp_to_proto(metadata.created())),
        updated: Some(timestamp_to_proto(metadata.updated())),
        finalizers: metadata.finalizers().iter().map(str::to_owned).collect(),
        labels: map_to_proto(metadata.labels().iter()),
        annotations: map_to_proto(metadata.annotations().iter()),
    }
}

fn map_to_proto<'a>(entries: impl Iterator<Item = (&'a str, &'a str)>) -> HashMap<String, String> {
    entries.map(|(key, value)| (key.to_owned(), value.to_owned())).collect()
}

fn metadata_from_proto(wire: proto::Metadata) -> Result<Metadata> {
    let mut metadata = Metadata::new(&wire.namespace, &wire.r#type, &wire.id);
    let version: Version = wire
        .version
        .parse()
        .map_err(|err| Error::invalid_argument(format!("invalid metadata of {}: {err}", metadata.pointer())))?;
    metadata.set_version(version);
    metadata.set_owner((!wire.owner.is_empty()).then_some(wire.owner));
    metadata.set_phase(parse_phase(&wire.phase)?);
    metadata.set_timestamps(timestamp_from_proto(wire.created), timestamp_from_proto(wire.updated));
    *metadata.labels_mut() = wire.labels.into_iter().collect();
    *metadata.annotations_mut() = wire.annotations.into_iter().collect();
    *metadata.finalizers_mut() = wire.finalizers.into_iter().collect();
    Ok(metadata)
}

/// A phase from its wire text; proto3's empty default reads as running.
pub fn parse_phase(text: &str) -> Result<Phase> {
    match text {
        "" => Ok(Phase::Running),
        text => text.parse().map_err(|err| Error::invalid_argument(format!("{err}"))),
    }
}

fn timestamp_to_proto(time: SystemTime) -> prost_types::Timestamp {
    let since_epoch = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    prost_types::Timestamp {
        seconds: i64::try_from(since_epoch.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(since_epoch.subsec_nanos()).unwrap_or(0),
    }
}

/// A timestamp from the wire; a missing or pre-1970 one reads as the epoch, as Go reads it.
fn timestamp_from_proto(timestamp: Option<prost_types::Timestamp>) -> SystemTime {
    let Some(timestamp) = timestamp else { return UNIX_EPOCH };
    let seconds = u64::try_from(timestamp.seconds).unwrap_or(0);
    let nanos = u32::try_from(timestamp.nanos).unwrap_or(0).min(999_999_999);
    UNIX_EPOCH.checked_add(Duration::new(seconds, nanos)).unwrap_or(UNIX_EPOCH)
}

// ---- specs -------------------------------------------------------------------------------------

/// The wire form of a spec (see the module invariants).
pub fn spec_to_proto(spec: &Spec) -> Result<proto::Spec> {
    if spec.is_empty() {
        return Ok(proto::Spec::default());
    }
    if let Some(encoded) = spec.as_encoded() {
        return Ok(proto::Spec {
            proto_spec: encoded.proto.clone(),
            yaml_spec: encoded.yaml.clone().unwrap_or_default(),
        });
    }
    let proto_spec = meta_spec_proto(spec);
    let yaml_spec = match spec.as_serialize() {
        Some(value) => serde_yaml_ng::to_string(value)
            .map_err(|err| Error::invalid_argument(format!("cannot encode the spec as YAML: {err}")))?,
        None => String::new(),
    };
    Ok(proto::Spec { proto_spec, yaml_spec })
}

/// The protobuf form of the specs Go clients decode from protobuf: the `meta` namespace's.
fn meta_spec_proto(spec: &Spec) -> Vec<u8> {
    if let Some(definition) = spec.downcast::<ResourceDefinition>() {
        return definition_to_proto(definition).encode_to_vec();
    }
    if let Some(namespace) = spec.downcast::<Namespace>() {
        return proto::meta::NamespaceSpec { description: namespace.description.clone() }.encode_to_vec();
    }
    Vec::new()
}

fn definition_to_proto(definition: &ResourceDefinition) -> proto::meta::ResourceDefinitionSpec {
    use proto::meta::resource_definition_spec::{PrintColumn as WireColumn, Sensitivity as WireSensitivity};
    proto::meta::ResourceDefinitionSpec {
        resource_type: definition.r#type.clone(),
        display_type: definition.display_type.clone(),
        default_namespace: definition.default_namespace.clone(),
        aliases: definition.aliases.clone(),
        all_aliases: definition.all_aliases.clone(),
        print_columns: definition
            .print_columns
            .iter()
            .map(|column| WireColumn { name: column.name.clone(), json_path: column.json_path.clone() })
            .collect(),
        sensitivity: match definition.sensitivity {
            Sensitivity::NonSensitive => WireSensitivity::NonSensitive,
            Sensitivity::Sensitive => WireSensitivity::Sensitive,
        }
        .into(),
    }
}

/// A resource definition from its spec, whatever its form: typed, or encoded
/// by any client, read from the YAML text when it decodes (within the bound
/// `cosi::resource::from_yaml` sets on aliases), else the protobuf bytes (Go
/// writes both; other writers may write one).
pub fn definition_from_spec(spec: Spec<'_>) -> Option<ResourceDefinition> {
    if let Some(definition) = spec.downcast::<ResourceDefinition>() {
        return Some(definition.clone());
    }
    let encoded = spec.as_encoded()?;
    if let Some(definition) = encoded.yaml.as_deref().and_then(|text| cosi::resource::from_yaml(text).ok()) {
        return Some(definition);
    }
    let wire = proto::meta::ResourceDefinitionSpec::decode(encoded.proto.as_slice()).ok()?;
    let sensitivity = match wire.sensitivity() {
        proto::meta::resource_definition_spec::Sensitivity::Sensitive => Sensitivity::Sensitive,
        proto::meta::resource_definition_spec::Sensitivity::NonSensitive => Sensitivity::NonSensitive,
    };
    let mut definition = ResourceDefinition::new(
        &wire.resource_type,
        &wire.default_namespace,
        DefinitionOptions { sensitivity, ..DefinitionOptions::default() },
    )
    .ok()?;
    definition.display_type = wire.display_type;
    definition.aliases = wire.aliases;
    definition.all_aliases = wire.all_aliases;
    definition.print_columns = wire
        .print_columns
        .into_iter()
        .map(|column| PrintColumn { name: column.name, json_path: column.json_path })
        .collect();
    Some(definition)
}

/// A resource of `metadata` and a spec in its wire form, kept encoded.
fn resource_of(metadata: Metadata, spec: proto::Spec) -> DynamicResource {
    match (spec.proto_spec.is_empty(), spec.yaml_spec.is_empty()) {
        (true, true) => DynamicResource::without_spec(metadata),
        _ => DynamicResource::encoded(
            metadata,
            EncodedSpec { proto: spec.proto_spec, yaml: (!spec.yaml_spec.is_empty()).then_some(spec.yaml_spec) },
        ),
    }
}

// ---- queries -----------------------------------------------------------------------------------

/// The wire form of label queries.
pub fn label_queries_to_proto(queries: &[LabelQuery]) -> Vec<proto::LabelQuery> {
    queries.iter().map(|query| proto::LabelQuery { terms: query.terms.iter().map(term_to_proto).collect() }).collect()
}

fn term_to_proto(term: &LabelTerm) -> proto::LabelTerm {
    use proto::label_term::Operation;
    let op = match term.op {
        LabelOp::Exists => Operation::Exists,
        LabelOp::Equal => Operation::Equal,
        LabelOp::In => Operation::In,
        LabelOp::Lt => Operation::Lt,
        LabelOp::Lte => Operation::Lte,
        LabelOp::LtNumeric => Operation::LtNumeric,
        LabelOp::LteNumeric => Operation::LteNumeric,
    };
    proto::LabelTerm { key: term.key.clone(), op: op.into(), value: term.values.clone(), invert: term.invert }
}

/// Why a query from the wire cannot be used.
#[derive(Debug)]
pub enum QueryError {
    /// An operator this side does not know (gRPC `UNIMPLEMENTED`, as Go answers).
    UnknownOperator(i32),
    /// A malformed term or regular expression (gRPC `INVALID_ARGUMENT`).
    Invalid(Error),
}

/// Label queries from the wire, validated and within the server's bounds
/// (see `limits.rs`): a query is kept for the life of a watch and run against
/// every event, so its size is the client's to choose only up to a point.
pub fn label_queries_from_proto(queries: Vec<proto::LabelQuery>) -> Result<Vec<LabelQuery>, QueryError> {
    check_label_query_size(&queries).map_err(|reason| QueryError::Invalid(Error::invalid_argument(reason)))?;
    queries
        .into_iter()
        .map(|query| {
            let mut out = LabelQuery::new();
            for term in query.terms {
                out = out.term(term_from_proto(term)?);
            }
            out.validate().map_err(QueryError::Invalid)?;
            Ok(out)
        })
        .collect()
}

fn check_label_query_size(queries: &[proto::LabelQuery]) -> std::result::Result<(), String> {
    if queries.len() > MAX_LABEL_QUERIES {
        return Err(format!("{} label queries, over the limit of {MAX_LABEL_QUERIES}", queries.len()));
    }
    let mut bytes = 0usize;
    for (index, query) in queries.iter().enumerate() {
        if query.terms.len() > MAX_LABEL_TERMS {
            return Err(format!(
                "label query {index} has {} terms, over the limit of {MAX_LABEL_TERMS}",
                query.terms.len()
            ));
        }
        for term in &query.terms {
            if term.value.len() > MAX_LABEL_VALUES {
                return Err(format!(
                    "a term of label query {index} has {} values, over the limit of {MAX_LABEL_VALUES}",
                    term.value.len()
                ));
            }
            bytes = bytes.saturating_add(term.key.len()).saturating_add(term.value.iter().map(String::len).sum());
        }
    }
    match bytes > MAX_LABEL_QUERY_BYTES {
        true => Err(format!("the label queries carry {bytes} bytes, over the limit of {MAX_LABEL_QUERY_BYTES}")),
        false => Ok(()),
    }
}

fn term_from_proto(term: proto::LabelTerm) -> Result<LabelTerm, QueryError> {
    use proto::label_term::Operation;
    let operation = Operation::try_from(term.op).map_err(|_| QueryError::UnknownOperator(term.op))?;
    let (op, invert) = match operation {
        Operation::Exists => (LabelOp::Exists, term.invert),
        Operation::Equal => (LabelOp::Equal, term.invert),
        // The deprecated operator is an inverted EXISTS whatever `invert` says, as Go reads it.
        #[allow(deprecated)]
        Operation::NotExists => (LabelOp::Exists, true),
        Operation::In => (LabelOp::In, term.invert),
        Operation::Lt => (LabelOp::Lt, term.invert),
        Operation::Lte => (LabelOp::Lte, term.invert),
        Operation::LtNumeric => (LabelOp::LtNumeric, term.invert),
        Operation::LteNumeric => (LabelOp::LteNumeric, term.invert),
    };
    Ok(LabelTerm { key: term.key, values: term.value, op, invert })
}

/// An ID query from the wire; an empty pattern selects everything. The
/// pattern's length and compiled size are bounded (see `limits.rs`).
pub fn id_query_from_proto(query: Option<proto::IdQuery>) -> Result<Option<IdQuery>, QueryError> {
    match query {
        Some(query) if query.regexp.len() > MAX_ID_QUERY_LEN => Err(QueryError::Invalid(Error::invalid_argument(
            format!("the ID query is {} bytes long, over the limit of {MAX_ID_QUERY_LEN}", query.regexp.len()),
        ))),
        Some(query) if !query.regexp.is_empty() => {
            IdQuery::with_size_limit(&query.regexp, ID_QUERY_SIZE_LIMIT).map(Some).map_err(QueryError::Invalid)
        }
        _ => Ok(None),
    }
}

/// The wire form of an ID query.
pub fn id_query_to_proto(query: Option<&IdQuery>) -> Option<proto::IdQuery> {
    query.map(|query| proto::IdQuery { regexp: query.as_str().to_owned() })
}

// ---- events ------------------------------------------------------------------------------------

/// The wire form of an event; `None` for events an old client (api_version 0) does not know.
pub fn event_to_proto(event: &Event, api_version: i32) -> Result<Option<proto::Event>> {
    use proto::EventType as Wire;
    let wire = match event {
        Event::Created { resource, bookmark } => proto::Event {
            resource: Some(resource_to_proto(resource)?),
            event_type: Wire::Created.into(),
            bookmark: wire_bookmark(bookmark.as_ref()),
            ..proto::Event::default()
        },
        Event::Updated { resource, old, bookmark } => proto::Event {
            resource: Some(resource_to_proto(resource)?),
            old: Some(resource_to_proto(old)?),
            event_type: Wire::Updated.into(),
            bookmark: wire_bookmark(bookmark.as_ref()),
            ..proto::Event::default()
        },
        Event::Destroyed { pointer, resource, bookmark } => proto::Event {
            resource: Some(match resource {
                Some(resource) => resource_to_proto(resource)?,
                None => resource_to_proto(&DynamicResource::tombstone(pointer))?,
            }),
            event_type: Wire::Destroyed.into(),
            bookmark: wire_bookmark(bookmark.as_ref()),
            ..proto::Event::default()
        },
        Event::Noop { kind, bookmark } => proto::Event {
            resource: Some(kind_marker(kind)?),
            event_type: Wire::Noop.into(),
            bookmark: wire_bookmark(bookmark.as_ref()),
            ..proto::Event::default()
        },
        Event::Bootstrapped { .. } | Event::Errored { .. } if api_version < 1 => return Ok(None),
        Event::Bootstrapped { kind, bookmark } => proto::Event {
            resource: Some(kind_marker(kind)?),
            event_type: Wire::Bootstrapped.into(),
            bookmark: wire_bookmark(bookmark.as_ref()),
            ..proto::Event::default()
        },
        Event::Errored { error } => proto::Event {
            event_type: Wire::Errored.into(),
            error: Some(crate::status::public_message(error)),
            ..proto::Event::default()
        },
    };
    Ok(Some(wire))
}

/// What Go COSI puts in Bootstrapped and Noop events, and its clients read the
/// watched namespace and type from: a tombstone with an empty ID.
fn kind_marker(kind: &Kind) -> Result<proto::Resource> {
    resource_to_proto(&DynamicResource::tombstone(&kind.pointer("")))
}

fn wire_bookmark(bookmark: Option<&Bookmark>) -> Option<Vec<u8>> {
    bookmark.map(|bookmark| bookmark.as_bytes().to_vec())
}

/// An event from the wire, on a watch of `kind`.
pub fn event_from_proto(event: proto::Event, kind: &Kind) -> Result<Event> {
    use proto::EventType as Wire;
    let bookmark = event.bookmark.map(Bookmark::from_bytes);
    let event_type = Wire::try_from(event.event_type)
        .map_err(|_| Error::invalid_argument(format!("unknown watch event type {}", event.event_type)))?;
    Ok(match event_type {
        Wire::Created => Event::Created { resource: resource_from_proto(event.resource, "resource")?, bookmark },
        Wire::Updated => Event::Updated {
            resource: resource_from_proto(event.resource, "resource")?,
            old: resource_from_proto(event.old, "old resource")?,
            bookmark,
        },
        Wire::Destroyed => {
            let resource = resource_from_proto(event.resource, "resource")?;
            match resource.is_tombstone() {
                true => Event::Destroyed { pointer: resource.metadata().pointer().clone(), resource: None, bookmark },
                false => Event::destroyed(resource, bookmark),
            }
        }
        Wire::Bootstrapped => Event::Bootstrapped { kind: kind.clone(), bookmark },
        Wire::Noop => Event::Noop { kind: kind.clone(), bookmark },
        Wire::Errored => {
            Event::Errored { error: crate::status::remote_watch_error(event.error.unwrap_or_default(), kind) }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_round_trips() {
        let mut metadata = Metadata::new("ns", "Things.test.cosi.dev", "a/b c");
        metadata.set_version(Version::new(7));
        metadata.set_owner(Some("ctrl"));
        metadata.set_phase(Phase::TearingDown);
        metadata
            .set_timestamps(UNIX_EPOCH + Duration::new(1_700_000_000, 5), UNIX_EPOCH + Duration::new(1_700_000_001, 6));
        metadata.labels_mut().set("k", "");
        metadata.annotations_mut().set("note", "x");
        metadata.finalizers_mut().add("f");
        let back = metadata_from_proto(metadata_to_proto(&metadata)).expect("decodes");
        assert_eq!(back, metadata);
        assert_eq!((back.created(), back.updated()), (metadata.created(), metadata.updated()));
    }

    #[test]
    fn tombstones_stay_tombstones() {
        let tombstone = DynamicResource::tombstone(&Kind::new("ns", "Things.test.cosi.dev").pointer("x"));
        let back =
            resource_from_proto(Some(resource_to_proto(&tombstone).expect("encodes")), "resource").expect("decodes");
        assert!(back.is_tombstone());
    }

    #[test]
    fn a_definition_whose_aliases_expand_too_far_is_not_decoded_from_its_yaml() {
        let columns = "printColumns: [{name: a, jsonPath: '{.a}'}]\n";
        let head = format!("type: Things.test.cosi.dev\ndisplayType: Thing\ndefaultNamespace: ns\n{columns}");
        let definition = |yaml: String| {
            let metadata = Metadata::new("meta", "ResourceDefinitions.meta.cosi.dev", "things.test.cosi.dev");
            definition_from_spec(
                DynamicResource::encoded(metadata, EncodedSpec { proto: vec![], yaml: Some(yaml) }).spec(),
            )
        };
        // 50 KB of text for 100 MB of aliases.
        let bomb = format!("{head}note: &a {}\naliases: [{}]\n", "x".repeat(10_000), ["*a"; 10_000].join(","));
        assert_eq!(definition(bomb), None);

        let legitimate = definition(format!("{head}aliases: [&t thing]\nallAliases: [*t]\n")).expect("decodes");
        assert_eq!((legitimate.aliases, legitimate.all_aliases), (vec!["thing".to_owned()], vec!["thing".to_owned()]));
        assert_eq!(legitimate.print_columns.len(), 1);
    }

    #[test]
    fn label_terms_round_trip_and_not_exists_is_inverted_exists() {
        let query = LabelQuery::new().exists("a").not_in("b", ["x", "y"]).lte_numeric("c", "2Gi");
        let back = label_queries_from_proto(label_queries_to_proto(std::slice::from_ref(&query))).expect("decodes");
        assert_eq!(back, [query]);
        #[allow(deprecated)]
        let op = proto::label_term::Operation::NotExists;
        let wire = proto::LabelQuery {
            terms: vec![proto::LabelTerm { key: "a".into(), op: op.into(), value: vec![], invert: false }],
        };
        let back = label_queries_from_proto(vec![wire]).expect("decodes");
        assert_eq!(back, [LabelQuery::new().not_exists("a")]);
    }
}
