//! Resource definitions: how a resource type presents itself to clients.

use serde::{Deserialize, Serialize};

use crate::resource::naming;
use crate::state::Error;

/// The definition of a resource type, published in the `meta` namespace.
///
/// `#[derive(Resource)]` computes it at compile time; [`ResourceDefinition::new`]
/// computes the same at run time for types defined by data.
#[derive(cosi::Resource, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[resource(
    type = "ResourceDefinitions.meta.cosi.dev",
    namespace = "meta",
    aliases = ["api-resources"],
    print_columns(name = "Aliases", json_path = "{.aliases[:]}"),
)]
#[serde(rename_all = "camelCase")]
pub struct ResourceDefinition {
    /// The type, for example `HostnameStatuses.net.example.org`.
    #[serde(rename = "type")]
    pub r#type: String,
    /// The singular name, for example `HostnameStatus`.
    pub display_type: String,
    /// The namespace resources of this type live in by default.
    pub default_namespace: String,
    /// The short aliases: explicit ones, then the derived ones.
    #[serde(default)]
    pub aliases: Vec<String>,
    /// Every name that resolves to this type: the plural, its dotted prefixes and `aliases`.
    #[serde(default)]
    pub all_aliases: Vec<String>,
    /// Extra columns for table output.
    #[serde(default)]
    pub print_columns: Vec<PrintColumn>,
    /// Whether resources of this type hold secrets.
    #[serde(default)]
    pub sensitivity: Sensitivity,
}

/// A column of table output: a header and a JSONPath into the spec.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PrintColumn {
    /// The column header.
    pub name: String,
    /// The JSONPath template, for example `{.hostname}`.
    pub json_path: String,
}

/// Whether resources of a type hold secrets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Sensitivity {
    /// Visible to every reader.
    #[default]
    NonSensitive,
    /// Hidden from read-only clients.
    Sensitive,
}

/// What a definition built at run time says beyond its type and namespace:
/// the keys of `#[resource(...)]` as data.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DefinitionOptions {
    /// Explicit aliases, listed before the derived ones.
    pub aliases: Vec<String>,
    /// Derive no alias: both alias lists are exactly `aliases`.
    pub skip_automatic_aliases: bool,
    /// Extra columns for table output.
    pub print_columns: Vec<PrintColumn>,
    /// Whether resources of this type hold secrets.
    pub sensitivity: Sensitivity,
}

impl ResourceDefinition {
    /// The definition of `type`, with derived display type and aliases, as
    /// `#[derive(Resource)]` computes it at compile time.
    ///
    /// Fails with an invalid argument error when the type breaks COSI's naming
    /// rules (plural CamelCase name, dotted lowercase suffix), the namespace is
    /// not one a state accepts, or an alias is empty, not lowercase, or given twice.
    ///
    /// ```
    /// use cosi::resource::{DefinitionOptions, ResourceDefinition};
    ///
    /// let options = DefinitionOptions { aliases: vec!["hostname".into()], ..DefinitionOptions::default() };
    /// let definition = ResourceDefinition::new("HostnameStatuses.net.example.org", "network", options)?;
    /// assert_eq!(definition.display_type, "HostnameStatus");
    /// assert_eq!(definition.aliases, ["hostname", "hostnamestatus", "hs"]);
    /// # Ok::<(), cosi::Error>(())
    /// ```
    pub fn new(r#type: &str, default_namespace: &str, options: DefinitionOptions) -> Result<Self, Error> {
        let invalid =
            |reason: String| Error::invalid_argument(format!("invalid resource definition {type:?}: {reason}"));
        for (i, alias) in options.aliases.iter().enumerate() {
            naming::validate_alias(alias).map_err(invalid)?;
            if options.aliases[..i].contains(alias) {
                return Err(invalid(format!("duplicate alias `{alias}`")));
            }
        }
        crate::resource::validate_name("namespace", default_namespace).map_err(invalid)?;
        let explicit: Vec<&str> = options.aliases.iter().map(String::as_str).collect();
        let derived = naming::derive_with(r#type, &explicit, options.skip_automatic_aliases)
            .map_err(|reason| invalid(format!("invalid resource type: {reason}")))?;
        Ok(ResourceDefinition {
            r#type: r#type.to_owned(),
            display_type: derived.display_type,
            default_namespace: default_namespace.to_owned(),
            aliases: derived.aliases,
            all_aliases: derived.all_aliases,
            print_columns: options.print_columns,
            sensitivity: options.sensitivity,
        })
    }

    /// The ID of the definition's own resource: the type, lowercased.
    pub fn id(&self) -> String {
        self.r#type.to_lowercase()
    }
}
