//! The parts of a run report (docs/report-schema.md) the HTML reports read, deserialised from
//! its JSON: one reading for a study's point files and for `gpusim run --report` (which
//! serialises its in-memory report first). Unknown fields are ignored; `sol` is absent from
//! schema-2 reports, which then show no speed-of-light section.

use std::collections::BTreeMap;

use serde::Deserialize;

#[derive(Clone, Debug, Deserialize)]
pub struct RunView {
    pub schema_version: u32,
    pub arch: String,
    pub memory_model: String,
    /// Absent from reports before `launch` was added: those ran eagerly.
    #[serde(default)]
    pub launch: Option<String>,
    pub time_us: f64,
    pub tflops: f64,
    pub kernels: Vec<KernelView>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct KernelView {
    pub id: u32,
    pub name: String,
    pub ctas: u64,
    pub cycles: u64,
    pub time_us: f64,
    pub tflops: f64,
    pub stalls: BTreeMap<String, u64>,
    #[serde(default)]
    pub sol: Option<SolView>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct Entry {
    pub name: String,
    pub pct: f64,
}

#[derive(Clone, Debug, Deserialize)]
pub struct SolView {
    pub compute: Vec<Entry>,
    pub memory: Vec<Entry>,
    pub bound: String,
    /// Absent from reports before `limiter` was written (read as no limiter).
    #[serde(default)]
    pub limiter: String,
    #[serde(default)]
    pub limiter_pct: f64,
    pub verdict: String,
    pub roofline: RooflineView,
}

#[derive(Clone, Debug, Deserialize)]
pub struct RooflineView {
    pub flops_per_s: f64,
    pub ceiling: String,
    pub peak_flops_per_s: f64,
    pub levels: Vec<LevelView>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct LevelView {
    pub level: String,
    pub intensity: Option<f64>,
    pub peak_bytes_per_s: f64,
}

impl RunView {
    /// The run's bottleneck, from the speed-of-light verdict of its longest kernel (the one
    /// definition: the study table, `results.csv` and the per-run pages all show it):
    /// `bound:limiter` (`memory:dram`, `compute:tensor`, `latency:long_scoreboard`) and the
    /// limiter's percentage (of peak; of resident warp-cycles for a stall). `-` and 0 without
    /// kernels or SOL.
    pub fn bottleneck(&self) -> (String, f64) {
        self.kernels
            .iter()
            .max_by(|a, b| a.time_us.total_cmp(&b.time_us).then(b.id.cmp(&a.id)))
            .and_then(|k| k.sol.as_ref())
            .map_or_else(
                || ("-".to_string(), 0.0),
                |s| {
                    let label =
                        if s.limiter.is_empty() { s.bound.clone() } else { format!("{}:{}", s.bound, s.limiter) };
                    (label, s.limiter_pct)
                },
            )
    }
}

impl KernelView {
    /// The stall reasons, largest first (ties by name).
    pub fn stalls_sorted(&self) -> Vec<(&str, u64)> {
        let mut v: Vec<(&str, u64)> = self.stalls.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        v
    }
}
