//! The per-kernel part of an HTML report: a stall-reason stack, a roofline with the kernels'
//! points and the speed-of-light table with each kernel's verdict. Shared by `gpusim run
//! --report` (one run) and `gpusim report` (one run per study point and workload).

use gpusim_reports::bars::{self, Bar, StackedBars};
use gpusim_reports::doc::{Block, Cell, Figure, Section, Table};
use gpusim_reports::{lines, roofline};
use gpusim_sim_core::sol::label;

use super::view::{KernelView, LevelView, RunView};
use crate::error::{CliError, CliResult};

/// Kernels shown per run: the longest ones (a trace of thousands of kernels would make the
/// page unreadable); the section says when some were left out.
pub const MAX_KERNELS: usize = 12;

fn plot_err(what: &str) -> impl Fn(gpusim_reports::Error) -> CliError + '_ {
    move |e| CliError::input(format!("{what}: {e}"))
}

/// The kernels shown of a run, longest first, and how many were left out.
fn shown(r: &RunView) -> (Vec<&KernelView>, usize) {
    let mut ks: Vec<&KernelView> = r.kernels.iter().collect();
    ks.sort_by(|a, b| b.time_us.total_cmp(&a.time_us).then(a.id.cmp(&b.id)));
    let left = ks.len().saturating_sub(MAX_KERNELS);
    ks.truncate(MAX_KERNELS);
    (ks, left)
}

/// The section for `runs` (label, run), e.g. one per study point of a workload.
pub fn section(heading: &str, runs: &[(String, &RunView)]) -> CliResult<Section> {
    let mut s = Section::new(heading);
    let many = runs.len() > 1;
    let name = |run: &str, k: &KernelView| {
        if many { format!("{run} · {} #{}", k.name, k.id) } else { format!("{} #{}", k.name, k.id) }
    };
    let mut bars = StackedBars::new(format!("{heading}: warp states"), "share of resident warp-cycles");
    let mut rows = Vec::new();
    let mut points = Vec::new();
    let mut ceilings: Option<(String, f64, Vec<LevelView>)> = None;
    for (run, r) in runs {
        let (ks, left) = shown(r);
        if left > 0 {
            s.push(Block::Note(format!("{run}: the {left} shortest of {} kernels are not shown", r.kernels.len())));
        }
        for k in ks {
            let segments: Vec<(String, f64)> =
                k.stalls_sorted().iter().map(|(n, v)| (n.to_string(), *v as f64)).collect();
            if segments.iter().any(|x| x.1 > 0.0) {
                bars.bars.push(Bar { label: name(run, k), segments });
            }
            let Some(sol) = &k.sol else { continue };
            let mut row = vec![Cell::text(name(run, k)), Cell::num(k.time_us, 3)];
            row.extend(sol.compute.iter().chain(&sol.memory).map(|e| Cell::num(e.pct, 1)));
            row.push(Cell::text(&sol.verdict));
            rows.push((row, sol));
            let rf = &sol.roofline;
            // A kernel's point is against the outermost level that moved bytes (DRAM, the
            // classic roofline, unless the data stayed on chip).
            if let Some(l) = rf.levels.iter().rev().find(|l| l.intensity.is_some())
                && rf.flops_per_s > 0.0
            {
                points.push((
                    format!("{} (over {})", name(run, k), label(&l.level)),
                    l.intensity.unwrap_or(0.0),
                    rf.flops_per_s,
                ));
            }
            // The highest compute ceiling among the runs (a study's points differ in their
            // chips): no kernel's point lies above its roof.
            if rf.peak_flops_per_s > ceilings.as_ref().map_or(0.0, |c| c.1) {
                ceilings = Some((rf.ceiling.clone(), rf.peak_flops_per_s, rf.levels.clone()));
            }
        }
    }
    if rows.is_empty() {
        s.push(Block::Paragraph("No speed-of-light data: the reports predate schema 3.".into()));
    } else {
        let first = rows[0].1;
        let mut columns = vec!["kernel".to_string(), "time (µs)".to_string()];
        columns.extend(first.compute.iter().chain(&first.memory).map(|e| format!("{} %", label(&e.name))));
        columns.push("verdict".into());
        s.push(Block::Subheading("Speed of light (% of peak)".into()));
        s.push(Block::Table(Table { columns, rows: rows.into_iter().map(|r| r.0).collect() }));
    }
    if !bars.bars.is_empty() {
        s.push(Block::Figure(
            Figure::new("Warp states per kernel (Nsight Compute stall reasons)", bars::render_svg(&bars))
                .map_err(plot_err(heading))?,
        ));
    }
    if let Some((ceiling, peak, levels)) = ceilings
        && !points.is_empty()
    {
        let rf = roofline::Roofline {
            title: format!("{heading}: roofline"),
            compute: (label(&ceiling).to_string(), peak),
            levels: levels
                .iter()
                .filter(|l| l.peak_bytes_per_s > 0.0)
                .map(|l| (label(&l.level).to_string(), l.peak_bytes_per_s))
                .collect(),
            points,
        };
        let plot = roofline::plot(&rf).map_err(plot_err(heading))?;
        let caption = format!(
            "Roofline: each kernel's FLOP/s against its intensity over the bytes of the outermost level that moved any (DRAM unless the data stayed on chip); ceilings of {} and of each memory level of the run with the highest compute ceiling",
            label(&ceiling)
        );
        s.push(Block::Figure(Figure::new(caption, lines::render_svg(&plot)).map_err(plot_err(heading))?));
    } else {
        s.push(Block::Paragraph("No roofline: no kernel shown executed a FLOP.".into()));
    }
    Ok(s)
}
