//! Bounded memory on a long trace (issue 12): a flat Accel-Sim trace streams through
//! `gpusim run`, so the run's peak RSS does not grow with the trace's length and stays under
//! 256 MiB.
//!
//! Sizing: the debug binary simulates about a million warp instructions per second, so the
//! long trace is about 200 MB of text (40,960 CTAs, 5.2 M warp instructions), not the issue's
//! 10 GB. What proves streaming is the comparison: the same kernel at a quarter of the length
//! (10,240 CTAs, already about five waves of the H100's 2,112 resident CTA slots, so every slot
//! has been refilled many times) peaks at the same RSS, within a small allowance for the
//! allocator. Memory that grew with the CTAs read would show as four times the trace's size.
//!
//! Each run is its own child, reaped with `wait4`, whose `ru_maxrss` is that child's own peak.

#![cfg(target_os = "linux")]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

const WARPS: u32 = 4;
/// FFMAs per warp between the loads; each warp runs 2 groups then EXIT.
const FFMAS: u32 = 14;

/// Writes a one-kernel flat Accel-Sim trace of `ctas` CTAs into `dir`; its warp instructions.
fn write_trace(dir: &Path, ctas: u32) -> u64 {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("kernelslist.g"), "kernel-1.traceg\n").unwrap();
    let f = std::fs::File::create(dir.join("kernel-1.traceg")).unwrap();
    let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
    write!(
        w,
        "-kernel name = long_ffma\n-kernel id = 1\n-grid dim = ({ctas},1,1)\n-block dim = ({},1,1)\n-shmem = 0\n\
         -nregs = 32\n-binary version = 90\n-cuda stream id = 0\n-shmem base_addr = 0x0\n\
         -local mem base_addr = 0x0\n-nvbit version = 1.5.5\n-accelsim tracer version = 5\n-enable lineinfo = 0\n\n\
         #traces format = PC mask dest_num [reg_dests] opcode src_num [reg_srcs] mem_width [adrrescompress?] [mem_addresses] immediate\n\n",
        WARPS * 32
    )
    .unwrap();
    let per_warp = 2 * (1 + FFMAS) + 1;
    for c in 0..ctas {
        write!(w, "#BEGIN_TB\n\nthread block = {c},0,0\n\n").unwrap();
        for warp in 0..WARPS {
            write!(w, "warp = {warp}\ninsts = {per_warp}\n").unwrap();
            let mut pc = 0u32;
            for g in 0..2u64 {
                let addr = 0x7f00_0000_0000u64 + ((c as u64 * WARPS as u64 + warp as u64) * 2 + g) * 128;
                writeln!(w, "{pc:04x} ffffffff 1 R4 LDG.E 1 R2 4 1 0x{addr:x} 4 0").unwrap();
                pc += 16;
                for i in 0..FFMAS {
                    writeln!(w, "{pc:04x} ffffffff 1 R{} FFMA 3 R4 R5 R{} 0 0", 8 + i % 8, 8 + i % 8).unwrap();
                    pc += 16;
                }
            }
            writeln!(w, "{pc:04x} ffffffff 0 EXIT 0 0 0").unwrap();
        }
        w.write_all(b"#END_TB\n\n").unwrap();
    }
    w.flush().unwrap();
    ctas as u64 * WARPS as u64 * per_warp as u64
}

/// Runs `gpusim run` on `dir`; the warp instructions it reports and its peak RSS in bytes.
// The child is reaped by `wait4` (for its rusage), which clippy does not see.
#[allow(clippy::zombie_processes)]
fn run(dir: &Path) -> (u64, u64) {
    let json = dir.join("report.json");
    let child = Command::new(env!("CARGO_BIN_EXE_gpusim"))
        .args(["--quiet", "run", "--arch", "h100-sxm5-80gb", "--json"])
        .arg(&json)
        .arg(dir)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: a zeroed rusage is a valid plain C struct; `pid` is this test's unreaped child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid, "wait4: {}", std::io::Error::last_os_error());
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "gpusim run failed on {}", dir.display());
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let insts = report["warp_instructions"].as_u64().expect("warp_instructions in the report");
    (insts, usage.ru_maxrss as u64 * 1024)
}

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("gpusim-long-trace-{name}-{}", std::process::id()))
}

#[test]
fn a_long_flat_accelsim_trace_streams_in_bounded_memory() {
    const MIB: u64 = 1024 * 1024;
    let (short, long) = (tmp("1x"), tmp("4x"));
    let want_short = write_trace(&short, 10_240);
    let (got_short, rss_short) = run(&short);
    let _ = std::fs::remove_dir_all(&short);
    let want_long = write_trace(&long, 40_960);
    let size = std::fs::metadata(long.join("kernel-1.traceg")).unwrap().len();
    let (got_long, rss_long) = run(&long);
    let _ = std::fs::remove_dir_all(&long);
    assert_eq!(got_short, want_short, "the whole short trace was simulated");
    assert_eq!(got_long, want_long, "the whole long trace was simulated");
    assert!(size > 150 * MIB, "the long trace is {size} bytes");
    eprintln!(
        "peak RSS: {} MiB at {want_short} warp instructions, {} MiB at {want_long} ({} MiB of trace)",
        rss_short / MIB,
        rss_long / MIB,
        size / MIB
    );
    assert!(rss_long <= 256 * MIB, "peak RSS {} MiB over 256 MiB on a {} MiB trace", rss_long / MIB, size / MIB);
    assert!(
        rss_long <= rss_short + 16 * MIB,
        "peak RSS grows with the trace: {} MiB at 1x, {} MiB at 4x",
        rss_short / MIB,
        rss_long / MIB
    );
}
