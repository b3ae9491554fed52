//! The CSV table of an ncu export: the header line found past anything ncu or the application
//! printed before it, then the records, each with its line in the file.

use std::path::Path;

use super::NcuError;

/// One CSV record and the line it starts on (1-based, in the file).
#[derive(Clone, Debug)]
pub(crate) struct Record {
    pub line: usize,
    pub fields: Vec<String>,
}

/// The header and the records after it.
#[derive(Clone, Debug)]
pub(crate) struct Table {
    pub header_line: usize,
    pub columns: Vec<String>,
    pub records: Vec<Record>,
}

impl Table {
    /// Index of a column by its exact name (the first, if named twice).
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c == name)
    }
}

/// Whether a line is the header of an ncu CSV table: its first field is `ID`.
fn is_header(line: &str) -> bool {
    line.starts_with("\"ID\",") || line.starts_with("ID,")
}

/// Lines ncu writes among its CSV output when it shares stdout with it (`==PROF== ...`,
/// `==WARNING== ...`): their first field starts with `==`.
fn is_ncu_message(fields: &[String]) -> bool {
    fields.first().is_some_and(|f| f.trim_start().starts_with("=="))
}

/// Reads the table of `text` (`path` names the file in errors). Lines before the header are
/// skipped (ncu's `==PROF==` lines, the application's output), as are ncu message lines and
/// blank lines after it. Trailing empty fields beyond the header's width (a trailing comma)
/// are dropped; a record with more fields than the header is an error. Records may be shorter
/// than the header: the layouts check that the columns they read are present.
pub(crate) fn read_table(path: &Path, text: &str) -> Result<Table, NcuError> {
    let mut offset = 0;
    let mut header_line = 0;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        // A byte order mark or indentation before the header is skipped with the lines above.
        let start = line.trim_start_matches('\u{feff}').trim_start();
        if is_header(start) {
            header_line = i + 1;
            offset += line.len() - start.len();
            break;
        }
        offset += line.len();
    }
    if header_line == 0 {
        return Err(NcuError::input(
            path,
            1,
            "ID",
            "no ncu CSV header: expected a line starting with \"ID\",\"Process ID\",... (ncu --csv output)",
        ));
    }
    let body = &text[offset..];
    // Lines are counted here, from each record's byte offset: the csv crate's own line count
    // is one short on CRLF input.
    let line_starts: Vec<usize> = std::iter::once(0).chain(body.match_indices('\n').map(|(i, _)| i + 1)).collect();
    let line_of = |byte: u64| {
        // After a CRLF the csv crate's record start can be the `\n` of the line before.
        let mut b = usize::try_from(byte).unwrap_or(usize::MAX);
        while matches!(body.as_bytes().get(b), Some(b'\r' | b'\n')) {
            b += 1;
        }
        header_line + line_starts.partition_point(|&s| s <= b).saturating_sub(1)
    };
    let mut rdr = csv::ReaderBuilder::new().has_headers(false).flexible(true).from_reader(body.as_bytes());
    let mut rec = csv::StringRecord::new();
    let mut columns: Option<Vec<String>> = None;
    let mut records = Vec::new();
    loop {
        match rdr.read_record(&mut rec) {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => {
                let line = e.position().map_or(header_line, |p| line_of(p.byte()));
                return Err(NcuError::input(path, line, "record", format!("malformed CSV: {e}")));
            }
        }
        let line = rec.position().map_or(header_line, |p| line_of(p.byte()));
        let mut fields: Vec<String> = rec.iter().map(|f| f.trim().to_string()).collect();
        let Some(cols) = &columns else {
            columns = Some(fields);
            continue;
        };
        if is_ncu_message(&fields) || (fields.len() <= 1 && fields.iter().all(String::is_empty)) {
            continue;
        }
        while fields.len() > cols.len() && fields.last().is_some_and(String::is_empty) {
            fields.pop();
        }
        if fields.len() > cols.len() {
            return Err(NcuError::input(
                path,
                line,
                format!("field {}", cols.len() + 1),
                format!("{} fields, but the header (line {header_line}) has {} columns", fields.len(), cols.len()),
            ));
        }
        records.push(Record { line, fields });
    }
    let columns = columns.unwrap_or_default();
    Ok(Table { header_line, columns, records })
}

/// Checks that `rec` reaches every column up to `needed` (exclusive) and names the first one
/// it lacks.
pub(crate) fn require_width(path: &Path, table: &Table, rec: &Record, needed: usize) -> Result<(), NcuError> {
    if rec.fields.len() < needed {
        let missing = &table.columns[rec.fields.len()];
        return Err(NcuError::input(
            path,
            rec.line,
            missing.clone(),
            format!(
                "{} fields, but the header (line {}) has {} columns: `{missing}` is missing",
                rec.fields.len(),
                table.header_line,
                table.columns.len()
            ),
        ));
    }
    Ok(())
}
