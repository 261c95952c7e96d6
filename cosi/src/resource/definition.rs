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

/// Whether a client that reads no sensitive type (the `cosi:reader` role,
/// the live page) may read a type, as [`readable`] tells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Readable {
    /// A definition of the type says it is not sensitive, none says it is,
    /// and the one under the type's own ID decodes.
    Yes,
    /// A definition of the type says it is sensitive.
    Sensitive,
    /// Nothing says the type is not sensitive, or the definition under its
    /// own ID does not decode (it might say sensitive).
    Unknown,
}

/// The one rule for hiding sensitive types, which the gRPC server applies
/// to readers and the live page to itself, from every stored definition:
/// its ID, and the type and sensitivity it names (`None` when it does not
/// decode).
///
/// Anyone who may write the `meta` namespace can add a definition under any
/// ID (Go COSI names them by the lowercased type, but nothing enforces it),
/// so the rule fails closed: a type is sensitive when any definition of it
/// says so, and readable only when one says it is not and the definition
/// under its own ID, which might say sensitive, decodes. An undecodable
/// definition under another ID counts for no type: one bad definition
/// hides only its own type.
///
/// ```
/// use cosi::resource::{Readable, Sensitivity, readable};
///
/// let t = "Secrets.example.org";
/// let said = |id, sensitivity| (id, Some((t, sensitivity)));
/// assert_eq!(readable(t, [said("secrets.example.org", Sensitivity::NonSensitive)]), Readable::Yes);
/// // A second definition of the type cannot make a sensitive type readable.
/// let two = [said("secrets.example.org", Sensitivity::Sensitive), said("other", Sensitivity::NonSensitive)];
/// assert_eq!(readable(t, two), Readable::Sensitive);
/// assert_eq!(readable(t, []), Readable::Unknown);
/// ```
pub fn readable<'a>(
    r#type: &str,
    definitions: impl IntoIterator<Item = (&'a str, Option<(&'a str, Sensitivity)>)>,
) -> Readable {
    let own_id = r#type.to_lowercase();
    let (mut not_sensitive, mut undecodable) = (false, false);
    for (id, said) in definitions {
        match said {
            Some((defined, sensitivity)) if defined == r#type => match sensitivity {
                Sensitivity::Sensitive => return Readable::Sensitive,
                Sensitivity::NonSensitive => not_sensitive = true,
            },
            Some(_) => (),
            None => undecodable |= id == own_id,
        }
    }
    match (not_sensitive, undecodable) {
        (true, false) => Readable::Yes,
        _ => Readable::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TYPE: &str = "Secrets.test.cosi.dev";
    const OWN_ID: &str = "secrets.test.cosi.dev";

    fn says(
        id: &'static str,
        r#type: &'static str,
        sensitivity: Sensitivity,
    ) -> (&'static str, Option<(&'static str, Sensitivity)>) {
        (id, Some((r#type, sensitivity)))
    }

    #[test]
    fn any_definition_that_says_sensitive_makes_the_type_sensitive() {
        use Sensitivity::{NonSensitive, Sensitive};
        // In either order, under any IDs.
        let sensitive_first = [says(OWN_ID, TYPE, Sensitive), says("zzz", TYPE, NonSensitive)];
        let sensitive_last =
            [says("aaa", TYPE, NonSensitive), says(OWN_ID, TYPE, NonSensitive), says("zzz", TYPE, Sensitive)];
        assert_eq!(readable(TYPE, sensitive_first), Readable::Sensitive);
        assert_eq!(readable(TYPE, sensitive_last), Readable::Sensitive);
        // Even when the definition under the type's own ID does not decode.
        assert_eq!(readable(TYPE, [(OWN_ID, None), says("x", TYPE, Sensitive)]), Readable::Sensitive);
    }

    #[test]
    fn a_type_is_readable_only_when_a_definition_says_so_and_none_may_say_otherwise() {
        use Sensitivity::{NonSensitive, Sensitive};
        assert_eq!(readable(TYPE, [says(OWN_ID, TYPE, NonSensitive)]), Readable::Yes);
        // Under another ID, and beside definitions of other types, sensitive or not.
        let others = [says("other", TYPE, NonSensitive), says("x", "Others.test.cosi.dev", Sensitive)];
        assert_eq!(readable(TYPE, others), Readable::Yes);
        // Nothing defines it: it might be sensitive.
        assert_eq!(readable(TYPE, []), Readable::Unknown);
        assert_eq!(readable(TYPE, [says("x", "Others.test.cosi.dev", NonSensitive)]), Readable::Unknown);
        // The definition under its own ID does not decode: it might say sensitive.
        assert_eq!(readable(TYPE, [(OWN_ID, None), says("other", TYPE, NonSensitive)]), Readable::Unknown);
        // An undecodable definition under another ID hides no other type.
        assert_eq!(readable(TYPE, [("junk", None), says(OWN_ID, TYPE, NonSensitive)]), Readable::Yes);
        // Type names are exact: a definition of the lowercased name is another type's.
        assert_eq!(readable(TYPE, [says(OWN_ID, OWN_ID, NonSensitive)]), Readable::Unknown);
    }
}
