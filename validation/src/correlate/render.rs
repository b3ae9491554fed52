//! Rendering a [`Correlation`] as terminal text, Markdown, CSV and JSON: printers kept apart
//! from the plain data they format.

use super::*;

/// A value with 4 significant digits at most, without exponent for the ranges the data has.
pub fn num(v: f64) -> String {
    if !v.is_finite() {
        return format!("{v}");
    }
    let a = v.abs();
    if a >= 1000.0 {
        format!("{v:.0}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 10.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

fn pct(v: Option<f64>) -> String {
    v.map_or("–".into(), |e| format!("{:.1}%", 100.0 * e))
}

fn signed_pct(v: Option<f64>) -> String {
    v.map_or("–".into(), |e| format!("{:+.1}%", 100.0 * e))
}

fn corr(v: Option<f64>) -> String {
    v.map_or("–".into(), |c| format!("{c:.3}"))
}

fn clock(v: Option<f64>) -> String {
    v.map_or("–".into(), |c| format!("{c:.0}"))
}

/// Markdown table: header row, alignment row (`r` right-aligned), rows.
fn md_table(header: &[&str], align: &str, rows: &[Vec<String>]) -> String {
    let esc = |s: &str| s.replace('|', "\\|").replace('\n', " ");
    let head: Vec<String> = header.iter().map(|h| esc(h)).collect();
    let mut s = format!("| {} |\n|", head.join(" | "));
    for (i, _) in header.iter().enumerate() {
        s += if align.as_bytes().get(i) == Some(&b'r') { "---:|" } else { "---|" };
    }
    s.push('\n');
    for r in rows {
        s += &format!("| {} |\n", r.iter().map(|c| esc(c)).collect::<Vec<_>>().join(" | "));
    }
    s
}

/// Plain-text table, columns padded (right-aligned where `align` says `r`).
fn text_table(header: &[&str], align: &str, rows: &[Vec<String>]) -> String {
    let n = header.len();
    let mut w: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate().take(n) {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let mut s = text_line(&w, align, &header.iter().map(|h| h.to_string()).collect::<Vec<_>>());
    for r in rows {
        s += &text_line(&w, align, r);
    }
    s
}

/// One line of a text table with column widths `w` (a longer cell pushes the rest along).
fn text_line(w: &[usize], align: &str, cells: &[String]) -> String {
    let mut s = String::new();
    for (i, c) in cells.iter().enumerate() {
        let pad = w[i].saturating_sub(c.chars().count());
        let right = align.as_bytes().get(i) == Some(&b'r');
        if i > 0 {
            s += "  ";
        }
        if right {
            s += &" ".repeat(pad);
            s += c;
        } else {
            s += c;
            if i + 1 < cells.len() {
                s += &" ".repeat(pad);
            }
        }
    }
    s.push('\n');
    s
}

/// The case table of [`Correlation::text`] printed a line at a time as cases finish (`gpusim
/// correlate` on a terminal or a pipe, so that a long correlation shows its rows as it goes):
/// the same columns, with widths fixed in advance from the cases instead of from the results.
pub struct StreamTable {
    w: Vec<usize>,
}

impl StreamTable {
    /// Widths for `cases`' ids, kinds, metrics and trusts, and room for presets and numbers.
    pub fn new<'a>(cases: impl IntoIterator<Item = &'a Case>) -> StreamTable {
        let cases: Vec<&Case> = cases.into_iter().collect();
        let widest = |f: &dyn Fn(&Case) -> usize| cases.iter().map(|c| f(c)).max().unwrap_or(0);
        let mut w: Vec<usize> = CASE_HEADER.iter().map(|h| h.chars().count()).collect();
        w[0] = w[0].max(widest(&|c| c.id.chars().count()));
        w[1] = w[1].max(widest(&|c| c.kind.to_string().len()));
        w[2] = w[2].max("h100-sxm5-80gb-calibrated".len());
        w[3] = w[3].max("1980 / 1980".len());
        w[4] = w[4].max(widest(&|c| c.metric.to_string().len()));
        for col in [5, 6] {
            w[col] = w[col].max("123456".len());
        }
        w[7] = w[7].max("+100.0%".len());
        StreamTable { w }
    }

    pub fn header(&self) -> String {
        text_line(&self.w, CASE_ALIGN, &CASE_HEADER.map(String::from))
    }

    /// The row's line, or `None` for a case that was not simulated (those are listed after the
    /// table, with their reasons).
    pub fn line(&self, r: &CaseRow) -> Option<String> {
        (r.status == Status::Simulated).then(|| text_line(&self.w, CASE_ALIGN, &case_cells(r)))
    }
}

/// A simulated case's cells in the case table.
fn case_cells(r: &CaseRow) -> Vec<String> {
    vec![
        r.id.clone(),
        r.kind.clone(),
        r.preset.clone().unwrap_or_default(),
        format!("{} / {}", clock(r.clock_simulated_mhz), clock(r.clock_measured_mhz)),
        r.metric.clone(),
        num(r.published),
        r.simulated.map_or("–".into(), num),
        signed_pct(r.error),
        if r.disputed.is_some() { format!("{}, disputed", r.trust) } else { r.trust.clone() },
    ]
}

const CASE_HEADER: [&str; 9] =
    ["case", "kind", "preset", "clock MHz sim/meas", "metric", "published", "simulated", "error", "trust"];
const CASE_ALIGN: &str = "lllrlrrrl";
const STATS_HEADER: [&str; 9] = [
    "kind",
    "cases",
    "MAPE",
    "median |err|",
    "max |err|",
    "bias",
    "Pearson (log)",
    "Spearman (log)",
    "weighted |ln(sim/meas)|",
];
const STATS_ALIGN: &str = "lrrrrrrrr";

impl Correlation {
    fn simulated(&self) -> impl Iterator<Item = &CaseRow> {
        self.cases.iter().filter(|r| r.status == Status::Simulated)
    }

    fn not_simulated(&self) -> impl Iterator<Item = &CaseRow> {
        self.cases.iter().filter(|r| r.status != Status::Simulated)
    }

    fn case_rows(&self) -> Vec<Vec<String>> {
        self.simulated().map(case_cells).collect()
    }

    fn skipped_rows(&self) -> Vec<Vec<String>> {
        self.not_simulated()
            .map(|r| {
                vec![
                    r.id.clone(),
                    r.kind.clone(),
                    r.hardware.clone(),
                    match r.status {
                        Status::Failed => "failed".into(),
                        _ => "skipped".into(),
                    },
                    r.reason.clone().unwrap_or_default(),
                ]
            })
            .collect()
    }

    fn stats_rows(&self) -> Vec<Vec<String>> {
        let row = |name: &str, s: &crate::stats::Stats| {
            vec![
                name.to_string(),
                s.n.to_string(),
                pct(s.mape),
                pct(s.median_abs_error),
                pct(s.max_abs_error),
                signed_pct(s.mean_error),
                corr(s.pearson_log),
                corr(s.spearman_log),
                s.weighted_abs_log_error.map_or("–".into(), |v| format!("{v:.4}")),
            ]
        };
        let mut rows: Vec<Vec<String>> = self.summary.by_group.iter().map(|(g, s)| row(g, s)).collect();
        if self.summary.by_group.len() != 1 {
            rows.push(row("all", &self.summary.overall));
        }
        rows
    }

    fn worst_rows(&self) -> Vec<Vec<String>> {
        self.summary.worst.iter().map(|w| vec![w.id.clone(), w.group.clone(), signed_pct(Some(w.error))]).collect()
    }

    fn counts(&self) -> (usize, usize, usize) {
        let c = |s: Status| self.cases.iter().filter(|r| r.status == s).count();
        (c(Status::Simulated), c(Status::Skipped), c(Status::Failed))
    }

    /// The report as Markdown: cases, cases not simulated, statistics, worst cases, provenance.
    /// Holds no wall times, so it is the same for any thread count.
    pub fn markdown(&self) -> String {
        let p = &self.provenance;
        let (sim, skip, fail) = self.counts();
        let mut s = self.partial_banner().to_string();
        s += &format!(
            "{} cases: {sim} simulated, {skip} skipped, {fail} failed. Error = (simulated − published) / published.\n\n",
            self.cases.len()
        );
        s += &md_table(&CASE_HEADER, CASE_ALIGN, &self.case_rows());
        for r in self.simulated().filter(|r| r.disputed.is_some()) {
            s += &format!("\nDisputed: {} {}.\n", r.id, r.disputed.as_deref().unwrap_or(""));
        }
        s += "\n### Statistics\n\n";
        s += &md_table(&STATS_HEADER, STATS_ALIGN, &self.stats_rows());
        s += "\nMAPE: mean |error|; bias: mean signed error; correlations of ln(simulated) against \
              ln(published); weighted: Σ w·|ln(sim/published)| / Σ w with trust weights high 1, medium 0.5, low 0.25.\n";
        if !self.summary.worst.is_empty() {
            s += "\n### Worst cases\n\n";
            s += &md_table(&["case", "kind", "error"], "llr", &self.worst_rows());
        }
        if skip + fail > 0 {
            s += "\n### Not simulated\n\n";
            s += &md_table(&["case", "kind", "hardware", "status", "reason"], "lllll", &self.skipped_rows());
        }
        s += "\n### Provenance\n\n";
        s += &format!("- gpusim {} (git {})\n", p.gpusim_version, p.git_hash);
        s += &format!("- `--arch {}`, kinds: {}, memory model `{}`\n", p.arch, p.kinds.join(", "), p.memory_model);
        if let Some(o) = &p.sampled {
            s += &format!("- long kernels sampled (`--sample {o}`): each within its error estimate of full detail\n");
        }
        s += &format!("- data: {}\n", p.data_files.iter().map(|d| format!("`{d}`")).collect::<Vec<_>>().join(", "));
        for (preset, h) in &p.config_hashes {
            s += &format!("- config `{preset}`: {h}\n");
        }
        s += "- per case (recipe, trace hash, clocks): the JSON report (`--json`)\n";
        s
    }

    /// The banner of an interrupted correlation, empty otherwise.
    pub fn partial_banner(&self) -> &'static str {
        if self.interrupted { "PARTIAL: interrupted; the cases not yet run are listed as skipped\n\n" } else { "" }
    }

    /// The report for a terminal: the same content as [`Correlation::markdown`] as aligned text.
    pub fn text(&self) -> String {
        let mut s = self.partial_banner().to_string();
        s += &text_table(&CASE_HEADER, CASE_ALIGN, &self.case_rows());
        s + &self.text_after_cases()
    }

    /// [`Correlation::text`] after its case table: for a caller that printed the table already,
    /// row by row ([`StreamTable`]); the caller says PARTIAL itself when interrupted.
    pub fn text_after_cases(&self) -> String {
        let p = &self.provenance;
        let (sim, skip, fail) = self.counts();
        let mut s = String::new();
        if skip + fail > 0 {
            s += "\nnot simulated:\n";
            s += &text_table(&["case", "kind", "hardware", "status", "reason"], "lllll", &self.skipped_rows());
        }
        s += "\n";
        s += &text_table(&STATS_HEADER, STATS_ALIGN, &self.stats_rows());
        if !self.summary.worst.is_empty() {
            s += "\nworst cases:\n";
            s += &text_table(&["case", "kind", "error"], "llr", &self.worst_rows());
        }
        s += &format!(
            "\n{} cases: {sim} simulated, {skip} skipped, {fail} failed, in {:.1} s on {} thread(s)\n",
            self.cases.len(),
            self.wall_s,
            self.threads
        );
        s += &format!("gpusim {} (git {}), --arch {}", p.gpusim_version, p.git_hash, p.arch);
        for (preset, h) in &p.config_hashes {
            s += &format!(", {preset} {h}");
        }
        if let Some(o) = &p.sampled {
            s += &format!(", sampled ({o})");
        }
        s.push('\n');
        s
    }

    /// One line per case (every status), no wall times.
    pub fn csv(&self) -> String {
        let q = |s: &str| {
            if s.contains([',', '"', '\n']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.to_string() }
        };
        let o = |v: Option<f64>| v.map_or(String::new(), |x| format!("{x}"));
        let mut s = String::from(
            "id,kind,status,hardware,preset,trust,metric,published,simulated,error_pct,clock_simulated_mhz,\
             clock_measured_mhz,config_hash,recipe_hash,trace_hash,location,reason\n",
        );
        for r in &self.cases {
            let status = match r.status {
                Status::Simulated => "simulated",
                Status::Skipped => "skipped",
                Status::Failed => "failed",
            };
            let cells = [
                q(&r.id),
                q(&r.kind),
                status.to_string(),
                q(&r.hardware),
                q(r.preset.as_deref().unwrap_or("")),
                q(&r.trust),
                q(&r.metric),
                format!("{}", r.published),
                o(r.simulated),
                o(r.error.map(|e| 100.0 * e)),
                o(r.clock_simulated_mhz),
                o(r.clock_measured_mhz),
                q(r.config_hash.as_deref().unwrap_or("")),
                q(r.recipe_hash.as_deref().unwrap_or("")),
                q(r.trace_hash.as_deref().unwrap_or("")),
                q(&r.location),
                q(r.reason.as_deref().unwrap_or("")),
            ];
            s += &cells.join(",");
            s.push('\n');
        }
        s
    }
}
