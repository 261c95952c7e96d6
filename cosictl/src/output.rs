//! Table, YAML and JSON output of resources.
//!
//! Specs are shown from their YAML text (every spec on the wire has one when
//! its writer sent it); table columns evaluate the type's print columns, a
//! small JSONPath subset (`{.a.b}`, `{.list[0]}`, `{.list[*]}`), against it
//! with `cosi_ui::columns`, as the live page does.

use std::io::Write;

use cosi::resource::{DynamicResource, ResourceDefinition};
use serde_json::Value;
use unicode_width::UnicodeWidthStr as _;

use crate::CliError;
use crate::get::Format;

/// One line of output: a resource, and in watch mode the event that carried it.
pub struct Row<'a> {
    pub event: Option<&'a str>,
    pub resource: &'a DynamicResource,
}

/// Writes rows in one format; tables are aligned once all rows are known,
/// or row by row when watching.
///
/// A watched table is aligned to the rows held until [`Printer::release`]
/// (the kind's current state), and its columns only widen after that: a row
/// wider than the columns so far widens them, and the header is printed again
/// above it, so that every row lines up with the header nearest above it.
pub struct Printer {
    format: Format,
    columns: Vec<(String, String)>,
    watch: bool,
    held: bool,
    rows: Vec<Vec<String>>,
    /// The columns' widths on screen so far; empty before the header.
    widths: Vec<usize>,
}

impl Printer {
    pub fn new(format: Format, definition: &ResourceDefinition, watch: bool) -> Self {
        let columns = definition
            .print_columns
            .iter()
            .map(|column| (column.name.to_uppercase(), column.json_path.clone()))
            .collect();
        Printer { format, columns, watch, held: false, rows: Vec::new(), widths: Vec::new() }
    }

    /// Holds a watch's rows until [`Printer::release`], so that the current
    /// state is aligned as one table.
    pub fn hold(mut self) -> Self {
        self.held = true;
        self
    }

    /// Prints the rows held so far, and every later row as it comes.
    pub fn release(&mut self, out: &mut impl Write) -> Result<(), CliError> {
        self.held = false;
        self.finish(out)
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
                if self.watch && !self.held {
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
        let mut widths = self.widths.clone();
        widths.resize(header.len(), 0);
        for cells in std::iter::once(&header).chain(&self.rows) {
            for (width, cell) in widths.iter_mut().zip(cells) {
                *width = (*width).max(cell.width());
            }
        }
        if widths != self.widths {
            self.widths = widths;
            writeln!(out, "{}", self.line(&header))?;
        }
        for row in std::mem::take(&mut self.rows) {
            writeln!(out, "{}", self.line(&row))?;
        }
        Ok(())
    }

    /// `cells` padded to the columns' widths on screen.
    fn line(&self, cells: &[String]) -> String {
        let mut line = String::new();
        for (cell, width) in cells.iter().zip(&self.widths) {
            line.push_str(cell);
            line.extend(std::iter::repeat_n(' ', width - cell.width() + 3));
        }
        line.trim_end().to_owned()
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
    use cosi::resource::{DefinitionOptions, DynamicResource, EncodedSpec, Metadata, ResourceDefinition};
    use unicode_width::UnicodeWidthStr as _;

    use super::{Format, Printer, Row, printable};

    fn resource(id: &str) -> DynamicResource {
        let spec = EncodedSpec { proto: Vec::new(), yaml: Some("{}".to_owned()) };
        DynamicResource::encoded(Metadata::new("network", "Links.net.example.org", id), spec)
    }

    /// Where on screen each of `cells` starts in `line`, looked for in order.
    fn starts(line: &str, cells: &[&str]) -> Vec<usize> {
        let mut from = 0;
        cells
            .iter()
            .map(|cell| {
                let at = from + line[from..].find(cell).unwrap_or_else(|| panic!("{cell:?} in {line:?}"));
                from = at + cell.len();
                line[..at].width()
            })
            .collect()
    }

    #[test]
    fn a_watched_table_lines_up_with_the_header_above_each_row() {
        let definition = ResourceDefinition::new("Links.net.example.org", "network", DefinitionOptions::default())
            .expect("a valid definition");
        let mut printer = Printer::new(Format::Table, &definition, true).hold();
        let mut out = Vec::new();
        let ids = [
            "eth0",
            "a-link-whose-id-is-longer-than-its-header",
            "lo",
            "ünïcödé-ïd-lönger-stïll-than-the-öne-before-it",
        ];
        printer.row(&mut out, Row { event: Some("+"), resource: &resource(ids[0]) }).expect("row");
        printer.row(&mut out, Row { event: Some("+"), resource: &resource(ids[1]) }).expect("row");
        assert!(out.is_empty(), "the current state is held until it is complete");
        printer.release(&mut out).expect("release");
        for id in &ids[2..] {
            printer.row(&mut out, Row { event: Some("*"), resource: &resource(id) }).expect("row");
        }

        let text = String::from_utf8(out).expect("UTF-8");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2 + 4, "a header, two rows, one more for the wider ID, two rows:\n{text}");
        let mut header = Vec::new();
        for line in lines {
            if line.trim_start().starts_with("NAMESPACE") {
                header = starts(line, &["NAMESPACE", "TYPE", "ID", "VERSION"]);
                continue;
            }
            let id = ids.iter().find(|id| line.contains(*id)).expect("a row names its ID");
            let cells = starts(line, &["network", "Links.net.example.org", id, "undefined"]);
            assert_eq!(cells, header, "{line:?} lines up with the header above it:\n{text}");
        }
    }

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(printable("plain ünïcode"), "plain ünïcode");
        assert_eq!(printable("\u{1b}]0;title\u{7}a\nb\tc"), "\\u{1b}]0;title\\u{7}a\\nb\\tc");
    }
}
