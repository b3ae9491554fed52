//! The measurement harness's kernels (validation/cuda/*.cu) compile with NVRTC, and their SASS
//! holds the instructions each is meant to exercise: the pointer chase a chain of dependent
//! `LDG.E.64` (plain, and `.STRONG.GPU` for `ld.global.cg`) between two clock reads, STREAM
//! `LDG.E.128`/`STG.E.128`, the L2 read `LDG.E.128.STRONG.GPU`, shared memory `STS` then `LDS`,
//! `HMMA.16816`/`HMMA.1688`/`IMMA.16832` per type, `HGMMA.64x256x16` on sm_90a (alone, and beside
//! 16 independent `MUFU.EX2` in the overlap kernel), the e4m3 fill's
//! `F2FP.SATFINITE.E4M3.F32` on sm_90.
//!
//! Compiled on the CPU like the CUDA twins (workloads/tests/cuda_twins.rs): `scripts/sass.py`
//! with the NVRTC and nvdisasm wheels in `$GPUSIM_WHEEL_CACHE` (installed by scripts/test.sh),
//! with the options the harness uses at run time (`--gpu-architecture=sm_XY[a] -std=c++17`).
//! Without the wheels these tests fail with a message that says how to install them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

use gpusim_validation::measure::kernels::{self, Source};
use gpusim_validation::measure::suite::MmaType;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

fn wheel_cache() -> PathBuf {
    match std::env::var_os("GPUSIM_WHEEL_CACHE") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => {
            let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/root"));
            home.join(".cache/gpusim-wheels")
        }
    }
}

/// SASS of `src` for `arch`, compiled once per test binary.
fn sass(src: &Source, arch: &str) -> String {
    static CACHE: OnceLock<Mutex<BTreeMap<(String, String), String>>> = OnceLock::new();
    let key = (src.path.to_string(), arch.to_string());
    if let Some(s) = CACHE.get_or_init(Default::default).lock().unwrap().get(&key) {
        return s.clone();
    }
    let root = repo_root();
    let cache = wheel_cache();
    let out = Command::new("python3")
        .arg(root.join("scripts/sass.py"))
        .arg("--cache")
        .arg(&cache)
        .arg("--arch")
        .arg(arch)
        .arg(root.join(src.path))
        .output()
        .unwrap_or_else(|e| panic!("cannot run python3 (needed for scripts/sass.py): {e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let text = match out.status.code() {
        Some(0) => String::from_utf8(out.stdout).expect("SASS is UTF-8"),
        Some(2) => panic!(
            "\n{stderr}\nthe CUDA wheels are not in {} (set GPUSIM_WHEEL_CACHE, or run `bash scripts/test.sh`, which \
             installs them). This test does not skip without them.\n",
            cache.display()
        ),
        c => panic!("scripts/sass.py failed on {} for {arch} (exit {c:?}):\n{stderr}", src.path),
    };
    CACHE.get_or_init(Default::default).lock().unwrap().insert(key, text.clone());
    text
}

/// One SASS instruction: optional predicate, mnemonic, operands.
#[derive(Clone, Debug)]
struct Inst {
    op: String,
    operands: Vec<String>,
}

/// The instructions of each function of a disassembly, by function name.
fn functions(sass: &str) -> BTreeMap<String, Vec<Inst>> {
    let mut out: BTreeMap<String, Vec<Inst>> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in sass.lines() {
        let t = line.trim();
        if let Some(name) = t.strip_prefix(".text.").and_then(|r| r.strip_suffix(':')) {
            current = Some(name.to_string());
            out.entry(name.to_string()).or_default();
            continue;
        }
        let Some(f) = &current else { continue };
        // "/*0120*/  @!P0 LDG.E.64 R4, desc[UR4][R4.64] ;"
        let Some(rest) = t.strip_prefix("/*").and_then(|r| r.split_once("*/")).map(|(_, r)| r.trim()) else {
            continue;
        };
        let rest = rest.trim_end_matches(';').trim();
        let rest = if rest.starts_with('@') { rest.split_once(' ').map_or("", |(_, r)| r.trim()) } else { rest };
        let (op, args) = rest.split_once(' ').unwrap_or((rest, ""));
        let operands = args.split(", ").map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect();
        out.get_mut(f).unwrap().push(Inst { op: op.to_string(), operands });
    }
    out
}

fn function<'a>(fs: &'a BTreeMap<String, Vec<Inst>>, name: &str, what: &str) -> &'a [Inst] {
    fs.get(name).unwrap_or_else(|| panic!("{what}: no function {name} in the SASS (found {:?})", fs.keys()))
}

fn count(insts: &[Inst], op: &str) -> usize {
    insts.iter().filter(|i| i.op == op).count()
}

/// The register of a memory operand: `[R4.64]`, `desc[UR4][R4.64]`, `[R2+UR4+0x80]` → R4/R2.
fn address_reg(operand: &str) -> Option<String> {
    let inner = operand.rsplit('[').next()?.trim_end_matches(']');
    let reg = inner.split(['.', '+', ']']).next()?;
    reg.starts_with('R').then(|| reg.to_string())
}

/// The instructions between the two clock reads (`CS2R Rx, SR_CLOCKLO`) of a function.
fn timed_region<'a>(insts: &'a [Inst], what: &str) -> &'a [Inst] {
    let clocks: Vec<usize> = insts
        .iter()
        .enumerate()
        .filter(|(_, i)| i.op == "CS2R" && i.operands.get(1).is_some_and(|o| o == "SR_CLOCKLO"))
        .map(|(k, _)| k)
        .collect();
    assert!(clocks.len() >= 2, "{what}: expected two clock64 reads, found {}", clocks.len());
    &insts[clocks[0]..clocks[clocks.len() - 1]]
}

/// The archs to compile a source for: sm_80 and sm_90 (sm_90a for arch-specific sources).
fn archs(src: &Source) -> Vec<String> {
    [(8, 0), (9, 0)]
        .into_iter()
        .filter(|&cc| src.runs_on(cc))
        .map(|cc| kernels::arch_for(cc, src.arch_specific))
        .collect()
}

#[test]
fn every_harness_source_compiles_for_every_target() {
    for src in kernels::ALL {
        for arch in archs(&src) {
            let fs = functions(&sass(&src, &arch));
            for k in src.kernels {
                let f = function(&fs, k, &format!("{} {arch}", src.path));
                assert!(!f.is_empty(), "{} {arch}: {k} is empty", src.path);
            }
        }
    }
}

#[test]
fn pointer_chase_is_a_chain_of_dependent_64_bit_loads() {
    for arch in archs(&kernels::CHASE) {
        let fs = functions(&sass(&kernels::CHASE, &arch));
        for (kernel, load) in [("chase_ca", "LDG.E.64"), ("chase_cg", "LDG.E.64.STRONG.GPU")] {
            let what = format!("{kernel} ({arch})");
            let timed = timed_region(function(&fs, kernel, &what), &what);
            let loads: Vec<&Inst> = timed.iter().filter(|i| i.op.starts_with("LDG")).collect();
            assert!(loads.len() >= 16, "{what}: {} loads in the timed loop", loads.len());
            assert!(loads.iter().all(|i| i.op == load), "{what}: loads {:?}, expected {load}", loads);
            // Each load's address is the register the previous one loaded into.
            for w in loads.windows(2) {
                let dest = &w[0].operands[0];
                let addr = address_reg(&w[1].operands[1]).unwrap_or_default();
                assert_eq!(&addr, dest, "{what}: {:?} does not use the result of {:?}", w[1], w[0]);
            }
        }
        // chase_init writes the pointers (a generic ST: the address is computed from an integer).
        let init = function(&fs, "chase_init", "chase_init");
        assert!(count(init, "STG.E.64") + count(init, "ST.E.64") >= 1, "chase_init ({arch}): no 64-bit store");
    }
}

#[test]
fn stream_kernels_move_16_bytes_per_access() {
    for arch in archs(&kernels::STREAM) {
        let fs = functions(&sass(&kernels::STREAM, &arch));
        let f = |k: &str| function(&fs, k, k).to_vec();
        let ldg = |i: &[Inst]| i.iter().filter(|x| x.op.starts_with("LDG.E.128")).count();
        let read = f("stream_read");
        assert!(ldg(&read) >= 1 && count(&read, "STG.E.128") == 0, "stream_read ({arch})");
        let write = f("stream_write");
        assert!(ldg(&write) == 0 && count(&write, "STG.E.128") >= 1, "stream_write ({arch})");
        let copy = f("stream_copy");
        assert!(ldg(&copy) >= 1 && count(&copy, "STG.E.128") >= 1, "stream_copy ({arch})");
        let triad = f("stream_triad");
        assert!(ldg(&triad) >= 3 && count(&triad, "STG.E.128") >= 1, "stream_triad ({arch})");
        assert!(triad.iter().any(|i| i.op.starts_with("FFMA")), "stream_triad ({arch}): no FFMA");
        // The L2 read: 32 loads per thread, all with the L1 bypassed (ld.global.cg).
        let l2 = f("l2_read");
        assert_eq!(count(&l2, "LDG.E.128.STRONG.GPU"), 32, "l2_read ({arch}): {l2:?}");
        assert_eq!(ldg(&l2), 32, "l2_read ({arch})");
    }
}

#[test]
fn shared_memory_kernel_stores_then_loads_32_bit_words() {
    for arch in archs(&kernels::SMEM) {
        let fs = functions(&sass(&kernels::SMEM, &arch));
        let f = function(&fs, "smem_lds", "smem_lds");
        assert!(count(f, "STS") >= 1, "smem_lds ({arch}): no STS");
        // 16 loads of the unrolled loop (one word each), at immediate offsets 128 B apart.
        assert_eq!(count(f, "LDS"), 16, "smem_lds ({arch}): {f:?}");
        assert!(!f.iter().any(|i| i.op.starts_with("LDS.")), "smem_lds ({arch}): wide LDS");
        let first_sts = f.iter().position(|i| i.op == "STS").unwrap();
        let first_lds = f.iter().position(|i| i.op == "LDS").unwrap();
        assert!(first_sts < first_lds, "smem_lds ({arch}): loads before the table is written");
    }
}

#[test]
fn mma_kernels_issue_the_tensor_instruction_of_their_type() {
    for arch in archs(&kernels::MMA) {
        let fs = functions(&sass(&kernels::MMA, &arch));
        for t in MmaType::ALL {
            let tput = function(&fs, &format!("mma_tput_{}", t.suffix()), "mma_tput");
            let lat = function(&fs, &format!("mma_lat_{}", t.suffix()), "mma_lat");
            // 8 independent accumulators per iteration; a chain of 16 in the latency kernel.
            assert_eq!(count(tput, t.sass()), 8, "mma_tput_{} ({arch}): {:?}", t.suffix(), tput);
            let chain: Vec<&Inst> = timed_region(lat, "mma_lat").iter().filter(|i| i.op == t.sass()).collect();
            assert_eq!(chain.len(), 16, "mma_lat_{} ({arch})", t.suffix());
            // Each MMA accumulates into the previous one's result: D of one is C of the next.
            for w in chain.windows(2) {
                assert_eq!(
                    w[1].operands[3],
                    w[0].operands[0],
                    "mma_lat_{} ({arch}): {:?} after {:?}",
                    t.suffix(),
                    w[1],
                    w[0]
                );
            }
            // Both timed with clock64.
            timed_region(tput, "mma_tput");
        }
    }
}

#[test]
fn wgmma_kernel_issues_hgmma_on_sm90a() {
    let fs = functions(&sass(&kernels::WGMMA, "sm_90a"));
    let f = function(&fs, "wgmma_tput_bf16", "wgmma_tput_bf16");
    let timed = timed_region(f, "wgmma_tput_bf16");
    assert_eq!(count(timed, "HGMMA.64x256x16.F32.BF16"), 4, "{timed:?}");
    assert!(count(timed, "WARPGROUP.ARRIVE") >= 1, "no wgmma.fence (WARPGROUP.ARRIVE)");
    assert!(timed.iter().any(|i| i.op.starts_with("WARPGROUP.DEPBAR")), "no wgmma.wait_group");
}

#[test]
fn overlap_kernel_runs_a_wgmma_chain_beside_independent_mufu_ex2() {
    let fs = functions(&sass(&kernels::WGMMA, "sm_90a"));
    let f = function(&fs, "wgmma_mufu_overlap", "wgmma_mufu_overlap");
    // The wgmma warpgroups' loop: wgmma_tput_bf16's four HGMMAs.
    assert_eq!(count(f, "HGMMA.64x256x16.F32.BF16"), 4, "{f:?}");
    // The ex2 warpgroup's loop: 16 MUFU.EX2 in a row, each on its own register (16 independent
    // chains, so the loop is bound by MUFU throughput, not its latency), nothing else between.
    let ex2: Vec<usize> = f.iter().enumerate().filter(|(_, i)| i.op == "MUFU.EX2").map(|(k, _)| k).collect();
    assert_eq!(ex2.len(), 16, "{f:?}");
    let regs: std::collections::BTreeSet<&str> = ex2.iter().map(|&k| f[k].operands[0].as_str()).collect();
    assert_eq!(regs.len(), 16, "MUFU.EX2 destinations {regs:?}");
    let (a, b) = (ex2[0], ex2[15]);
    let between = f[a..=b].iter().filter(|i| i.op != "MUFU.EX2").count();
    assert!(between <= 1, "{between} other instructions among the MUFU.EX2s: {:?}", &f[a..=b]);
}

#[test]
fn utilities_round_and_read_the_clocks() {
    for arch in archs(&kernels::UTIL) {
        let fs = functions(&sass(&kernels::UTIL, &arch));
        let bf16 = function(&fs, "fill_bf16", "fill_bf16");
        assert!(bf16.iter().any(|i| i.op.starts_with("F2FP.BF16")), "fill_bf16 ({arch}): no F2FP.BF16");
        let f16 = function(&fs, "fill_f16", "fill_f16");
        // sm_80 writes the f16 pack as plain F2FP.PACK_AB, sm_90 as F2FP.F16.F32.PACK_AB.
        assert!(
            f16.iter().any(|i| i.op.starts_with("F2FP") && !i.op.contains("BF16")),
            "fill_f16 ({arch}): no F2FP to f16"
        );
        // The e4m3 conversion exists from sm_89 on; below, fill_e4m3 only traps (never launched).
        let e4m3 = function(&fs, "fill_e4m3", "fill_e4m3");
        if arch == "sm_80" {
            assert!(e4m3.iter().any(|i| i.op.starts_with("BPT.TRAP")), "fill_e4m3 ({arch}): no trap");
        } else {
            assert!(
                e4m3.iter().any(|i| i.op.starts_with("F2FP.SATFINITE.E4M3.F32")),
                "fill_e4m3 ({arch}): no F2FP.SATFINITE.E4M3.F32"
            );
            assert!(e4m3.iter().any(|i| i.op == "STG.E.U8"), "fill_e4m3 ({arch}): no byte store");
        }
        let clock = function(&fs, "sm_clock", "sm_clock");
        let reads = |sr: &str| clock.iter().filter(|i| i.operands.iter().any(|o| o == sr)).count();
        assert_eq!(reads("SR_CLOCKLO"), 2, "sm_clock ({arch})");
        assert!(reads("SR_GLOBALTIMERLO") >= 2, "sm_clock ({arch}): {clock:?}");
    }
}

#[test]
fn sass_parsing() {
    let text = "
.text.k:
        /*0000*/                   LDG.E.64 R4, desc[UR4][R4.64] ;
        /*0010*/              @!P0 LDG.E.64 R6, [R4.64] ;
        /*0020*/                   LDS R9, [R2+UR4+0x80] ;
";
    let fs = functions(text);
    let k = &fs["k"];
    assert_eq!(k.len(), 3);
    assert_eq!(k[1].op, "LDG.E.64");
    assert_eq!(k[1].operands, ["R6", "[R4.64]"]);
    assert_eq!(address_reg(&k[0].operands[1]).as_deref(), Some("R4"));
    assert_eq!(address_reg(&k[2].operands[1]).as_deref(), Some("R2"));
}
