//! `cosictl get`: alias resolution, reads and watches.

use std::io::Write;

use clap::{Args, ValueEnum};
use cosi::resource::{Kind, Resource as _, ResourceDefinition};
use cosi::state::{Event, ListOptions, META_NAMESPACE, State, WatchKindOptions, WatchOptions};
use cosi_grpc::Client;

use crate::output::{Printer, Row};
use crate::{CliError, ConnectArgs};

/// The output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Columns: namespace, type, ID, version and the type's print columns.
    Table,
    /// One YAML document per resource: metadata and spec.
    Yaml,
    /// One JSON object per line: metadata and spec.
    Json,
}

#[derive(Args)]
pub struct GetArgs {
    /// The resource type, or any of its aliases (see `cosictl get rd`).
    r#type: String,
    /// One resource's ID; all resources of the type without it.
    id: Option<String>,
    /// The namespace; the type's default namespace without it.
    #[arg(long, short = 'n')]
    namespace: Option<String>,
    /// The output format.
    #[arg(long, short = 'o', value_enum, default_value = "table")]
    output: Format,
    /// Goes on printing changes after the current state.
    #[arg(long, short = 'w')]
    watch: bool,
}

pub async fn run(args: GetArgs, connect: &ConnectArgs) -> Result<(), CliError> {
    let client = connect.connect().await?;
    let definition = resolve(&client, &args.r#type).await?;
    let namespace = args.namespace.clone().unwrap_or_else(|| definition.default_namespace.clone());
    let kind = Kind::new(&namespace, &definition.r#type);
    let mut printer = Printer::new(args.output, &definition, args.watch);
    if args.watch && args.id.is_none() {
        // The kind's current state comes first, up to `Bootstrapped`: one table.
        printer = printer.hold();
    }
    let mut out = std::io::stdout().lock();

    if !args.watch {
        let resources = match &args.id {
            Some(id) => vec![client.get_dynamic(&kind.pointer(id)).await?],
            None => client.list_dynamic(&kind, &ListOptions::default()).await?,
        };
        for resource in &resources {
            printer.row(&mut out, Row { event: None, resource })?;
        }
        return printer.finish(&mut out);
    }

    let mut watch = match &args.id {
        Some(id) => client.watch_dynamic(&kind.pointer(id), WatchOptions::default()).await?,
        None => client.watch_kind_dynamic(&kind, WatchKindOptions::bootstrap()).await?,
    };
    while let Some(event) = watch.recv().await {
        let label = match &event {
            Event::Created { .. } => "+",
            Event::Updated { .. } => "*",
            Event::Destroyed { .. } => "-",
            Event::Bootstrapped { .. } => {
                printer.release(&mut out)?;
                out.flush().map_err(|err| CliError::Output(err.to_string()))?;
                continue;
            }
            Event::Noop { .. } => continue,
            Event::Errored { error } => return Err(CliError::State(error.clone())),
        };
        // The initial event of an absent resource has none: nothing to show.
        if let Some(resource) = event.resource() {
            printer.row(&mut out, Row { event: Some(label), resource })?;
            out.flush().map_err(|err| CliError::Output(err.to_string()))?;
        }
    }
    printer.finish(&mut out)
}

/// The definition whose type or alias is `name`, as `talosctl get` resolves it:
/// the exact type first, then case-insensitive aliases; more than one match is an error.
pub async fn resolve(client: &Client, name: &str) -> Result<ResourceDefinition, CliError> {
    let kind = Kind::new(META_NAMESPACE, ResourceDefinition::TYPE);
    let definitions: Vec<ResourceDefinition> = client
        .list_dynamic(&kind, &ListOptions::default())
        .await?
        .iter()
        .filter_map(|resource| cosi_grpc::definition_from_spec(resource.spec()))
        .collect();
    if let Some(definition) = definitions.iter().find(|definition| definition.r#type == name) {
        return Ok(definition.clone());
    }
    let wanted = name.to_lowercase();
    let matches: Vec<&ResourceDefinition> = definitions
        .iter()
        .filter(|definition| {
            definition.r#type.to_lowercase() == wanted
                || definition.all_aliases.iter().any(|alias| alias.to_lowercase() == wanted)
        })
        .collect();
    match matches.as_slice() {
        [definition] => Ok((*definition).clone()),
        [] => Err(CliError::Usage(format!(
            "unknown resource type {name:?}: no resource definition has it as its type or an alias (see `cosictl get rd`)"
        ))),
        several => {
            let mut candidates: Vec<&str> = several.iter().map(|definition| definition.r#type.as_str()).collect();
            candidates.sort_unstable();
            Err(CliError::Usage(format!(
                "resource type {name:?} is ambiguous: it matches {}; use the full type",
                candidates.join(", ")
            )))
        }
    }
}
