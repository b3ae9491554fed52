//! The two layouts of an ncu CSV table turned into launches.

use std::collections::BTreeMap;
use std::path::Path;

use super::number::{frequency_to_mhz, is_absent, parse_dim3, parse_number, time_to_us, to_cycles};
use super::table::{Record, Table, require_width};
use super::{
    CYCLE_METRICS, ClockSource, DEVICE_NAME_METRIC, DRAM_CLOCK_METRICS, DURATION_METRICS, NcuError, NcuKernel,
    NcuLayout, NcuMetric, SM_CLOCK_METRICS,
};

/// The columns that identify a launch (every other column of a raw export is a metric).
const IDENTITY: &[&str] = &[
    "ID",
    "Process ID",
    "Process Name",
    "Host Name",
    "Kernel Name",
    "Context",
    "Stream",
    "Block Size",
    "Grid Size",
    "Device",
    "CC",
];

/// Where the identity columns are.
struct IdColumns {
    id: usize,
    name: usize,
    /// The columns of [`OPTIONAL`], where present.
    optional: [Option<usize>; 9],
}

/// The identity columns besides `ID` and `Kernel Name`, in [`IdColumns::optional`] order.
const OPTIONAL: [&str; 9] =
    ["Process ID", "Process Name", "Host Name", "Context", "Stream", "Block Size", "Grid Size", "Device", "CC"];
const BLOCK: usize = 5;
const GRID: usize = 6;
const DEVICE: usize = 7;

impl IdColumns {
    fn find(path: &Path, t: &Table) -> Result<IdColumns, NcuError> {
        let required = |name: &str| {
            t.column(name)
                .ok_or_else(|| NcuError::input(path, t.header_line, name, format!("the header has no `{name}` column")))
        };
        let id = required("ID")?;
        let name = required("Kernel Name")?;
        Ok(IdColumns { id, name, optional: OPTIONAL.map(|c| t.column(c)) })
    }

    /// One past the last identity column present.
    fn width(&self) -> usize {
        self.optional.iter().flatten().chain([&self.id, &self.name]).max().map_or(0, |&m| m + 1)
    }
}

/// What identifies a launch, from one record.
struct Identity {
    id: u64,
    name: String,
    fields: [Option<String>; 9],
    grid: Option<[u32; 3]>,
    block: Option<[u32; 3]>,
    line: usize,
}

fn parse_id(path: &Path, rec: &Record, col: usize) -> Result<u64, NcuError> {
    let raw = rec.fields[col].as_str();
    if raw.is_empty() {
        return Err(NcuError::input(path, rec.line, "ID", "empty; every launch has a numeric ID"));
    }
    raw.parse::<u64>().map_err(|_| {
        NcuError::input(path, rec.line, "ID", format!("`{raw}` is not a launch ID (a non-negative integer)"))
    })
}

fn identity(path: &Path, cols: &IdColumns, rec: &Record) -> Result<Identity, NcuError> {
    let id = parse_id(path, rec, cols.id)?;
    let name = rec.fields[cols.name].clone();
    if name.is_empty() {
        return Err(NcuError::input(path, rec.line, "Kernel Name", "empty"));
    }
    let fields = cols.optional.map(|c| c.and_then(|i| rec.fields.get(i)).filter(|v| !v.is_empty()).cloned());
    let dim = |slot: usize, column: &str| -> Result<Option<[u32; 3]>, NcuError> {
        fields[slot].as_deref().map(parse_dim3).transpose().map_err(|e| NcuError::input(path, rec.line, column, e))
    };
    let grid = dim(GRID, "Grid Size")?;
    let block = dim(BLOCK, "Block Size")?;
    Ok(Identity { id, name, fields, grid, block, line: rec.line })
}

/// A launch whose records have been gathered.
struct Partial {
    ident: Identity,
    metrics: BTreeMap<String, NcuMetric>,
}

/// The first metric of `names` that has a value.
fn lookup<'a>(metrics: &'a BTreeMap<String, NcuMetric>, names: &[&'a str]) -> Option<(&'a str, &'a NcuMetric)> {
    names.iter().find_map(|&n| metrics.get(n).filter(|m| !is_absent(&m.value)).map(|m| (n, m)))
}

type Convert = fn(f64, &str) -> Result<f64, String>;

/// A metric's value converted by `convert`; it must be positive.
fn quantity(path: &Path, name: &str, m: &NcuMetric, convert: Convert) -> Result<f64, NcuError> {
    let bad = |e: String| NcuError::input(path, m.line, name, e);
    let v = parse_number(&m.value).map_err(bad)?;
    let v = convert(v, m.unit.as_deref().unwrap_or("")).map_err(bad)?;
    if !(v.is_finite() && v > 0.0) {
        return Err(bad(format!("`{}` is not positive", m.value)));
    }
    Ok(v)
}

fn finish(path: &Path, p: Partial, layout: NcuLayout) -> Result<NcuKernel, NcuError> {
    let Partial { ident, metrics } = p;
    let Some((duration_metric, m)) = lookup(&metrics, DURATION_METRICS) else {
        let field = if layout == NcuLayout::Details { "Duration" } else { DURATION_METRICS[0] };
        return Err(NcuError::input(
            path,
            ident.line,
            field,
            format!(
                "launch ID {} has no duration: none of {} has a value (export gpu__time_duration.sum)",
                ident.id,
                DURATION_METRICS.join(", ")
            ),
        ));
    };
    let duration_us = quantity(path, duration_metric, m, time_to_us)?;
    let sm_cycles = lookup(&metrics, CYCLE_METRICS).map(|(n, m)| quantity(path, n, m, to_cycles)).transpose()?;
    let measured = lookup(&metrics, SM_CLOCK_METRICS)
        .map(|(n, m)| quantity(path, n, m, frequency_to_mhz).map(|v| (v, ClockSource::Metric(n.to_string()))))
        .transpose()?;
    let (sm_clock_mhz, sm_clock_from) = match (measured, sm_cycles) {
        (Some((v, from)), _) => (Some(v), Some(from)),
        (None, Some(c)) => (Some(c / duration_us), Some(ClockSource::Derived)),
        (None, None) => (None, None),
    };
    let dram_clock_mhz =
        lookup(&metrics, DRAM_CLOCK_METRICS).map(|(n, m)| quantity(path, n, m, frequency_to_mhz)).transpose()?;
    let device = ident.fields[DEVICE].clone();
    let device_name = metrics
        .get(DEVICE_NAME_METRIC)
        .map(|m| m.value.clone())
        .filter(|v| !is_absent(v))
        .or_else(|| device.clone().filter(|d| d.parse::<u64>().is_err()));
    let [process_id, process_name, host_name, context, stream, _, _, _, cc] = ident.fields;
    Ok(NcuKernel {
        id: ident.id,
        name: ident.name,
        grid: ident.grid,
        block: ident.block,
        device,
        device_name,
        cc,
        process_id,
        process_name,
        host_name,
        context,
        stream,
        duration_us,
        duration_metric: duration_metric.to_string(),
        sm_cycles,
        sm_clock_mhz,
        sm_clock_from,
        dram_clock_mhz,
        metrics,
        layout,
        line: ident.line,
    })
}

/// The raw page: one record per launch, one column per metric, maybe a units row first.
pub(crate) fn raw(path: &Path, t: &Table) -> Result<Vec<NcuKernel>, NcuError> {
    let cols = IdColumns::find(path, t)?;
    let metric_cols: Vec<(usize, &str)> = t
        .columns
        .iter()
        .enumerate()
        .filter(|(_, c)| !c.is_empty() && !IDENTITY.contains(&c.as_str()))
        .map(|(i, c)| (i, c.as_str()))
        .collect();
    if !metric_cols.iter().any(|(_, c)| DURATION_METRICS.contains(c)) {
        return Err(NcuError::input(
            path,
            t.header_line,
            DURATION_METRICS[0],
            format!(
                "no duration column: the header names none of {} (add --metrics gpu__time_duration.sum)",
                DURATION_METRICS.join(", ")
            ),
        ));
    }
    let mut records = t.records.iter().peekable();
    let units: Option<&Record> = records.next_if(|r| r.fields.get(cols.id).is_some_and(String::is_empty));
    if let Some(u) = units {
        require_width(path, t, u, t.columns.len())?;
    }
    let layout = NcuLayout::Raw { units_row: units.is_some() };
    let mut seen: BTreeMap<u64, usize> = BTreeMap::new();
    let mut out = Vec::new();
    for rec in records {
        require_width(path, t, rec, t.columns.len())?;
        let ident = identity(path, &cols, rec)?;
        if let Some(first) = seen.insert(ident.id, rec.line) {
            return Err(NcuError::input(
                path,
                rec.line,
                "ID",
                format!("launch ID {} appears twice (first at line {first})", ident.id),
            ));
        }
        let metrics = metric_cols
            .iter()
            .map(|&(i, name)| {
                let unit = units.map(|u| u.fields[i].clone());
                (name.to_string(), NcuMetric { value: rec.fields[i].clone(), unit, line: rec.line })
            })
            .collect();
        out.push(finish(path, Partial { ident, metrics }, layout)?);
    }
    Ok(out)
}

/// The details page: one record per metric of a launch.
pub(crate) fn details(path: &Path, t: &Table) -> Result<Vec<NcuKernel>, NcuError> {
    let cols = IdColumns::find(path, t)?;
    let column = |name: &str| {
        t.column(name)
            .ok_or_else(|| NcuError::input(path, t.header_line, name, format!("the header has no `{name}` column")))
    };
    let (metric_name, metric_unit, metric_value) =
        (column("Metric Name")?, column("Metric Unit")?, column("Metric Value")?);
    let width = cols.width().max(metric_name + 1).max(metric_unit + 1).max(metric_value + 1);
    let mut index: BTreeMap<u64, usize> = BTreeMap::new();
    let mut parts: Vec<Partial> = Vec::new();
    for rec in &t.records {
        require_width(path, t, rec, width)?;
        let name = rec.fields[metric_name].as_str();
        if name.is_empty() {
            // A rule result (`Rule Name`, `Rule Description`, ...), not a metric.
            continue;
        }
        let id = parse_id(path, rec, cols.id)?;
        let slot = match index.get(&id) {
            Some(&i) => {
                let p = &parts[i];
                let kernel = rec.fields[cols.name].as_str();
                if kernel != p.ident.name {
                    return Err(NcuError::input(
                        path,
                        rec.line,
                        "Kernel Name",
                        format!("launch ID {id} is `{kernel}` here but `{}` at line {}", p.ident.name, p.ident.line),
                    ));
                }
                i
            }
            None => {
                parts.push(Partial { ident: identity(path, &cols, rec)?, metrics: BTreeMap::new() });
                index.insert(id, parts.len() - 1);
                parts.len() - 1
            }
        };
        parts[slot].metrics.entry(name.to_string()).or_insert_with(|| NcuMetric {
            value: rec.fields[metric_value].clone(),
            unit: Some(rec.fields[metric_unit].clone()),
            line: rec.line,
        });
    }
    parts.into_iter().map(|p| finish(path, p, NcuLayout::Details)).collect()
}
