//! `gpusim report DIR -o report.html`: a study's results as one self-contained HTML page
//! (provenance, the per-point table, each metric against each varied parameter, a heatmap for
//! two parameters, the sensitivity ranking, the Pareto front of a cost, and per workload the
//! kernels' warp states, roofline and speed of light); and the page of one `gpusim run
//! --report`. Both are built on `reports::doc` and rendered by `reports::html`.

mod cost;
mod kernels;
mod study;
pub(crate) mod view;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::Args;
use gpusim_reports::doc::{Block, Cell, Document, Figure, Section, Table};
use gpusim_reports::heatmap::{self, Heatmap};
use gpusim_reports::lines::{self, LinePlot, Series};
use gpusim_sim_core::Report;

use crate::error::{CliError, CliResult};
use study::Study;
use view::RunView;

#[derive(Args)]
pub struct ReportArgs {
    /// A study directory written by `gpusim sweep` (manifest.json, points/).
    pub dir: PathBuf,
    /// The HTML file to write.
    #[arg(long, short)]
    pub output: PathBuf,
}

/// Runs shown per workload in the kernel sections when a study has more points: the first
/// point, the fastest and the slowest.
const MAX_KERNEL_RUNS: usize = 6;

pub fn report_cmd(a: ReportArgs, quiet: bool) -> CliResult {
    let st = study::load(&a.dir)?;
    let doc = study_document(&st, &a.dir)?;
    write_html(&a.output, &doc)?;
    if !quiet {
        let missing = st.missing();
        let note =
            if missing > 0 { format!(" ({missing} of {} point runs missing)", st.total()) } else { String::new() };
        eprintln!("wrote {}{note}", a.output.display());
    }
    Ok(())
}

/// Writes `doc` as HTML to `path`.
pub fn write_html(path: &Path, doc: &Document) -> CliResult {
    std::fs::write(path, gpusim_reports::html::render(doc))
        .map_err(|e| CliError::input(format!("{}: cannot write: {e}", path.display())))
}

fn plot_err(what: String) -> impl Fn(gpusim_reports::Error) -> CliError {
    move |e| CliError::input(format!("{what}: {e}"))
}

/// The page of one run (`gpusim run --report`).
pub fn run_document(r: &Report, source: &str) -> CliResult<Document> {
    let v = serde_json::to_value(r).map_err(|e| CliError::input(format!("cannot encode the report: {e}")))?;
    let run: RunView =
        serde_json::from_value(v).map_err(|e| CliError::input(format!("cannot read the report: {e}")))?;
    let mut s = Section::new("Run");
    s.push(Block::KeyValues(vec![
        ("gpusim".into(), format!("{} ({})", env!("CARGO_PKG_VERSION"), crate::correlate_cmd::git_hash())),
        ("arch".into(), run.arch.clone()),
        ("memory model".into(), run.memory_model.clone()),
        ("launch".into(), run.launch.clone().unwrap_or_else(|| "eager".into())),
        ("trace".into(), source.to_string()),
        ("time".into(), format!("{:.3} µs", run.time_us)),
        ("throughput".into(), format!("{:.2} TFLOP/s", run.tflops)),
        ("kernels".into(), run.kernels.len().to_string()),
        ("report schema".into(), run.schema_version.to_string()),
    ]));
    let rows = run
        .kernels
        .iter()
        .map(|k| {
            vec![
                Cell::num(k.id as f64, 0),
                Cell::text(&k.name),
                Cell::num(k.ctas as f64, 0),
                Cell::num(k.cycles as f64, 0),
                Cell::num(k.time_us, 3),
                Cell::num(k.tflops, 2),
                Cell::text(k.sol.as_ref().map_or("-", |s| s.verdict.as_str())),
            ]
        })
        .collect();
    let columns = ["id", "kernel", "CTAs", "cycles", "time (µs)", "TFLOP/s", "verdict"];
    s.push(Block::Table(Table { columns: columns.map(String::from).to_vec(), rows }));
    let k = kernels::section("Kernels", &[(String::new(), &run)])?;
    Ok(Document {
        title: format!("gpusim run: {source}"),
        subtitle: format!("{} at {:.0} MHz", run.arch, r.sm_clock_mhz),
        sections: vec![s, k],
    })
}

/// A parameter value as a column heading: the key with its unit.
fn param_heading(p: &study::Param) -> String {
    if p.unit.is_empty() { p.key.clone() } else { format!("{} ({})", p.key, p.unit) }
}

/// The mean of `metric` per value of `key` for workload `w` over the finished points (other
/// parameters averaged), by increasing value.
fn means(st: &Study, key: &str, w: usize, metric: fn(&RunView) -> f64) -> Vec<(f64, f64)> {
    let mut by: BTreeMap<u64, (f64, f64, u32)> = BTreeMap::new();
    for (pt, row) in st.manifest.points.iter().zip(&st.runs) {
        if let Some(r) = &row[w] {
            let x = pt.numeric[key];
            // Ordered by the value's bits: the values are finite and ≥ 0 for real parameters;
            // total_cmp order matches for those.
            let e = by.entry(x.to_bits()).or_insert((x, 0.0, 0));
            e.1 += metric(r);
            e.2 += 1;
        }
    }
    let mut v: Vec<(f64, f64)> = by.into_values().map(|(x, s, n)| (x, s / n as f64)).collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v
}

fn time(r: &RunView) -> f64 {
    r.time_us
}
fn tflops(r: &RunView) -> f64 {
    r.tflops
}

fn provenance(st: &Study, dir: &Path) -> Section {
    let m = &st.manifest;
    let mut s = Section::new("Provenance");
    let missing = st.missing();
    s.push(Block::KeyValues(vec![
        ("study".into(), m.study.clone()),
        ("directory".into(), dir.display().to_string()),
        ("base arch".into(), m.base_arch.clone()),
        (
            "swept by gpusim".into(),
            format!("{} ({})", m.gpusim_version, m.git_hash.as_deref().unwrap_or("no git hash")),
        ),
        ("reported by gpusim".into(), format!("{} ({})", env!("CARGO_PKG_VERSION"), crate::correlate_cmd::git_hash())),
        ("points".into(), m.points.len().to_string()),
        ("point runs".into(), format!("{} finished, {missing} missing, of {}", st.total() - missing, st.total())),
        ("cost".into(), m.cost.as_ref().map_or("none".into(), |c| c.expr.clone())),
    ]));
    if missing > 0 {
        s.push(Block::Note(format!(
            "{missing} of {} point runs have no result file yet (an unfinished or failed sweep): they are left out of the plots and marked `missing` in the table.",
            st.total()
        )));
    }
    s.push(Block::Subheading("Varied parameters".into()));
    let rows = m
        .params
        .iter()
        .map(|p| {
            let mut vals: Vec<&str> =
                m.points.iter().filter_map(|pt| pt.values.get(&p.key).map(String::as_str)).collect();
            vals.dedup();
            let mut uniq: Vec<&str> = Vec::new();
            for v in vals {
                if !uniq.contains(&v) {
                    uniq.push(v);
                }
            }
            vec![Cell::text(&p.key), Cell::text(&p.unit), Cell::text(&p.description), Cell::text(uniq.join(", "))]
        })
        .collect();
    s.push(Block::Table(Table { columns: ["key", "unit", "description", "values"].map(String::from).to_vec(), rows }));
    s.push(Block::Subheading("Workloads".into()));
    let rows = m
        .workloads
        .iter()
        .map(|w| {
            vec![
                Cell::text(&w.name),
                Cell::text(&w.source),
                Cell::text(&w.hash),
                Cell::text(if w.per_point { "regenerated per point" } else { "one trace for all points" }),
                w.flops.map_or(Cell::text("-"), |f| Cell::Number { value: f, text: format!("{f:.3e}") }),
            ]
        })
        .collect();
    s.push(Block::Table(Table {
        columns: ["workload", "source", "hash", "trace", "FLOP"].map(String::from).to_vec(),
        rows,
    }));
    s
}

fn points_table(st: &Study) -> Section {
    let m = &st.manifest;
    let mut s = Section::new("Points");
    let mut columns = vec!["point".to_string(), "id".to_string()];
    columns.extend(m.params.iter().map(param_heading));
    columns.extend(["workload", "time (µs)", "TFLOP/s", "bottleneck", "status", "config hash"].map(String::from));
    let mut rows = Vec::new();
    for (pt, row) in m.points.iter().zip(&st.runs) {
        for (w, r) in m.workloads.iter().zip(row) {
            let mut cells = vec![Cell::num(pt.index as f64, 0), Cell::text(&pt.id)];
            for p in &m.params {
                let text = pt.values.get(&p.key).cloned().unwrap_or_default();
                cells.push(Cell::Number { value: pt.numeric[&p.key], text });
            }
            cells.push(Cell::text(&w.name));
            match r {
                Some(r) => cells.extend([
                    Cell::num(r.time_us, 3),
                    Cell::num(r.tflops, 2),
                    Cell::text(r.bottleneck().0),
                    Cell::text("done"),
                ]),
                None => cells.extend([Cell::text("-"), Cell::text("-"), Cell::text("-"), Cell::text("missing")]),
            }
            cells.push(Cell::text(&pt.config_hash));
            rows.push(cells);
        }
    }
    s.push(Block::Paragraph("One row per point and workload; click a heading to sort.".into()));
    s.push(Block::Table(Table { columns, rows }));
    s
}

/// Log x when every value is positive and they span at least a factor 8.
fn log_axis(xs: &[f64]) -> bool {
    let (lo, hi) = xs.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| (a.min(x), b.max(x)));
    lo > 0.0 && hi / lo >= 8.0
}

fn plots(st: &Study) -> CliResult<Section> {
    let m = &st.manifest;
    let mut s = Section::new("Metrics against each parameter");
    if m.params.len() > 1 {
        s.push(Block::Paragraph(
            "Each line is a workload; a point is the mean over the finished points with that parameter value (the other parameters averaged).".into(),
        ));
    }
    for p in &m.params {
        for (metric, unit, f) in [("time", "µs", time as fn(&RunView) -> f64), ("throughput", "TFLOP/s", tflops)] {
            let mut plot =
                LinePlot::new(format!("{metric} against {}", p.key), param_heading(p), format!("{metric} ({unit})"));
            let mut xs = Vec::new();
            for (w, wl) in m.workloads.iter().enumerate() {
                let pts = means(st, &p.key, w, f);
                xs.extend(pts.iter().map(|q| q.0));
                plot.series.push(Series::new(wl.name.clone(), pts));
            }
            if xs.is_empty() {
                continue;
            }
            plot.x_log = log_axis(&xs);
            plot.y_log = metric == "time" && plot.series.iter().flat_map(|s| &s.points).all(|q| q.1 > 0.0);
            let fig = Figure::new(format!("{metric} of each workload against {}", p.key), lines::render_svg(&plot))
                .map_err(plot_err(format!("plot of {metric} against {}", p.key)))?;
            s.push(Block::Figure(fig));
        }
    }
    if m.params.len() == 2 {
        let (px, py) = (&m.params[0], &m.params[1]);
        let axis = |key: &str| {
            let mut v: Vec<(f64, String)> = Vec::new();
            for pt in &m.points {
                let x = pt.numeric[key];
                if !v.iter().any(|e| e.0 == x) {
                    v.push((x, pt.values.get(key).cloned().unwrap_or_else(|| x.to_string())));
                }
            }
            v.sort_by(|a, b| a.0.total_cmp(&b.0));
            v
        };
        let (xa, ya) = (axis(&px.key), axis(&py.key));
        for (w, wl) in m.workloads.iter().enumerate() {
            let mut h = Heatmap::new(format!("{}: time (µs)", wl.name), param_heading(px), param_heading(py));
            h.x_values = xa.iter().map(|e| e.1.clone()).collect();
            h.y_values = ya.iter().map(|e| e.1.clone()).collect();
            h.cells = vec![vec![None; xa.len()]; ya.len()];
            for (pt, row) in m.points.iter().zip(&st.runs) {
                if let Some(r) = &row[w] {
                    let c = xa.iter().position(|e| e.0 == pt.numeric[&px.key]).unwrap_or(0);
                    let rr = ya.iter().position(|e| e.0 == pt.numeric[&py.key]).unwrap_or(0);
                    h.cells[rr][c] = Some(r.time_us);
                }
            }
            if h.cells.iter().flatten().any(Option::is_some) {
                let fig =
                    Figure::new(format!("{}: time over {} and {}", wl.name, px.key, py.key), heatmap::render_svg(&h))
                        .map_err(plot_err(format!("heatmap of {}", wl.name)))?;
                s.push(Block::Figure(fig));
            }
        }
    }
    Ok(s)
}

fn sensitivity(st: &Study) -> Section {
    let m = &st.manifest;
    let mut s = Section::new("Sensitivity");
    s.push(Block::Paragraph(
        "For each workload, how far its time moves over each parameter's values: the range (max − min) of the mean time per value, the other parameters averaged, and that range as a share of the workload's mean time. Rank 1 moves the workload most.".into(),
    ));
    let mut rows = Vec::new();
    for (w, wl) in m.workloads.iter().enumerate() {
        let all: Vec<f64> = st.runs.iter().filter_map(|r| r[w].as_ref().map(time)).collect();
        if all.is_empty() {
            continue;
        }
        let mean = all.iter().sum::<f64>() / all.len() as f64;
        let mut ranked: Vec<(&str, f64)> = m
            .params
            .iter()
            .map(|p| {
                let v = means(st, &p.key, w, time);
                let (lo, hi) = v.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), q| (a.min(q.1), b.max(q.1)));
                (p.key.as_str(), if v.is_empty() { 0.0 } else { hi - lo })
            })
            .collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
        for (i, (key, range)) in ranked.iter().enumerate() {
            rows.push(vec![
                Cell::text(&wl.name),
                Cell::num(i as f64 + 1.0, 0),
                Cell::text(*key),
                Cell::num(*range, 3),
                Cell::num(if mean > 0.0 { 100.0 * range / mean } else { 0.0 }, 1),
            ]);
        }
    }
    let columns = ["workload", "rank", "parameter", "time range (µs)", "range (% of mean time)"];
    s.push(Block::Table(Table { columns: columns.map(String::from).to_vec(), rows }));
    s
}

/// Cost per point: what the sweep recorded in the manifest; for a manifest without it, worked
/// out from the point's numeric values, else the base arch with the point's values applied (for
/// keys the study does not vary).
fn costs(st: &Study, expr: &str) -> CliResult<Vec<f64>> {
    let m = &st.manifest;
    let mut base = None;
    let mut out = Vec::new();
    for pt in &m.points {
        if let Some(c) = pt.cost {
            out.push(c);
            continue;
        }
        let mut lookup = |key: &str| -> Result<f64, String> {
            if let Some(v) = pt.numeric.get(key) {
                return Ok(*v);
            }
            if base.is_none() {
                base =
                    Some(gpusim_configs::load(&m.base_arch).map_err(|e| format!("base arch `{}`: {e}", m.base_arch))?);
            }
            let mut arch = base.clone().expect("loaded above");
            for (k, v) in &pt.values {
                arch = arch.with_override_str(k, v).map_err(|e| format!("point {}: {e}", pt.index))?;
            }
            arch.value(key).ok_or_else(|| format!("`{key}` is not a numeric config key (see `gpusim arch explain`)"))
        };
        let c = cost::eval(expr, &mut lookup).map_err(|e| CliError::input(format!("manifest cost: {e}")))?;
        out.push(c);
    }
    Ok(out)
}

fn pareto(st: &Study, expr: &str) -> CliResult<Section> {
    let m = &st.manifest;
    let mut s = Section::new("Pareto front");
    s.push(Block::Paragraph(format!(
        "Cost `{expr}` against time per workload; the front holds the points no other point beats on both (lower or equal cost and time, one of them lower)."
    )));
    let cost = costs(st, expr)?;
    let mut rows = Vec::new();
    for (w, wl) in m.workloads.iter().enumerate() {
        let mut pts: Vec<(f64, f64, usize)> = st
            .runs
            .iter()
            .enumerate()
            .filter_map(|(i, r)| r[w].as_ref().map(|r| (cost[i], r.time_us, m.points[i].index)))
            .collect();
        if pts.is_empty() {
            continue;
        }
        pts.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)).then(a.2.cmp(&b.2)));
        let mut front = Vec::new();
        let mut best = f64::INFINITY;
        for p in &pts {
            if p.1 < best {
                front.push(*p);
                best = p.1;
            }
        }
        let mut plot = LinePlot::new(format!("{}: cost against time", wl.name), format!("cost ({expr})"), "time (µs)");
        plot.series.push(Series::markers("all points", pts.iter().map(|p| (p.0, p.1)).collect()));
        plot.series.push(Series::new("Pareto front", front.iter().map(|p| (p.0, p.1)).collect()));
        plot.x_log = log_axis(&pts.iter().map(|p| p.0).collect::<Vec<_>>());
        let fig = Figure::new(format!("{}: Pareto front of cost and time", wl.name), lines::render_svg(&plot))
            .map_err(plot_err(format!("Pareto plot of {}", wl.name)))?;
        s.push(Block::Figure(fig));
        for p in &front {
            rows.push(vec![
                Cell::text(&wl.name),
                Cell::num(p.2 as f64, 0),
                Cell::Number { value: p.0, text: format!("{:.4e}", p.0) },
                Cell::num(p.1, 3),
            ]);
        }
    }
    s.push(Block::Table(Table {
        columns: ["workload", "point", "cost", "time (µs)"].map(String::from).to_vec(),
        rows,
    }));
    Ok(s)
}

fn kernel_sections(st: &Study) -> CliResult<Vec<Section>> {
    let m = &st.manifest;
    let mut out = Vec::new();
    for (w, wl) in m.workloads.iter().enumerate() {
        let done: Vec<(usize, &RunView)> =
            st.runs.iter().enumerate().filter_map(|(i, r)| r[w].as_ref().map(|r| (i, r))).collect();
        if done.is_empty() {
            continue;
        }
        let chosen: Vec<(usize, &RunView)> = if done.len() <= MAX_KERNEL_RUNS {
            done.clone()
        } else {
            let fastest = done.iter().min_by(|a, b| a.1.time_us.total_cmp(&b.1.time_us)).copied();
            let slowest = done.iter().max_by(|a, b| a.1.time_us.total_cmp(&b.1.time_us)).copied();
            let mut c = vec![done[0]];
            for x in [fastest, slowest].into_iter().flatten() {
                if !c.iter().any(|y| y.0 == x.0) {
                    c.push(x);
                }
            }
            c
        };
        let runs: Vec<(String, &RunView)> =
            chosen.iter().map(|(i, r)| (format!("p{}", m.points[*i].index), *r)).collect();
        let mut s = kernels::section(&format!("Kernels of {}", wl.name), &runs)?;
        if chosen.len() < done.len() {
            s.blocks.insert(
                0,
                Block::Note(format!(
                    "{} of {} finished points shown: the first, the fastest and the slowest.",
                    chosen.len(),
                    done.len()
                )),
            );
        }
        out.push(s);
    }
    Ok(out)
}

fn study_document(st: &Study, dir: &Path) -> CliResult<Document> {
    let m = &st.manifest;
    let mut sections = vec![provenance(st, dir), points_table(st)];
    if st.missing() < st.total() {
        sections.push(plots(st)?);
        sections.push(sensitivity(st));
        if let Some(c) = &m.cost {
            sections.push(pareto(st, &c.expr)?);
        }
        sections.extend(kernel_sections(st)?);
    }
    Ok(Document {
        title: format!("gpusim study: {}", m.study),
        subtitle: format!("{} points × {} workloads on {}", m.points.len(), m.workloads.len(), m.base_arch),
        sections,
    })
}
