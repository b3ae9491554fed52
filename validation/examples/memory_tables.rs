//! Prints the Markdown tables of docs/memory-model.md: simulated pointer-chase latency against
//! footprint beside the published curves (A100 80GB from RRZE, H800 PCIe from HPMLL), and every
//! latency and bandwidth case of the reference data against its simulation.
//!
//! ```sh
//! cargo run --release -p gpusim-validation --example memory_tables
//! ```

use std::time::Instant;

use gpusim_validation::memory_cases::{
    Plan, arch_for, chase_for_footprint, latency_sweep, memory_plans, not_applicable_table, results_table, run_cases,
};
use gpusim_validation::reference::{Case, Kind, load_default};

/// A published point or plateau of a latency curve: footprints `lo..=hi` bytes.
struct Published {
    lo: u64,
    hi: u64,
    /// The value, or a range read from a case's notes.
    text: String,
    id: &'static str,
}

const KB: f64 = 1024.0;

fn kb(x: f64) -> u64 {
    (x * KB).round() as u64
}

fn value(cases: &[Case], id: &str) -> String {
    let c = cases.iter().find(|c| c.id == id).unwrap_or_else(|| panic!("case {id} is missing"));
    format!("{}", c.value)
}

fn size(b: u64) -> String {
    let (v, u) = if b >= 1 << 30 {
        (b as f64 / (1u64 << 30) as f64, "GiB")
    } else if b >= 1 << 20 {
        (b as f64 / (1u64 << 20) as f64, "MiB")
    } else {
        (b as f64 / 1024.0, "KiB")
    };
    if v.fract() == 0.0 { format!("{v:.0} {u}") } else { format!("{v:.1} {u}") }
}

fn curve(title: &str, preset: &str, mhz: f64, published: &[Published], extra: &[u64]) {
    let arch = arch_for(preset, Some(mhz)).unwrap_or_else(|e| panic!("{e}"));
    let mut footprints: Vec<u64> = (14..=31).map(|p| 1u64 << p).collect();
    footprints.extend_from_slice(extra);
    footprints.sort_unstable();
    let t0 = Instant::now();
    let sweep = latency_sweep(&arch, &footprints);
    let secs = t0.elapsed().as_secs_f64();
    println!("#### {title}\n");
    println!("`{preset}` at {mhz:.0} MHz (L2 {} in 2 partitions).\n", size(arch.l2.size.0));
    println!("| footprint | chain (elements × stride) | simulated cycles | published cycles | case |");
    println!("|---:|---|---:|---:|---|");
    for (&f, &(_, cycles)) in footprints.iter().zip(&sweep) {
        let p = chase_for_footprint(&arch, f);
        let chain = format!("{} × {} B", p.accesses_per_pass(), p.stride_bytes);
        let (text, id) = published
            .iter()
            .find(|p| p.lo <= f && f <= p.hi)
            .map_or(("–".to_string(), String::new()), |p| (p.text.clone(), format!("`{}`", p.id)));
        let mark = if extra.contains(&f) { " (published point)" } else { "" };
        println!("| {}{mark} | {chain} | {cycles:.1} | {text} | {id} |", size(f));
    }
    println!("\n({} footprints simulated in {secs:.1} s.)\n", footprints.len());
}

fn main() {
    let cases = load_default().unwrap_or_else(|e| panic!("{e}"));

    println!("### Latency against footprint\n");
    let a100 = [
        Published { lo: kb(2.0), hi: kb(4.8), text: value(&cases, "lat-a10080-l1-rrze"), id: "lat-a10080-l1-rrze" },
        Published {
            lo: kb(223.0),
            hi: kb(16008.0),
            text: value(&cases, "lat-a10080-l2-rrze"),
            id: "lat-a10080-l2-rrze",
        },
        Published {
            lo: kb(25046.8),
            hi: kb(31329.8),
            text: value(&cases, "lat-a10080-l2far-rrze"),
            id: "lat-a10080-l2far-rrze",
        },
        Published { lo: kb(49_000.0), hi: kb(120_000.0), text: "515–540".into(), id: "lat-a10080-l2-rrze (notes)" },
        Published {
            lo: kb(1305397.9),
            hi: kb(1305397.9),
            text: value(&cases, "lat-a10080-dram-rrze"),
            id: "lat-a10080-dram-rrze",
        },
    ];
    curve("A100 80GB (RRZE gpu-latency)", "a100-sxm4-80gb", 1410.0, &a100, &[kb(1305397.9)]);

    let h800 = [
        Published {
            lo: kb(2.0),
            hi: kb(203.0),
            text: value(&cases, "lat-h800pcie-l1-hpmll"),
            id: "lat-h800pcie-l1-hpmll",
        },
        Published {
            lo: kb(330.0),
            hi: kb(19185.0),
            text: value(&cases, "lat-h800pcie-l2-hpmll"),
            id: "lat-h800pcie-l2-hpmll",
        },
        Published { lo: kb(26_000.0), hi: kb(92_000.0), text: "325–638".into(), id: "lat-h800pcie-l2-hpmll (notes)" },
        Published {
            lo: kb(189907.0),
            hi: kb(189907.0),
            text: value(&cases, "lat-h800pcie-dram-hpmll"),
            id: "lat-h800pcie-dram-hpmll",
        },
    ];
    curve("H800 PCIe (HPMLL random_latency)", "h800-pcie", 1755.0, &h800, &[kb(189907.0)]);

    let plans = memory_plans(&cases);
    let run: Vec<&Case> = plans.iter().filter(|(_, p)| matches!(p, Plan::Run { .. })).map(|(c, _)| *c).collect();
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let t0 = Instant::now();
    let results = run_cases(&run, threads);
    let secs = t0.elapsed().as_secs_f64();
    let kind_of = |id: &str| cases.iter().find(|c| c.id == id).map(|c| c.kind.clone());
    let (lat, bw): (Vec<_>, Vec<_>) = results.into_iter().partition(|r| kind_of(&r.id) == Some(Kind::Latency));
    println!("### Latency cases\n\n{}", results_table(&lat));
    println!("### Bandwidth cases\n\n{}", results_table(&bw));
    println!("({} cases simulated in {secs:.1} s on {threads} threads.)\n", lat.len() + bw.len());
    println!("### Cases not simulated\n\n{}", not_applicable_table(&plans));
}
