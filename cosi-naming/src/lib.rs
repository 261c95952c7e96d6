//! COSI's resource type naming rules and the display type and aliases derived
//! from a type. Not API: use them through `cosi`.
//!
//! One crate holds them so that both their users apply the same rules: `cosi`,
//! whose `ResourceDefinition::new` calls them at run time, and `cosi-macros`,
//! whose `#[derive(Resource)]` and `#[controller]` call them at compile time.
//! It depends on nothing but `std` and `pluralizer`.
//!
//! The rules and their order follow `ResourceDefinitionSpec.Fill` in the Go
//! runtime, with one difference: an alias is never listed twice.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]

/// What a valid type yields: the singular display type and the alias lists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Derived {
    /// The singular of the name, for example `HostnameStatus`.
    pub display_type: String,
    /// The explicit aliases, then the derived short ones.
    pub aliases: Vec<String>,
    /// The lowercase name, its dotted prefixes, then `aliases`.
    pub all_aliases: Vec<String>,
}

/// The pattern a type's name (the part before the first `.`) must match.
const NAME_PATTERN: &str = "^[A-Z][A-Za-z0-9-]+$";

/// The pattern a type's suffix (the part after the first `.`) must match.
const SUFFIX_PATTERN: &str = r"^[a-z][a-z0-9-]+(\.[a-z][a-z0-9-]+)*$";

/// Validates `type` against COSI's rules and derives display type and aliases;
/// explicit aliases come first. With `skip_automatic`, both alias lists are
/// exactly `explicit_aliases` (the display type is still derived).
pub fn derive_with(r#type: &str, explicit_aliases: &[&str], skip_automatic: bool) -> Result<Derived, String> {
    let (name, suffix) = split(r#type)?;
    let display_type = pluralizer::pluralize(name, 1, false);

    let mut aliases = Vec::new();
    let mut all_aliases = Vec::new();
    for alias in explicit_aliases {
        push_unique(&mut aliases, (*alias).to_owned());
    }
    if !skip_automatic {
        push_unique(&mut aliases, display_type.to_lowercase());

        // `resourcedefinitions`, `resourcedefinitions.meta`, `resourcedefinitions.meta.cosi`.
        let lower_name = name.to_lowercase();
        let parts: Vec<&str> = suffix.split('.').collect();
        all_aliases.push(lower_name.clone());
        for i in 1..parts.len() {
            all_aliases.push(format!("{lower_name}.{}", parts[..i].join(".")));
        }

        let upper: String = name.chars().filter(char::is_ascii_uppercase).collect();
        if upper.len() > 1 {
            push_unique(&mut aliases, upper.to_lowercase());
            if !upper.ends_with('S') {
                push_unique(&mut aliases, format!("{}s", upper.to_lowercase()));
            }
        }
    }
    for alias in &aliases {
        push_unique(&mut all_aliases, alias.clone());
    }

    Ok(Derived { display_type, aliases, all_aliases })
}

/// Splits a type into its name and suffix, checking both; the first broken rule is the error.
fn split(r#type: &str) -> Result<(&str, &str), String> {
    let Some((name, suffix)) = r#type.split_once('.') else {
        return Err("missing suffix".to_owned());
    };
    if name.is_empty() {
        return Err("name is empty".to_owned());
    }
    if suffix.is_empty() {
        return Err("suffix is empty".to_owned());
    }
    if name.to_lowercase() == name {
        return Err("name should be in CamelCase".to_owned());
    }
    if !matches_name(name) {
        return Err(format!("name doesn't match {NAME_PATTERN:?}"));
    }
    if !suffix.split('.').all(matches_suffix_part) {
        return Err(format!("suffix doesn't match {SUFFIX_PATTERN:?}"));
    }
    if pluralizer::pluralize(name, 2, false) != name {
        return Err("name should be plural".to_owned());
    }
    Ok((name, suffix))
}

/// [`NAME_PATTERN`], by hand: this file cannot depend on `regex`.
fn matches_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_uppercase())
        && name.len() >= 2
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '-')
}

/// One dot-separated part of [`SUFFIX_PATTERN`]: `[a-z][a-z0-9-]+`.
fn matches_suffix_part(part: &str) -> bool {
    let mut chars = part.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && part.len() >= 2
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

fn push_unique(list: &mut Vec<String>, alias: String) {
    if !list.contains(&alias) {
        list.push(alias);
    }
}

/// An alias is what users type on a command line: not empty, lowercase, no whitespace.
pub fn validate_alias(alias: &str) -> Result<(), String> {
    if alias.is_empty() {
        return Err("alias is empty".to_owned());
    }
    if let Some(c) = alias.chars().find(|c| c.is_control() || c.is_whitespace()) {
        return Err(format!("alias `{alias}` contains the character {c:?}"));
    }
    if alias.chars().any(char::is_uppercase) {
        return Err(format!("alias `{alias}` should be lowercase"));
    }
    Ok(())
}

// Namespaces, types and IDs as a state accepts them. The derive checks a
// default namespace with the same function, so what compiles is accepted.

/// The longest namespace, type or ID a state accepts, in bytes.
pub const MAX_NAME_LEN: usize = 1024;

/// Checks a namespace, type or ID as a state receives it.
///
/// Types and namespaces allow no whitespace; IDs allow inner spaces but no other
/// control or whitespace characters. None may be empty or longer than
/// `MAX_NAME_LEN` bytes.
pub fn validate_name(what: &str, value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Err(format!("{what} is empty"));
    }
    if value.len() > MAX_NAME_LEN {
        return Err(format!("{what} is {} bytes long, the limit is {MAX_NAME_LEN}", value.len()));
    }
    let allow_space = what == "id";
    // The same test as `value.trim() != value`, without scanning for the trimmed string.
    if allow_space && (value.starts_with(char::is_whitespace) || value.ends_with(char::is_whitespace)) {
        return Err(format!("{what} {value:?} starts or ends with whitespace"));
    }
    // Every state operation checks its names: the common all-ASCII case is a byte scan.
    if value.bytes().all(|b| b.is_ascii_graphic() || (allow_space && b == b' ')) {
        return Ok(());
    }
    if let Some(c) = value.chars().find(|&c| c.is_control() || (c.is_whitespace() && !(allow_space && c == ' '))) {
        return Err(format!("{what} {value:?} contains the character {c:?}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn derive(r#type: &str, explicit_aliases: &[&str]) -> Result<Derived, String> {
        derive_with(r#type, explicit_aliases, false)
    }

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn resource_definitions() {
        let derived = derive("ResourceDefinitions.meta.cosi.dev", &["api-resources"]).unwrap();
        assert_eq!(derived.display_type, "ResourceDefinition");
        assert_eq!(derived.aliases, strings(&["api-resources", "resourcedefinition", "rd", "rds"]));
        assert_eq!(
            derived.all_aliases,
            strings(&[
                "resourcedefinitions",
                "resourcedefinitions.meta",
                "resourcedefinitions.meta.cosi",
                "api-resources",
                "resourcedefinition",
                "rd",
                "rds",
            ])
        );
    }

    #[test]
    fn namespaces() {
        let derived = derive("Namespaces.meta.cosi.dev", &["ns"]).unwrap();
        assert_eq!(derived.display_type, "Namespace");
        assert_eq!(derived.aliases, strings(&["ns", "namespace"]));
        assert_eq!(
            derived.all_aliases,
            strings(&["namespaces", "namespaces.meta", "namespaces.meta.cosi", "ns", "namespace"])
        );
    }

    #[test]
    fn hostname_statuses() {
        let derived = derive("HostnameStatuses.net.talos.dev", &[]).unwrap();
        assert_eq!(derived.display_type, "HostnameStatus");
        // `HS` ends in `S`, so there is no `hss`.
        assert_eq!(derived.aliases, strings(&["hostnamestatus", "hs"]));
        assert_eq!(
            derived.all_aliases,
            strings(&[
                "hostnamestatuses",
                "hostnamestatuses.net",
                "hostnamestatuses.net.talos",
                "hostnamestatus",
                "hs"
            ])
        );
    }

    #[test]
    fn single_part_suffix_has_no_prefixes() {
        let derived = derive("Links.net", &[]).unwrap();
        assert_eq!(derived.aliases, strings(&["link"]));
        assert_eq!(derived.all_aliases, strings(&["links", "link"]));
    }

    #[test]
    fn skip_automatic_aliases() {
        let derived = derive_with("HostnameStatuses.net.talos.dev", &["hn"], true).unwrap();
        assert_eq!(derived.display_type, "HostnameStatus");
        assert_eq!(derived.aliases, strings(&["hn"]));
        assert_eq!(derived.all_aliases, strings(&["hn"]));
    }

    #[test]
    fn no_duplicates() {
        let derived = derive("HostnameStatuses.net.talos.dev", &["hs", "hostnamestatuses"]).unwrap();
        assert_eq!(derived.aliases, strings(&["hs", "hostnamestatuses", "hostnamestatus"]));
        assert_eq!(
            derived.all_aliases,
            strings(&[
                "hostnamestatuses",
                "hostnamestatuses.net",
                "hostnamestatuses.net.talos",
                "hs",
                "hostnamestatus",
            ])
        );
    }

    #[test]
    fn errors_in_go_order() {
        let cases = [
            ("Namespaces", "missing suffix"),
            (".meta.cosi.dev", "name is empty"),
            ("Namespaces.", "suffix is empty"),
            ("namespaces.meta", "name should be in CamelCase"),
            ("123.meta", "name should be in CamelCase"),
            ("Name_spaces.meta", r#"name doesn't match "^[A-Z][A-Za-z0-9-]+$""#),
            ("S.meta", r#"name doesn't match "^[A-Z][A-Za-z0-9-]+$""#),
            ("Namespaces.Meta", r#"suffix doesn't match "^[a-z][a-z0-9-]+(\\.[a-z][a-z0-9-]+)*$""#),
            ("Namespaces.meta..dev", r#"suffix doesn't match "^[a-z][a-z0-9-]+(\\.[a-z][a-z0-9-]+)*$""#),
            ("Namespaces.m.dev", r#"suffix doesn't match "^[a-z][a-z0-9-]+(\\.[a-z][a-z0-9-]+)*$""#),
            ("Namespaces.meta.", r#"suffix doesn't match "^[a-z][a-z0-9-]+(\\.[a-z][a-z0-9-]+)*$""#),
            ("Namespace.meta.cosi.dev", "name should be plural"),
            ("HostnameStatus.net.talos.dev", "name should be plural"),
        ];
        for (r#type, error) in cases {
            assert_eq!(derive(r#type, &[]), Err(error.to_owned()), "{type}");
        }
    }

    #[test]
    fn ids_with_surrounding_whitespace_are_refused() {
        for id in [" a", "a ", "\ta", "a\n", "\u{2003}a", "a\u{3000}", " "] {
            let err = validate_name("id", id).expect_err(id);
            assert!(err.contains("starts or ends with whitespace"), "{id:?}: {err}");
        }
        for id in ["a", "a b", "a  b", "\u{e9}t\u{e9}"] {
            assert_eq!(validate_name("id", id), Ok(()), "{id:?}");
        }
        assert!(validate_name("namespace", "a b").is_err());
    }

    #[test]
    fn name_pattern_by_hand() {
        for ok in ["Ab", "A-", "Links", "IPs", "Ipv6-Addresses"] {
            assert!(matches_name(ok), "{ok}");
        }
        for bad in ["A", "", "aB", "Ab_c", "Ab.c", "Äbs", "Ab c"] {
            assert!(!matches_name(bad), "{bad}");
        }
        for ok in ["ab", "a-", "a0", "talos-dev"] {
            assert!(matches_suffix_part(ok), "{ok}");
        }
        for bad in ["a", "", "0a", "-a", "aB", "a_b"] {
            assert!(!matches_suffix_part(bad), "{bad}");
        }
    }
}
