//! Print columns: a resource definition's extra table columns, evaluated
//! against a spec. The templates are a small JSONPath subset: `{.a.b}`,
//! `{.list[0]}`, `{.list[*]}` (or `{.list[:]}`). And the spec they are
//! evaluated against, as `cosictl get` and the page show it.

use cosi::resource::DynamicResource;
use serde_json::{Map, Value};

/// The spec as a JSON value: typed specs through serde, encoded ones from
/// their YAML text (aliases bounded, `cosi::resource::from_yaml`); `null`
/// without either. Or why it cannot be shown: YAML that does not decode, or
/// whose aliases expand it too far.
pub fn spec(resource: &DynamicResource) -> Result<Value, String> {
    if let Some(spec) = resource.spec().as_serialize() {
        return serde_json::to_value(spec).map_err(|err| err.to_string());
    }
    match resource.spec().as_encoded().and_then(|encoded| encoded.yaml.as_deref()) {
        Some(text) => cosi::resource::from_yaml::<Value>(text).map_err(|err| err.to_string()),
        None => Ok(Value::Null),
    }
}

/// Adds the spec to a resource's document: `spec`, and `specError` with
/// why when it cannot be shown (then `spec` is `null`).
pub fn insert_spec(document: &mut Map<String, Value>, resource: &DynamicResource) {
    let shown = spec(resource).unwrap_or_else(|error| {
        document.insert("specError".into(), Value::String(format!("the spec cannot be shown: {error}")));
        Value::Null
    });
    document.insert("spec".into(), shown);
}

/// Evaluates a print column's JSONPath `template` against `spec`: strings
/// as they are, other values as JSON, several values joined with commas;
/// what does not resolve is empty.
pub fn evaluate(spec: &Value, template: &str) -> String {
    let path = template.trim().trim_start_matches('{').trim_end_matches('}');
    let mut current = vec![spec];
    for step in path.split('.').filter(|step| !step.is_empty()) {
        let (name, index) = match step.split_once('[') {
            Some((name, rest)) => (name, Some(rest.trim_end_matches(']'))),
            None => (step, None),
        };
        let mut next = Vec::new();
        for value in current {
            let Some(value) = (if name.is_empty() { Some(value) } else { value.get(name) }) else { continue };
            match (index, value) {
                (None, value) => next.push(value),
                (Some("*" | ":"), Value::Array(items)) => next.extend(items.iter()),
                (Some(index), Value::Array(items)) => {
                    if let Some(item) = index.parse::<usize>().ok().and_then(|i| items.get(i)) {
                        next.push(item);
                    }
                }
                _ => {}
            }
        }
        current = next;
    }
    let texts: Vec<String> = current
        .into_iter()
        .map(|value| match value {
            Value::String(text) => text.clone(),
            Value::Null => String::new(),
            other => other.to_string(),
        })
        .collect();
    texts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_path_subset() {
        let spec = serde_json::json!({"a": {"b": "x"}, "list": ["p", "q"], "n": 3});
        assert_eq!(evaluate(&spec, "{.a.b}"), "x");
        assert_eq!(evaluate(&spec, "{.list[:]}"), "p,q");
        assert_eq!(evaluate(&spec, "{.list[*]}"), "p,q");
        assert_eq!(evaluate(&spec, "{.list[1]}"), "q");
        assert_eq!(evaluate(&spec, "{.n}"), "3");
        assert_eq!(evaluate(&spec, "{.missing.x}"), "");
    }
}
