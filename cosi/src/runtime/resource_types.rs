//! The resource types a runtime's program uses: their definitions, published
//! in the `meta` namespace, and the names they answer to on a command line.
//!
//! # Which names may be shared
//!
//! A definition answers to its type (any case), its type name forms (the
//! lowercase plural and its dotted prefixes: `hostnamestatuses`,
//! `hostnamestatuses.net`), its explicit aliases, and the short aliases COSI
//! derives (the lowercase singular and the initials: `hostnamestatus`, `hs`).
//!
//! Derived aliases collide by design: `HostnameSpecs` and `HostnameStatuses`
//! both derive `hs`, as in Talos, and a client resolving `hs` says it is
//! ambiguous. Every other collision is a mistake the program can fix, and the
//! runtime refuses it at registration, naming both types: two types with one
//! type name form, an explicit alias that is another type's name or alias.
//! An explicit alias the type would derive anyway counts as derived.

use std::collections::{BTreeMap, HashMap};

use crate::resource::{Resource, ResourceDefinition, naming};
use crate::runtime::RuntimeError;

/// How a definition comes to answer to a name; the order is the strength.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum NameKind {
    /// Derived by COSI's rules from the type: may be shared.
    Derived,
    /// Given by the program.
    Explicit,
    /// The type itself, its plural or a dotted prefix of it.
    Type,
}

/// The definitions of a runtime's types and the names they answer to.
#[derive(Clone, Default)]
pub(crate) struct ResourceTypes {
    definitions: BTreeMap<String, ResourceDefinition>,
    /// Each name, lowercase, with the types that answer to it.
    names: HashMap<String, Vec<(String, NameKind)>>,
    /// Definitions not yet published.
    unpublished: Vec<ResourceDefinition>,
}

impl ResourceTypes {
    /// The types every runtime publishes: the `meta` namespace's own, and
    /// the controller statuses when it publishes those.
    pub(crate) fn with_builtins(statuses: bool) -> Self {
        let mut builtins = vec![crate::state::Namespace::definition(), <ResourceDefinition as Resource>::definition()];
        if statuses {
            builtins.push(crate::runtime::ControllerStatus::definition());
        }
        let mut types = ResourceTypes::default();
        // The built-in definitions do not collide: a unit test checks it.
        let _ = types.add(builtins);
        types
    }

    /// Adds `definitions`, all or none: refused when a name collides as the
    /// module docs say, or when a type comes with two different definitions.
    pub(crate) fn add(&mut self, definitions: Vec<ResourceDefinition>) -> Result<(), RuntimeError> {
        let mut next = self.clone();
        for definition in definitions {
            next.add_one(definition)?;
        }
        *self = next;
        Ok(())
    }

    fn add_one(&mut self, definition: ResourceDefinition) -> Result<(), RuntimeError> {
        match self.definitions.get(&definition.r#type) {
            Some(known) if *known == definition => return Ok(()),
            Some(_) => return Err(RuntimeError::DefinitionConflict(definition.r#type)),
            None => (),
        }
        for (name, kind) in names(&definition) {
            let holders = self.names.entry(name.clone()).or_default();
            for (other, other_kind) in holders.iter() {
                if (kind, *other_kind) != (NameKind::Derived, NameKind::Derived) {
                    return Err(RuntimeError::AliasConflict {
                        alias: name,
                        first: other.clone(),
                        second: definition.r#type.clone(),
                    });
                }
            }
            holders.push((definition.r#type.clone(), kind));
        }
        self.unpublished.push(definition.clone());
        self.definitions.insert(definition.r#type.clone(), definition);
        Ok(())
    }

    /// The definitions added since the last call.
    pub(crate) fn take_unpublished(&mut self) -> Vec<ResourceDefinition> {
        std::mem::take(&mut self.unpublished)
    }
}

/// Every name `definition` answers to, lowercase, each once with its strongest kind.
fn names(definition: &ResourceDefinition) -> Vec<(String, NameKind)> {
    let derived =
        naming::derive_with(&definition.r#type, &[], false).map(|derived| derived.aliases).unwrap_or_default();
    let mut names: BTreeMap<String, NameKind> = BTreeMap::new();
    let mut add = |name: &str, kind: NameKind| {
        let slot = names.entry(name.to_lowercase()).or_insert(kind);
        *slot = (*slot).max(kind);
    };
    add(&definition.r#type, NameKind::Type);
    for alias in &definition.all_aliases {
        if !definition.aliases.contains(alias) {
            add(alias, NameKind::Type);
        }
    }
    for alias in &definition.aliases {
        match derived.contains(alias) {
            true => add(alias, NameKind::Derived),
            false => add(alias, NameKind::Explicit),
        }
    }
    names.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::DefinitionOptions;

    fn definition(r#type: &str, aliases: &[&str]) -> ResourceDefinition {
        let options = DefinitionOptions {
            aliases: aliases.iter().map(|alias| (*alias).to_owned()).collect(),
            ..DefinitionOptions::default()
        };
        ResourceDefinition::new(r#type, "default", options).expect("a valid definition")
    }

    #[test]
    fn the_builtins_do_not_collide() {
        let mut types = ResourceTypes::default();
        let builtins = vec![
            crate::state::Namespace::definition(),
            <ResourceDefinition as Resource>::definition(),
            crate::runtime::ControllerStatus::definition(),
        ];
        assert_eq!(types.add(builtins), Ok(()));
        assert_eq!(ResourceTypes::with_builtins(true).take_unpublished().len(), 3);
        assert_eq!(ResourceTypes::with_builtins(false).take_unpublished().len(), 2);
    }

    #[test]
    fn names_are_classified_by_where_they_come_from() {
        let names = names(&definition("MachineConfigs.config.example.org", &["mc", "config"]));
        let kind = |name: &str| names.iter().find(|(n, _)| n == name).map(|(_, kind)| *kind);
        assert_eq!(kind("machineconfigs.config.example.org"), Some(NameKind::Type));
        assert_eq!(kind("machineconfigs"), Some(NameKind::Type));
        assert_eq!(kind("machineconfigs.config.example"), Some(NameKind::Type));
        // `mc` is derived anyway; `config` is the program's own.
        assert_eq!(kind("mc"), Some(NameKind::Derived));
        assert_eq!(kind("mcs"), Some(NameKind::Derived));
        assert_eq!(kind("machineconfig"), Some(NameKind::Derived));
        assert_eq!(kind("config"), Some(NameKind::Explicit));
    }

    #[test]
    fn derived_aliases_may_be_shared_and_nothing_else() {
        let mut types = ResourceTypes::default();
        let spec = definition("HostnameSpecs.net.example.org", &[]);
        let status = definition("HostnameStatuses.net.example.org", &["hostname"]);
        assert_eq!(types.add(vec![spec.clone(), status]), Ok(()));

        // The same definition again is no change; a different one is refused.
        assert_eq!(types.add(vec![spec]), Ok(()));
        let changed = definition("HostnameSpecs.net.example.org", &["hn"]);
        assert_eq!(
            types.add(vec![changed]),
            Err(RuntimeError::DefinitionConflict("HostnameSpecs.net.example.org".to_owned()))
        );

        let refused = |types: &mut ResourceTypes, definition: ResourceDefinition| match types.add(vec![definition]) {
            Err(RuntimeError::AliasConflict { alias, first, second }) => (alias, first, second),
            other => panic!("expected a conflict, got {other:?}"),
        };
        // An explicit alias that is another type's explicit alias, derived alias or plural.
        let (alias, first, second) = refused(&mut types, definition("Hosts.other.example.org", &["hostname"]));
        assert_eq!(
            (alias.as_str(), first.as_str(), second.as_str()),
            ("hostname", "HostnameStatuses.net.example.org", "Hosts.other.example.org")
        );
        let (alias, ..) = refused(&mut types, definition("Hosts.other.example.org", &["hs"]));
        assert_eq!(alias, "hs");
        let (alias, ..) = refused(&mut types, definition("Hosts.other.example.org", &["hostnamespecs"]));
        assert_eq!(alias, "hostnamespecs");
        // A derived alias that is another type's explicit alias.
        let (alias, first, _) = refused(&mut types, definition("Hostnames.other.example.org", &[]));
        assert_eq!((alias.as_str(), first.as_str()), ("hostname", "HostnameStatuses.net.example.org"));
        // Two types with one plural.
        let (alias, ..) = refused(&mut types, definition("HostnameSpecs.other.example.org", &[]));
        assert_eq!(alias, "hostnamespecs");
        // A type that differs only in case.
        let (alias, ..) = refused(&mut types, definition("HostNameSpecs.net.example.org", &[]));
        assert_eq!(alias, "hostnamespecs");

        // A refused batch adds nothing, the good half included.
        let good = definition("Links.net.example.org", &[]);
        let bad = definition("Hosts.other.example.org", &["hostname"]);
        assert!(types.add(vec![good.clone(), bad]).is_err());
        assert!(!types.definitions.contains_key(&good.r#type));
        // A third type deriving `hs` is fine.
        assert_eq!(types.add(vec![definition("HardwareSensors.hw.example.org", &[])]), Ok(()));
        assert_eq!(types.names["hs"].len(), 3);
    }
}
