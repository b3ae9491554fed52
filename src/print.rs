//! Formats a [`Report`] for the terminal. Pure: returns a String.

use std::fmt::Write;

use gpusim_sim_core::{KernelReport, Report, sol};

/// `1234567` → `1,234,567`.
pub fn thousands(n: u64) -> String {
    thousands_wide(n as u128)
}

/// [`thousands`] for counts past 2^64.
pub fn thousands_wide(n: u128) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Bytes with a binary unit.
pub fn bytes(n: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 { format!("{n} B") } else { format!("{v:.2} {}", units[u]) }
}

fn time(us: f64) -> String {
    if us >= 1000.0 { format!("{:.3} ms", us / 1000.0) } else { format!("{us:.3} us") }
}

fn kernel(out: &mut String, k: &KernelReport, sm_clock_mhz: f64, streams: bool) {
    let g = k.grid;
    let b = k.block;
    let _ = writeln!(
        out,
        "kernel {}  {}{}  grid ({},{},{})  block ({},{},{})  {} CTAs",
        k.id,
        k.name,
        if streams { format!("  stream {}", k.stream) } else { String::new() },
        g[0],
        g[1],
        g[2],
        b[0],
        b[1],
        b[2],
        thousands(k.ctas)
    );
    let _ = writeln!(
        out,
        "  time         {}  ({} cycles at {:.0} MHz{}, from cycle {})",
        time(k.time_us),
        thousands(k.cycles),
        k.clock_mhz,
        if k.clock_mhz < sm_clock_mhz { ", power-limited under tensor load" } else { "" },
        thousands(k.start_cycle)
    );
    if let Some(s) = &k.sampled {
        let skipped = match s.method.as_str() {
            "loop" => {
                format!(
                    "{} of {} main-loop iterations skipped in every CTA",
                    s.skipped_loop_iterations, s.loop_iterations
                )
            }
            "inner" => format!(
                "the middle of the inner loop skipped in every tile but the first two, in every CTA ({} of {} iterations per tile), {} of the warp instructions",
                s.skipped_loop_iterations,
                s.loop_iterations,
                percent(s.skipped_warp_instructions, k.warp_instructions)
            ),
            "iterations" => format!(
                "the middle of every CTA's longest loop skipped (up to {} of {} iterations), {} of the warp instructions",
                s.skipped_loop_iterations,
                s.loop_iterations,
                percent(s.skipped_warp_instructions, k.warp_instructions)
            ),
            _ => {
                format!("{} of {} CTAs skipped", thousands(s.skipped_ctas), thousands(s.skipped_ctas + s.detailed_ctas))
            }
        };
        let _ = writeln!(
            out,
            "  sampled      {skipped}, {} cycles extrapolated from {} measured {}: ±{:.2}% estimated{}",
            thousands(s.extrapolated_cycles),
            s.measured_waves,
            match s.method.as_str() {
                "loop" => "segments",
                "iterations" | "inner" => "CTAs",
                _ => "waves",
            },
            s.error_pct,
            if s.overlapped {
                " (another kernel overlapped its tail: its timing ignores the skipped cycles)"
            } else {
                ""
            }
        );
    }
    let _ = writeln!(out, "  warp insts   {}  (IPC {:.2} per active SM)", thousands(k.warp_instructions), k.ipc);
    let _ = writeln!(
        out,
        "  throughput   {:.2} TFLOP/s  ({} FLOP, {} on tensor cores)",
        k.tflops,
        thousands(k.flops),
        thousands(k.tensor_flops)
    );
    let o = &k.occupancy;
    let _ = writeln!(
        out,
        "  occupancy    theoretical {:.1}% ({} CTAs/SM × {} warps, limited by {:?}), achieved {:.1}%, {:.2} waves",
        o.theoretical_pct, o.ctas_per_sm, o.warps_per_cta, o.limiter, o.achieved_pct, o.waves
    );
    let m = &k.memory;
    let _ = writeln!(
        out,
        "  memory       L1 {}  shared {}  L2 {}  DRAM {}  ({:.1} GB/s, {:.1}% of peak)",
        bytes(m.traffic.l1.bytes),
        bytes(m.traffic.shared.bytes),
        bytes(m.traffic.l2.bytes),
        bytes(m.traffic.dram.bytes),
        m.dram_gbps,
        m.dram_utilization_pct
    );
    if let Some(w) = &k.steady {
        // GB/s over the window, at the kernel's clock: bytes per cycle × cycles per second.
        let gbps = |b: u64| b as f64 / w.cycles() as f64 * k.clock_mhz * 1e6 / 1e9;
        let _ = writeln!(
            out,
            "  steady       cycles {}..{} (all CTA slots busy): requested {:.1} GB/s  L2 {:.1} GB/s  DRAM {:.1} GB/s",
            thousands(w.start_cycle),
            thousands(w.end_cycle),
            gbps(w.requested_bytes),
            gbps(w.l2_bytes),
            gbps(w.dram_bytes)
        );
    }
    let mut pipes: Vec<(&String, &f64)> = k.pipe_utilization_pct.iter().collect();
    pipes.sort_by(|a, b| b.1.total_cmp(a.1).then(a.0.cmp(b.0)));
    let p: Vec<String> = pipes.iter().map(|(n, v)| format!("{n} {v:.1}%")).collect();
    let _ = writeln!(out, "  pipes        {}", if p.is_empty() { "-".to_string() } else { p.join("  ") });
    let total = k.resident_warp_cycles.max(1) as f64;
    let mut stalls: Vec<(&String, &u64)> = k.stalls.iter().collect();
    stalls.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let s: Vec<String> = stalls.iter().map(|(n, v)| format!("{n} {:.1}%", 100.0 * **v as f64 / total)).collect();
    let _ = writeln!(out, "  warp states  {}", s.join("  "));
    sol(out, k);
    if let Some(g) = &k.groups {
        let untracked = if g.untracked_ctas > 0 {
            format!(" ({} CTAs of further {}s not broken down)", thousands(g.untracked_ctas), g.name)
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "  {:<12} {} ran CTAs; busiest {} {}: {:.1}% of their CTA time ({:.2}x the mean); last to finish: {} {}{untracked}",
            format!("{}s", g.name),
            g.groups.len(),
            g.name,
            g.summary.busiest,
            g.summary.busiest_share_pct,
            g.summary.imbalance,
            g.name,
            g.summary.straggler
        );
    }
    for (op, n) in &k.unknown_opcodes {
        let _ = writeln!(
            out,
            "  warning[W001]: unknown opcode `{op}` ({} warp instructions) ran as the misc class",
            thousands(*n)
        );
    }
}

/// The speed-of-light lines: busy compute units (busiest first), every memory level, verdict.
fn sol(out: &mut String, k: &KernelReport) {
    let mut units: Vec<_> = k.sol.compute.iter().filter(|e| e.pct > 0.0).collect();
    units.sort_by(|a, b| b.pct.total_cmp(&a.pct).then(a.name.cmp(&b.name)));
    let c: Vec<String> = units.iter().map(|e| format!("{} {:.1}%", sol::label(&e.name), e.pct)).collect();
    let m: Vec<String> = k.sol.memory.iter().map(|e| format!("{} {:.1}%", sol::label(&e.name), e.pct)).collect();
    let _ = writeln!(out, "  SOL compute  {}", if c.is_empty() { "-".to_string() } else { c.join("  ") });
    let _ = writeln!(out, "  SOL memory   {}", m.join("  "));
    let _ = writeln!(out, "  verdict      {}", k.sol.verdict);
}

/// The whole report as terminal text.
pub fn report(r: &Report, source: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "gpusim {}: {} at {:.0} MHz, memory model `{}`{}",
        env!("CARGO_PKG_VERSION"),
        r.arch,
        r.sm_clock_mhz,
        r.memory_model,
        if r.launch == "eager" {
            String::new()
        } else {
            format!(", launched as a CUDA graph (sim.launch = {})", r.launch)
        }
    );
    let _ = writeln!(out, "trace: {source}");
    if let Some(p) = &r.partial {
        let cut = if p.cut_short.is_empty() {
            String::new()
        } else {
            let ids: Vec<String> = p.cut_short.iter().map(|k| k.to_string()).collect();
            format!("; cut short, counted up to then: kernel {}", ids.join(", "))
        };
        let _ = writeln!(out, "PARTIAL ({}) at cycle {}{cut}", p.reason, thousands(p.at_cycle));
    }
    // Streams and the critical path are shown only when there are several streams (on one,
    // every kernel is on the path).
    let streams = r.streams.len() > 1;
    for k in &r.kernels {
        out.push('\n');
        kernel(&mut out, k, r.sm_clock_mhz, streams);
    }
    if streams {
        out.push('\n');
        for st in &r.streams {
            let _ = writeln!(
                out,
                "stream {:<4} {} kernel(s), busy {} ({} cycles, cycle {} to {})",
                st.stream,
                st.kernels,
                time(st.busy_us),
                thousands(st.busy_cycles),
                thousands(st.first_cycle),
                thousands(st.last_cycle)
            );
        }
    }
    if streams {
        let path: Vec<String> = r.critical_path.iter().map(|k| k.to_string()).collect();
        let _ = writeln!(out, "critical path: kernel {}", path.join(" -> "));
    }
    for g in &r.cta_groups {
        let ids: Vec<String> = g.kernels.iter().map(|k| k.to_string()).collect();
        let _ = writeln!(
            out,
            "\n{} imbalance over kernel {}: busiest {} {} with {:.1}% of the CTA time of {} {}s ({:.2}x the mean); \
             straggler {} {} (its last CTA ended at cycle {})",
            g.name,
            ids.join(", "),
            g.name,
            g.summary.busiest,
            g.summary.busiest_share_pct,
            g.groups,
            g.name,
            g.summary.imbalance,
            g.name,
            g.summary.straggler,
            thousands(g.summary.straggler_end_cycle)
        );
    }
    let _ = writeln!(
        out,
        "\ntotal: {} ({} cycles), {} warp instructions, {:.2} TFLOP/s over {} kernel(s)",
        time(r.time_us),
        thousands(r.total_cycles),
        thousands(r.warp_instructions),
        r.tflops,
        r.kernels.len()
    );
    out
}

/// `part` as a percentage of `whole`, one decimal.
fn percent(part: u64, whole: u64) -> String {
    format!("{:.1}%", if whole > 0 { 100.0 * part as f64 / whole as f64 } else { 0.0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_numbers() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(3 * 1024 * 1024), "3.00 MiB");
    }
}
