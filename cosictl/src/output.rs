//! Table, YAML and JSON output of resources.
//!
//! Specs are shown from their YAML text (every spec on the wire has one when
//! its writer sent it); table columns evaluate the type's print columns, a
//! small JSONPath subset (`{.a.b}`, `{.list[0]}`, `{.list[*]}`), against it
//! with `cosi_ui::columns`, as the live page does.

use std::io::Write;

use cosi::resource::{DynamicResource, ResourceDefinition};
use serde_json::Value;

use crate::CliError;
use crate::get::Format;

/// One line of output: a resource, and in watch mode the event that carried it.
pub struct Row<'a> {
    pub event: Option<&'a str>,
    pub resource: &'a DynamicResource,
}

/// Writes rows in one format; tables are aligned once all rows are known,
/// or row by row when watching.
pub struct Printer {
    format: Format,
    columns: Vec<(String, String)>,
    watch: bool,
    rows: Vec<Vec<String>>,
    header_printed: bool,
}

impl Printer {
    pub fn new(format: Format, definition: &ResourceDefinition, watch: bool) -> Self {
        let columns = definition
            .print_columns
            .iter()
            .map(|column| (column.name.to_uppercase(), column.json_path.clone()))
            .collect();
        Printer { format, columns, watch, rows: Vec::new(), header_printed: false }
    }

    pub fn row(&mut self, out: &mut impl Write, row: Row<'_>) -> Result<(), CliError> {
        let io = |err: std::io::Error| CliError::Output(err.to_string());
        match self.format {
            Format::Table => {
                let metadata = row.resource.metadata();
                let spec = cosi_ui::columns::spec(row.resource).unwrap_or(Value::Null);
                let mut cells = Vec::new();
                if self.watch {
                    cells.push(row.event.unwrap_or("").to_owned());
                }
                cells.extend([
                    metadata.namespace().to_owned(),
                    metadata.r#type().to_owned(),
                    metadata.id().to_owned(),
                    metadata.version().to_string(),
                ]);
                cells.extend(self.columns.iter().map(|(_, path)| printable(&cosi_ui::columns::evaluate(&spec, path))));
                self.rows.push(cells);
                if self.watch {
                    self.flush_table(out).map_err(io)?;
                }
            }
            Format::Yaml => {
                let document = document(row);
                let text = serde_yaml_ng::to_string(&document).map_err(|err| CliError::Output(err.to_string()))?;
                writeln!(out, "---\n{}", text.trim_end()).map_err(io)?;
            }
            Format::Json => {
                let text = serde_json::to_string(&document(row)).map_err(|err| CliError::Output(err.to_string()))?;
                writeln!(out, "{text}").map_err(io)?;
            }
        }
        Ok(())
    }

    pub fn finish(&mut self, out: &mut impl Write) -> Result<(), CliError> {
        self.flush_table(out).map_err(|err| CliError::Output(err.to_string()))
    }

    fn flush_table(&mut self, out: &mut impl Write) -> std::io::Result<()> {
        if self.format != Format::Table {
            return Ok(());
        }
        let mut header: Vec<String> = Vec::new();
        if self.watch {
            header.push(String::new());
        }
        header.extend(["NAMESPACE", "TYPE", "ID", "VERSION"].map(str::to_owned));
        header.extend(self.columns.iter().map(|(name, _)| name.clone()));
        let mut widths: Vec<usize> = header.iter().map(String::len).collect();
        for row in &self.rows {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.len());
            }
        }
        let line = |cells: &[String]| {
            let padded: Vec<String> =
                cells.iter().zip(&widths).map(|(cell, width)| format!("{cell:<width$}")).collect();
            padded.join("   ").trim_end().to_owned()
        };
        if !self.header_printed {
            writeln!(out, "{}", line(&header))?;
            self.header_printed = true;
        }
        for row in self.rows.drain(..) {
            writeln!(out, "{}", line(&row))?;
        }
        Ok(())
    }
}

/// `text` with its control characters escaped (`\u{1b}`, `\n`): a value
/// another program wrote must not move the terminal's cursor, set its title
/// or break a line of a table.
pub(crate) fn printable(text: &str) -> String {
    text.chars()
        .map(|c| match c.is_control() {
            true => c.escape_default().to_string(),
            false => c.to_string(),
        })
        .collect()
}

fn document(row: Row<'_>) -> Value {
    let mut document = serde_json::Map::new();
    if let Some(event) = row.event {
        document.insert("event".into(), Value::String(event.into()));
    }
    document.insert("metadata".into(), serde_json::to_value(row.resource.metadata()).unwrap_or(Value::Null));
    cosi_ui::columns::insert_spec(&mut document, row.resource);
    Value::Object(document)
}

#[cfg(test)]
mod tests {
    use super::printable;

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(printable("plain ünïcode"), "plain ünïcode");
        assert_eq!(printable("\u{1b}]0;title\u{7}a\nb\tc"), "\\u{1b}]0;title\\u{7}a\\nb\\tc");
    }
}
