//! CUDA twins: the GEMM recipes against real compiled SASS.
//!
//! `workloads/cuda/` holds our own CUDA C++ for the GEMM designs the recipes model: an
//! Ampere-style multistage `cp.async` + `ldmatrix` + `mma.sync` kernel (sm_80), a Hopper-style
//! warp-specialised TMA + mbarrier + `wgmma` kernel (sm_90a), and its M-grouped contiguous form
//! (DeepGEMM style, the MoE expert GEMMs; recipe `gemm::grouped_hopper_twin` through
//! `grouped::generate_grouped`). These tests compile them with NVRTC
//! and disassemble the cubins with nvdisasm (`scripts/sass.py`, PyPI wheels, no GPU), find the
//! main k-loop in the SASS and check that the matching recipe's trace issues the same instruction
//! mix per k-iteration: HMMA/HGMMA, LDGSTS/UTMALDG, LDSM, BAR and SYNCS, summed over the warps of
//! one CTA.
//!
//! The wheels live in `$GPUSIM_WHEEL_CACHE` (default `$HOME/.cache/gpusim-wheels`), where
//! `scripts/test.sh` (the README's test command, which CI runs) installs them. Without them these tests fail with a message that says how to
//! install them: they never skip.
//!
//! ## How a k-iteration is counted
//! - **SASS.** A loop is a label and a later `BRA` back to it with no unconditional `BRA`/`EXIT`
//!   between them (that excludes the out-of-line mbarrier retry blocks, which jump back into the
//!   middle of a loop). The k-loop of a role is the smallest loop that contains that role's key
//!   instruction (a tensor op for the MMA warps, a global-to-shared copy for a producer) and a
//!   synchronisation (BAR, SYNCS). Its instructions are counted statically, once each: the
//!   mbarrier retry paths that ptxas moves out of line are not counted (they run only while the
//!   data is late). A SASS program is what every warp that runs it executes, so its counts are
//!   multiplied by the number of warps that run the loop, which the kernel's source fixes (8 for
//!   the Ampere twin; 8 consumer warps and 1 producer warp for both Hopper twins).
//! - **Trace.** Each warp of one CTA runs a `Program`. Its k-loop is found by the same rule over
//!   `Step::Loop`s; one iteration is counted with nested loops expanded. A loop body may hold
//!   several k-tiles (an unrolled ring of stages): the body's tensor FLOPs (for MMA warps) or
//!   copied bytes (for copy-only warps), summed over the warps of that role, divided by one CTA
//!   k-tile's, give the k-tiles per iteration, which must be a whole number and divides the
//!   counts.
//!
//! Both sides must then agree exactly on HMMA, HGMMA, LDGSTS, UTMALDG, LDSM, BAR and SYNCS per
//! CTA k-tile, and on the tensor instruction's shape. Everything else (address arithmetic,
//! `DEPBAR`, `LDGDEPBAR`, `WARPGROUP.*`, `R2UR`, ...) is printed, not compared. The k-loop found
//! in the trace is also checked against the recipe's own measurement, `gemm::k_iteration_mix`.
//!
//! ## Differences that are not compared (as of CUDA 13.5.37)
//! - Address and descriptor arithmetic: the recipes emit only the loop control (`IADD3`,
//!   `ISETP`, `BRA`). Per warp and k-tile the Ampere twin issues 77 instructions against the
//!   recipe's 56 (the extra are `IMAD`/`IADD3`/`LOP3` for stage addresses and predicates; not
//!   counting 3 never-executed `@!PT LDS`); a Hopper consumer warp 55 against 12 (`R2UR`,
//!   `UMOV`, `ULOP3` building wgmma descriptors), the producer warp 27 against 8.
//! - Hopper consumers: the twin waits for its own wgmma batch (`wgmma.wait_group 0`,
//!   `WARPGROUP.DEPBAR.LE gsb0, 0x0`) and then releases the stage it read; the recipe keeps one
//!   batch in flight (`WARPGROUP.DEPBAR.LE imm=1`) and releases the previous stage, as CUTLASS
//!   does. One `WARPGROUP.DEPBAR` and one release per k-tile either way.
//! - Hopper releases: the twin's 256 consumer threads each arrive (`SYNCS.ARRIVE.TRANS64.A1T0`,
//!   one instruction per warp), the recipe's consumer warps arrive once each (`SYNCS.ARRIVE.A1T0`,
//!   a barrier count of 8); the producer's expect-tx arrive comes before both TMA copies in the
//!   twin and between them in the recipe (see the recipe's documentation for why).
//! - The grouped twin's k-loop is the Hopper twin's with a 128-column tile (a consumer warp 55
//!   instructions per k-tile against the recipe's 12, the producer warp 22 against 8), and the
//!   same two differences. Its per-tile part differs once, asserted by
//!   `grouped_twin_reads_its_expert_once_per_tile`: each of the twin's 12 warps loads the
//!   m-block's expert with one `LDG` before the CTA barrier, where the recipe reads it as the
//!   per-CTA parameter p0 from a table and issues nothing (a 4-byte load per warp per tile, off
//!   the k-loop).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use gpusim_isa::opcode::decode;
use gpusim_isa::{KernelTrace, Program, Semantics, Step};

/// The instruction classes (base mnemonics) that must match exactly.
const COMPARED: [&str; 7] = ["HMMA", "HGMMA", "LDGSTS", "UTMALDG", "LDSM", "BAR", "SYNCS"];

/// Intentional differences between a twin and its recipe, as (twin, base mnemonic, why). A class
/// listed here is printed but not asserted. Empty: the recipes reproduce the twins exactly.
const KNOWN_DIFFERENCES: &[(&str, &str, &str)] = &[];

// ---------------------------------------------------------------------------------------------
// Toolchain

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

fn wheel_cache() -> (PathBuf, bool) {
    match std::env::var_os("GPUSIM_WHEEL_CACHE") {
        Some(d) if !d.is_empty() => (PathBuf::from(d), true),
        _ => {
            let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/root"));
            (home.join(".cache/gpusim-wheels"), false)
        }
    }
}

/// Compiles `workloads/cuda/<name>.cu` for `arch` and returns the SASS text (`nvdisasm -c`).
fn compile(name: &str, arch: &str) -> String {
    let root = repo_root();
    let (cache, from_env) = wheel_cache();
    let src = root.join("workloads/cuda").join(format!("{name}.cu"));
    let out = Command::new("python3")
        .arg(root.join("scripts/sass.py"))
        .arg("--cache")
        .arg(&cache)
        .arg("--arch")
        .arg(arch)
        .arg(&src)
        .output()
        .unwrap_or_else(|e| panic!("cannot run python3 (needed for scripts/sass.py): {e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    match out.status.code() {
        Some(0) => String::from_utf8(out.stdout).expect("SASS is UTF-8"),
        Some(2) if from_env => panic!(
            "\n{stderr}\nGPUSIM_WHEEL_CACHE={} does not hold the CUDA wheels: the step of scripts/test.sh that installs \
             them failed or was skipped. This test does not skip without them.\n",
            cache.display()
        ),
        Some(2) => panic!(
            "\n{stderr}\nGPUSIM_WHEEL_CACHE is unset and the default cache {} does not hold the CUDA wheels. \
             Install them (about 150 MB, a few seconds) with `bash scripts/test.sh` (its `CUDA wheels` step), or:\n  \
             python3 -m pip install --target {0}/nvrtc nvidia-cuda-nvrtc==13.5.37\n  \
             python3 -m pip install --target {0}/nvdisasm nvidia-cuda-nvdisasm==13.5.37\n\
             This test does not skip without them.\n",
            cache.display()
        ),
        _ => panic!("scripts/sass.py failed on {} for {arch} ({}):\n{stderr}", src.display(), out.status),
    }
}

fn ampere_sass() -> &'static str {
    static S: OnceLock<String> = OnceLock::new();
    S.get_or_init(|| compile("gemm_mma_sm80", "sm_80"))
}

fn hopper_sass() -> &'static str {
    static S: OnceLock<String> = OnceLock::new();
    S.get_or_init(|| compile("gemm_wgmma_sm90a", "sm_90a"))
}

fn grouped_hopper_sass() -> &'static str {
    static S: OnceLock<String> = OnceLock::new();
    S.get_or_init(|| compile("grouped_gemm_wgmma_sm90a", "sm_90a"))
}

// ---------------------------------------------------------------------------------------------
// SASS parsing

#[derive(Debug, Clone)]
struct SassInst {
    pc: u32,
    /// `@P0`, `@!UP1`, ...; None when unpredicated.
    pred: Option<String>,
    mnemonic: String,
    operands: String,
}

impl SassInst {
    fn base(&self) -> &str {
        self.mnemonic.split('.').next().unwrap_or("")
    }
    /// Unpredicated (or predicated on the always-true `PT`).
    fn unconditional(&self) -> bool {
        matches!(self.pred.as_deref(), None | Some("@PT"))
    }
    /// The label a `BRA` jumps to: ``BRA `(.L_x_1)``.
    fn branch_target(&self) -> Option<&str> {
        if self.base() != "BRA" {
            return None;
        }
        let start = self.operands.find('(')? + 1;
        let end = start + self.operands[start..].find(')')?;
        Some(&self.operands[start..end])
    }
}

struct Sass {
    insts: Vec<SassInst>,
    /// Label → index of the instruction that follows it.
    labels: BTreeMap<String, usize>,
}

/// Parses `nvdisasm -c` output of a cubin with one kernel.
fn parse_sass(text: &str) -> Sass {
    let mut insts = Vec::new();
    let mut labels = BTreeMap::new();
    for line in text.lines() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("/*") {
            let Some((pc, rest)) = rest.split_once("*/") else { continue };
            let Ok(pc) = u32::from_str_radix(pc.trim(), 16) else { continue };
            let body = rest.trim().trim_end_matches(';').trim();
            let split = |t: &str| -> (String, String) {
                let (a, b) = t.split_once(char::is_whitespace).unwrap_or((t, ""));
                (a.to_string(), b.trim().to_string())
            };
            let (mut first, mut rest) = split(body);
            let mut pred = None;
            if first.starts_with('@') {
                pred = Some(first);
                (first, rest) = split(&rest);
            }
            let mnemonic = first.trim_end_matches(';').to_string();
            if mnemonic.is_empty() {
                continue;
            }
            insts.push(SassInst { pc, pred, mnemonic, operands: rest });
        } else if let Some(label) = t.strip_suffix(':')
            && label.starts_with('.')
            && !label.contains(char::is_whitespace)
        {
            labels.insert(label.to_string(), insts.len());
        }
    }
    assert!(!insts.is_empty(), "no instructions found in the SASS");
    Sass { insts, labels }
}

/// Natural loops: (first, last) instruction indices, `last` being the back-edge `BRA`.
fn sass_loops(s: &Sass) -> Vec<(usize, usize)> {
    let mut loops = Vec::new();
    for (i, inst) in s.insts.iter().enumerate() {
        let Some(target) = inst.branch_target() else { continue };
        let Some(&start) = s.labels.get(target) else { continue };
        if start > i {
            continue;
        }
        // A jump back into a loop from an out-of-line block passes an unconditional BRA or EXIT
        // (the end of the code laid out before it); a real loop body has none.
        let leaves = s.insts[start..i]
            .iter()
            .any(|x| x.unconditional() && matches!(x.base(), "BRA" | "EXIT" | "RET" | "JMP" | "BRX"));
        if !leaves {
            loops.push((start, i));
        }
    }
    loops
}

fn is_sync(base: &str) -> bool {
    matches!(base, "BAR" | "SYNCS")
}

fn is_copy(base: &str) -> bool {
    matches!(base, "LDGSTS" | "UTMALDG" | "UBLKCP")
}

fn is_tensor(base: &str) -> bool {
    decode(base).unit == gpusim_isa::UnitClass::Tensor
}

/// The role a k-loop serves: MMA warps (tensor instructions) or copy-only producer warps.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Role {
    Mma,
    Producer,
}

impl Role {
    fn key(self, base: &str) -> bool {
        match self {
            Role::Mma => is_tensor(base),
            Role::Producer => is_copy(base),
        }
    }
}

/// Counts per full mnemonic.
type Mix = BTreeMap<String, u64>;

/// The per-iteration mix of the SASS k-loop of `role`: the smallest loop holding a key
/// instruction and a synchronisation. For `Role::Producer`, loops holding tensor instructions do
/// not count (they belong to the MMA warps).
fn sass_kloop(s: &Sass, role: Role) -> Option<(Mix, (u32, u32))> {
    let mut best: Option<(usize, usize)> = None;
    for (a, b) in sass_loops(s) {
        let body = &s.insts[a..=b];
        let key = body.iter().any(|x| role.key(x.base()));
        let sync = body.iter().any(|x| is_sync(x.base()));
        let foreign = role == Role::Producer && body.iter().any(|x| is_tensor(x.base()));
        if key && sync && !foreign && best.is_none_or(|(c, d)| b - a < d - c) {
            best = Some((a, b));
        }
    }
    let (a, b) = best?;
    let mut mix = Mix::new();
    for x in &s.insts[a..=b] {
        // ptxas pads cp.async sequences with never-executed `@!PT LDS RZ, [RZ]`: keep them out of
        // the classes (they are listed as `@!PT LDS`).
        let key = match x.pred.as_deref() {
            Some("@!PT") => format!("@!PT {}", x.mnemonic),
            _ => x.mnemonic.clone(),
        };
        *mix.entry(key).or_default() += 1;
    }
    Some((mix, (s.insts[a].pc, s.insts[b].pc)))
}

// ---------------------------------------------------------------------------------------------
// Trace side

/// The k-loop of one warp program: (per-iteration mix, loop step index). The innermost loop
/// holding a key instruction of `role` and a synchronisation; among several, the one that runs
/// most often.
fn program_kloop(p: &Program, k: &KernelTrace, role: Role) -> Option<(Mix, usize)> {
    let base = |op: u16| k.ops.get(op).base.clone();
    // Every loop as (start, end, iterations over one run of the program).
    let mut loops: Vec<(usize, usize, u64)> = Vec::new();
    let mut stack: Vec<u64> = Vec::new();
    let mut mult = 1u64;
    for (i, s) in p.steps.iter().enumerate() {
        match *s {
            Step::Loop { count, end } => {
                stack.push(mult);
                mult = mult.saturating_mul(count.resolve(&p.eval_params([0, 0, 0], 0)) as u64);
                loops.push((i, end as usize, mult));
            }
            Step::EndLoop { .. } => mult = stack.pop().expect("balanced"),
            Step::Inst(_) => {}
        }
    }
    let holds = |a: usize, b: usize, f: &dyn Fn(&str) -> bool| {
        p.steps[a..b].iter().any(|s| matches!(s, Step::Inst(i) if f(&base(i.op))))
    };
    let qualifies = |a: usize, b: usize| {
        holds(a, b, &|x| role.key(x)) && holds(a, b, &is_sync) && !(role == Role::Producer && holds(a, b, &is_tensor))
    };
    let candidates: Vec<(usize, usize, u64)> = loops.iter().copied().filter(|&(a, b, _)| qualifies(a, b)).collect();
    let innermost = candidates
        .iter()
        .copied()
        .filter(|&(a, b, _)| !candidates.iter().any(|&(c, d, _)| (c, d) != (a, b) && a < c && d < b));
    let (a, b, _) = innermost.max_by_key(|&(a, _, n)| (n, std::cmp::Reverse(a)))?;
    // One iteration of the body, nested loops expanded.
    let mut mix = Mix::new();
    let mut mult = 1u64;
    let mut stack = Vec::new();
    for s in &p.steps[a + 1..b] {
        match *s {
            Step::Loop { count, .. } => {
                stack.push(mult);
                mult *= count.resolve(&p.eval_params([0, 0, 0], 0)) as u64;
            }
            Step::EndLoop { .. } => mult = stack.pop().expect("balanced"),
            Step::Inst(i) => *mix.entry(k.ops.get(i.op).mnemonic.clone()).or_default() += mult,
        }
    }
    Some((mix, a))
}

/// FLOPs a warp instruction contributes: mma.sync shapes are per warp; warpgroup MMAs (HGMMA) are
/// issued by each of the 4 warps of the warpgroup, so each warp carries a quarter.
fn flops_per_warp_inst(mnemonic: &str) -> u64 {
    let d = decode(mnemonic);
    match d.tensor {
        Some(t) if d.semantics == Semantics::WgmmaAsync => t.flops() / 4,
        Some(t) => t.flops(),
        None => 0,
    }
}

/// Tensor FLOPs of a mix.
fn mix_flops(mix: &Mix) -> u64 {
    mix.iter().map(|(m, n)| flops_per_warp_inst(m) * n).sum()
}

fn by_base(mix: &Mix) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (m, n) in mix {
        *out.entry(m.split('.').next().unwrap_or("").to_string()).or_default() += n;
    }
    out
}

fn add_scaled(into: &mut Mix, mix: &Mix, warps: u64) {
    for (m, n) in mix {
        *into.entry(m.clone()).or_default() += n * warps;
    }
}

/// The tile of one CTA k-iteration.
#[derive(Clone, Copy, Debug)]
struct Tile {
    m: u64,
    n: u64,
    k: u64,
    /// Bytes per operand element.
    elem: u64,
}

impl Tile {
    fn flops(&self) -> u64 {
        2 * self.m * self.n * self.k
    }
    fn operand_bytes(&self) -> u64 {
        (self.m + self.n) * self.k * self.elem
    }
}

/// Bytes one iteration of the loop starting at step `a` copies from global to shared memory
/// (bulk bytes of TMA copies, width × active lanes of `LDGSTS`).
fn copy_bytes(k: &KernelTrace, p: &Program, a: usize) -> u64 {
    // The body of the loop starting at step `a`, nested loops expanded.
    let Step::Loop { end, .. } = p.steps[a] else { unreachable!() };
    let mut total = 0u64;
    let mut mult = 1u64;
    let mut stack = Vec::new();
    for s in &p.steps[a + 1..end as usize] {
        match *s {
            Step::Loop { count, .. } => {
                stack.push(mult);
                mult *= count.resolve(&p.eval_params([0, 0, 0], 0)) as u64;
            }
            Step::EndLoop { .. } => mult = stack.pop().expect("balanced"),
            Step::Inst(i) => {
                let d = k.ops.get(i.op);
                if !is_copy(&d.base) {
                    continue;
                }
                let bytes = match i.mem {
                    Some(m) if m.bulk_bytes > 0 => m.bulk_bytes as u64,
                    _ => d.width as u64 * i.mask.count_ones() as u64,
                };
                total += bytes * mult;
            }
        }
    }
    total
}

/// Per-CTA, per-k-tile mix of the trace, by role, with a description of each role's warps.
fn trace_mix(k: &KernelTrace, tile: Tile) -> (BTreeMap<Role, Mix>, Vec<String>) {
    // Warps per program in CTA 0.
    let layout = k.layout.overrides.get(&0).unwrap_or(&k.layout.default);
    let mut warps_of: BTreeMap<u32, u64> = BTreeMap::new();
    for &p in layout {
        *warps_of.entry(p).or_default() += 1;
    }
    struct Found {
        prog: u32,
        role: Role,
        warps: u64,
        mix: Mix,
        flops: u64,
        bytes: u64,
    }
    let mut found = Vec::new();
    for (&prog, &warps) in &warps_of {
        let p = &k.programs[prog as usize];
        let hit = program_kloop(p, k, Role::Mma)
            .map(|x| (Role::Mma, x))
            .or_else(|| program_kloop(p, k, Role::Producer).map(|x| (Role::Producer, x)));
        if let Some((role, (mix, at))) = hit {
            let flops = mix_flops(&mix);
            let bytes = copy_bytes(k, p, at);
            found.push(Found { prog, role, warps, mix, flops, bytes });
        }
    }
    // k-tiles per loop iteration, per role.
    let mut out: BTreeMap<Role, Mix> = BTreeMap::new();
    let mut notes = Vec::new();
    for role in [Role::Mma, Role::Producer] {
        let of_role: Vec<&Found> = found.iter().filter(|f| f.role == role).collect();
        if of_role.is_empty() {
            continue;
        }
        let (done, whole) = match role {
            Role::Mma => (of_role.iter().map(|f| f.flops * f.warps).sum::<u64>(), tile.flops()),
            Role::Producer => (of_role.iter().map(|f| f.bytes * f.warps).sum::<u64>(), tile.operand_bytes()),
        };
        assert!(
            done > 0 && done.is_multiple_of(whole),
            "{role:?} warps of the trace: one k-loop iteration covers {done} {} of the CTA, not a whole number of \
             k-tiles ({whole} each)",
            if role == Role::Mma { "FLOPs" } else { "bytes" }
        );
        let tiles = done / whole;
        let mix = out.entry(role).or_default();
        for f in of_role {
            for (m, n) in &f.mix {
                let total = n * f.warps;
                assert!(
                    total.is_multiple_of(tiles),
                    "program {}: {total} × {m} per iteration over {tiles} k-tiles is not a whole number",
                    k.programs[f.prog as usize].name
                );
                *mix.entry(m.clone()).or_default() += total / tiles;
            }
            notes.push(format!(
                "trace program {:?} ({} warps): {role:?} k-loop, {} k-tile(s) per iteration",
                k.programs[f.prog as usize].name, f.warps, tiles
            ));
        }
    }
    (out, notes)
}

// ---------------------------------------------------------------------------------------------
// Comparison

fn show(mix: &Mix) -> String {
    mix.iter().map(|(m, n)| format!("{n:>4} {m}")).collect::<Vec<_>>().join("\n")
}

/// Compares the per-CTA per-k-tile mixes and panics with both listings on a mismatch.
fn compare(twin: &str, sass: &BTreeMap<Role, Mix>, trace: &BTreeMap<Role, Mix>, notes: &[String]) {
    let mut sass_all = Mix::new();
    let mut trace_all = Mix::new();
    for m in sass.values() {
        add_scaled(&mut sass_all, m, 1);
    }
    for m in trace.values() {
        add_scaled(&mut trace_all, m, 1);
    }
    let (sb, tb) = (by_base(&sass_all), by_base(&trace_all));
    let mut report = format!("== {twin}: per CTA k-tile\n");
    for n in notes {
        report += &format!("   {n}\n");
    }
    report += &format!("{:<10} {:>6} {:>6}\n", "class", "SASS", "trace");
    let mut failures = Vec::new();
    for class in COMPARED {
        let (a, b) = (sb.get(class).copied().unwrap_or(0), tb.get(class).copied().unwrap_or(0));
        let known = KNOWN_DIFFERENCES.iter().find(|(t, c, _)| *t == twin && *c == class);
        let mark = if a == b {
            ""
        } else if known.is_some() {
            "  (known difference)"
        } else {
            failures.push(class);
            "  MISMATCH"
        };
        report += &format!("{class:<10} {a:>6} {b:>6}{mark}\n");
    }
    let total = |m: &Mix| m.iter().filter(|(k, _)| !k.starts_with("@!PT")).map(|(_, n)| n).sum::<u64>();
    report += &format!("{:<10} {:>6} {:>6}  (not compared)\n", "all", total(&sass_all), total(&trace_all));
    // Per role, for the reader.
    for (role, m) in sass {
        report += &format!("-- SASS {role:?} (all its warps):\n{}\n", show(m));
    }
    for (role, m) in trace {
        report += &format!("-- trace {role:?} (all its warps):\n{}\n", show(m));
    }
    // The tensor instruction shapes must agree too (count × shape is the work).
    let shapes = |mix: &Mix| -> BTreeMap<String, u64> {
        mix.iter()
            .filter_map(|(m, n)| decode(m).tensor.map(|t| (format!("{}x{}x{} {:?}", t.m, t.n, t.k, t.input), *n)))
            .collect()
    };
    let (ss, ts) = (shapes(&sass_all), shapes(&trace_all));
    if ss != ts {
        failures.push("tensor shapes");
        report += &format!("tensor shapes differ: SASS {ss:?}, trace {ts:?}\n");
    }
    eprintln!("{report}");
    assert!(
        failures.is_empty(),
        "{twin}: the recipe's k-loop differs from the compiled twin in {failures:?}\n{report}"
    );
}

/// The k-loop found in the trace must give what the recipe's own steady-state measurement
/// (`gemm::k_iteration_mix`, a difference of dynamic counts between two values of K) gives, for
/// the compared classes.
fn check_against_measured(trace: &BTreeMap<Role, Mix>, measured: &BTreeMap<String, u64>) {
    let mut all = Mix::new();
    for m in trace.values() {
        add_scaled(&mut all, m, 1);
    }
    let found = by_base(&all);
    for class in COMPARED {
        assert_eq!(
            found.get(class).copied().unwrap_or(0),
            measured.get(class).copied().unwrap_or(0),
            "{class}: the trace's k-loop and gemm::k_iteration_mix disagree (found {found:?}, measured {measured:?})"
        );
    }
}

/// The SASS side of a twin: per role, the k-loop mix times the warps that run it, per k-tile.
fn sass_mix(sass: &str, roles: &[(Role, u64)], tile: Tile) -> BTreeMap<Role, Mix> {
    let s = parse_sass(sass);
    let mut out = BTreeMap::new();
    let mut flops = 0;
    for &(role, warps) in roles {
        let (mix, (a, b)) = sass_kloop(&s, role).unwrap_or_else(|| panic!("no {role:?} k-loop found in the SASS"));
        eprintln!("SASS {role:?} k-loop: /*{a:04x}*/ .. /*{b:04x}*/, run by {warps} warp(s)");
        flops += mix_flops(&mix) * warps;
        let mut m = Mix::new();
        add_scaled(&mut m, &mix, warps);
        out.insert(role, m);
    }
    // The twin itself: one trip through its loops is exactly one CTA k-tile of MMAs.
    assert_eq!(flops, tile.flops(), "the twin's k-loop does not do one CTA k-tile ({tile:?}) of MMAs");
    out
}

/// The checked-in disassembly must be what the twin compiles to now.
fn check_reference(name: &str, fresh: &str, arch: &str) {
    let path = repo_root().join("workloads/cuda/sass").join(format!("{name}.sass"));
    let stored = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        stored == fresh,
        "{} is stale (or missing): regenerate it with\n  python3 scripts/sass.py --cache \"$GPUSIM_WHEEL_CACHE\" --arch \
         {arch} workloads/cuda/{name}.cu -o workloads/cuda/sass/{name}.sass",
        path.display()
    );
}

// ---------------------------------------------------------------------------------------------
// The recipes

use gpusim_workloads::gemm::grouped::{GroupedProblem, Layout, generate_grouped, grouped_recipe};
use gpusim_workloads::gemm::{self, Dtype, GemmProblem, Recipe};

const AMPERE_TILE: Tile = Tile { m: 128, n: 128, k: 32, elem: 2 };
const HOPPER_TILE: Tile = Tile { m: 128, n: 256, k: 64, elem: 2 };
const GROUPED_TILE: Tile = Tile { m: 128, n: 128, k: 64, elem: 2 };

fn ampere_recipe() -> Recipe {
    gemm::Twin::Ampere.recipe()
}

fn hopper_recipe() -> Recipe {
    gemm::Twin::Hopper.recipe()
}

fn arch(preset: &str) -> gpusim_configs::Arch {
    gpusim_configs::load_preset(preset).unwrap_or_else(|e| panic!("preset {preset}: {e}"))
}

/// The recipe's GEMM kernel for a problem of a few CTAs and 64 k-tiles.
fn recipe_kernel(preset: &str, r: &Recipe, tile: Tile) -> KernelTrace {
    let p = GemmProblem::new(2 * tile.m, 2 * tile.n, 64 * tile.k, Dtype::Bf16);
    let mut t = gemm::generate(&arch(preset), &p, r).unwrap_or_else(|e| panic!("{r}: {e}"));
    assert_eq!(t.kernels.len(), 1, "{r}: expected one kernel (no split-K reduction)");
    let k = t.kernels.remove(0);
    k.check().expect("well-formed kernel");
    k
}

/// The grouped twin's recipe's kernel for the grouped problem `p`, through `generate_grouped`.
fn grouped_kernel(preset: &str, p: &GroupedProblem) -> KernelTrace {
    let r = gemm::grouped_hopper_twin();
    let mut t = generate_grouped(&arch(preset), p, &r).unwrap_or_else(|e| panic!("{p}: {e}"));
    assert_eq!(t.kernels.len(), 1, "{p}: expected one kernel");
    let k = t.kernels.remove(0);
    k.check().expect("well-formed kernel");
    k
}

/// The recipe's own steady-state measurement ([`gemm::k_iteration_mix`]), per CTA k-tile, by base
/// mnemonic: a cross-check of the k-loop found here.
fn recipe_measured_mix(preset: &str, r: &Recipe) -> BTreeMap<String, u64> {
    let roles = gemm::k_iteration_mix(&arch(preset), Dtype::Bf16, false, r).expect("k_iteration_mix");
    let mut out = BTreeMap::new();
    for role in roles {
        for (op, n) in role.per_iteration {
            *out.entry(op).or_default() += n * role.warps.len() as u64;
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Tests

#[test]
fn ampere_twin_matches_the_ampere_recipe() {
    let r = ampere_recipe();
    let sass = sass_mix(ampere_sass(), &[(Role::Mma, 8)], AMPERE_TILE);
    let (trace, notes) = trace_mix(&recipe_kernel("a100-sxm4-80gb", &r, AMPERE_TILE), AMPERE_TILE);
    compare("gemm_mma_sm80", &sass, &trace, &notes);
    check_against_measured(&trace, &recipe_measured_mix("a100-sxm4-80gb", &r));
}

#[test]
fn hopper_twin_matches_the_hopper_recipe() {
    // 2 consumer warpgroups run the MMA loop; one elected thread of warp 0 runs the producer loop.
    let r = hopper_recipe();
    let sass = sass_mix(hopper_sass(), &[(Role::Mma, 8), (Role::Producer, 1)], HOPPER_TILE);
    let (trace, notes) = trace_mix(&recipe_kernel("h100-sxm5-80gb", &r, HOPPER_TILE), HOPPER_TILE);
    compare("gemm_wgmma_sm90a", &sass, &trace, &notes);
    check_against_measured(&trace, &recipe_measured_mix("h100-sxm5-80gb", &r));
}

#[test]
fn grouped_hopper_twin_matches_the_grouped_recipe() {
    let r = gemm::grouped_hopper_twin();
    let p = gemm::grouped_twin_problem();
    // The twin's tile is the one DeepGEMM's bf16 selection picks for the reference problem (the
    // selection's cluster, stages and epilogue are not the twin's: see `grouped_hopper_twin`).
    let picked = grouped_recipe(&arch("h800-sxm5"), &p);
    assert_eq!(
        (picked.cta_m, picked.cta_n, picked.cta_k, picked.consumers),
        (r.cta_m, r.cta_n, r.cta_k, r.consumers),
        "grouped_recipe no longer picks the twin's tile for {p}: {picked:?}"
    );
    // As for the Hopper twin: 8 consumer warps run the MMA loop, one elected thread of warp 0 the
    // producer loop.
    let sass = sass_mix(grouped_hopper_sass(), &[(Role::Mma, 8), (Role::Producer, 1)], GROUPED_TILE);
    let (trace, notes) = trace_mix(&grouped_kernel("h800-sxm5", &p), GROUPED_TILE);
    compare("grouped_gemm_wgmma_sm90a", &sass, &trace, &notes);
    // The grouped form changes only the per-tile part: its k-loop is the dense recipe's.
    check_against_measured(&trace, &recipe_measured_mix("h800-sxm5", &Recipe::Hopper(r)));
}

/// Per tile, the grouped twin loads its m-block's expert with one `LDG` per warp before the CTA
/// barrier; the recipe reads it as the per-CTA parameter p0 from a table, with no instruction
/// (the asserted difference: 12 `LDG` per CTA in the twin, 0 in the trace), and B's address
/// follows p0.
#[test]
fn grouped_twin_reads_its_expert_once_per_tile() {
    // SASS: exactly one LDG, in no loop, before the first BAR: each warp runs it once per tile.
    let s = parse_sass(grouped_hopper_sass());
    let ldg: Vec<usize> = (0..s.insts.len()).filter(|&i| s.insts[i].base() == "LDG").collect();
    assert_eq!(ldg.len(), 1, "the twin should load the expert with one LDG, found {ldg:?}");
    let at = ldg[0];
    assert!(
        !sass_loops(&s).iter().any(|&(a, b)| a <= at && at <= b),
        "the expert LDG (/*{:04x}*/) is inside a loop",
        s.insts[at].pc
    );
    let first_bar = s.insts.iter().position(|x| x.base() == "BAR").expect("a CTA barrier");
    assert!(at < first_bar, "the expert LDG comes after the CTA barrier: not every warp runs it");

    // Trace: groups of 300, 0, 128 and 2500 rows: m-blocks 3 + 0 + 1 + 20 = 24, so a grid of
    // (16, N/128, 2) whose last 8 m-blocks are padding.
    let (n, k) = (256u64, 512u64);
    let m = vec![300, 0, 128, 2500];
    let p = GroupedProblem {
        m: m.clone(),
        n,
        k,
        dtype: Dtype::Bf16,
        block_scaled: false,
        layout: Layout::Contiguous,
        capacity: 0,
    };
    let kt = grouped_kernel("h800-sxm5", &p);
    let expert_of: Vec<i64> = m
        .iter()
        .enumerate()
        .flat_map(|(g, &rows)| std::iter::repeat_n(g as i64, rows.div_ceil(128) as usize))
        .collect();
    assert_eq!(expert_of.len(), 24);
    let grid = kt.info.grid;
    assert_eq!((grid.x, grid.y, grid.z), (16, (n / 128) as u32, 2));
    assert_eq!(kt.info.cta_group.as_ref().map(|g| g.param), Some(0), "the kernel's CTA group is p0, the expert");
    for prog in &kt.programs {
        let loads =
            prog.steps.iter().filter(|st| matches!(st, Step::Inst(i) if kt.ops.get(i.op).base == "LDG")).count();
        assert_eq!(loads, 0, "program {:?} loads something: the recipe's expert lookup is a parameter", prog.name);
    }
    let count = |prog: &Program, cta: [u32; 3], base: &str| {
        let mut n = 0;
        prog.for_each_executed(cta, 0, |i, times| {
            if kt.ops.get(i.op).base == base {
                n += times;
            }
        });
        n
    };
    let kps = k / 64;
    for lin in 0..grid.count() {
        let c = grid.unlinear(lin);
        let cta = [c.x, c.y, c.z];
        let mb = (c.x + grid.x * c.z) as usize;
        let warps = &kt.cta(lin).warps;
        let (producer, consumer) = (&warps[0], &warps[4]);
        let params = producer.eval_params(cta, 0);
        let (copies, mmas) = (count(producer, cta, "UTMALDG"), count(consumer, cta, "HGMMA"));
        if let Some(&e) = expert_of.get(mb) {
            assert_eq!(params[0], e, "CTA {cta:?} (m-block {mb}): p0 is not its expert");
            assert_eq!((copies, mmas), (2 * kps, 4 * kps), "CTA {cta:?} (m-block {mb}) computes its tile");
        } else {
            assert_eq!((copies, mmas), (0, 0), "CTA {cta:?}: padding m-block {mb} should load and compute nothing");
        }
    }
    // B's address moves by one expert's N×K bf16 matrix per unit of p0; A's does not depend on it.
    let prog = &kt.cta(0).warps[0];
    let mut coefs: BTreeMap<i64, u64> = BTreeMap::new();
    for st in &prog.steps {
        if let Step::Inst(i) = st
            && kt.ops.get(i.op).base == "UTMALDG"
        {
            let m = i.mem.expect("a TMA load has an address");
            *coefs.entry(prog.exprs[m.addr as usize].coef[gpusim_isa::Var::Param(0).index()]).or_default() += 1;
        }
    }
    let loads: u64 = coefs.values().sum();
    assert_eq!(
        coefs,
        BTreeMap::from([(0, loads / 2), ((n * k * 2) as i64, loads / 2)]),
        "the producer's TMA loads: half (A) independent of p0, half (B) at b + p0·N·K·2"
    );
}

#[test]
fn reference_sass_is_current() {
    check_reference("gemm_mma_sm80", ampere_sass(), "sm_80");
    check_reference("gemm_wgmma_sm90a", hopper_sass(), "sm_90a");
    check_reference("grouped_gemm_wgmma_sm90a", grouped_hopper_sass(), "sm_90a");
}

#[test]
fn sass_loop_finder_skips_out_of_line_retry_blocks() {
    let text = "
        /*0000*/                   MOV R1, c[0x0][0x28] ;
.L_x_6:
        /*0010*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR7+0x30000], R6 ;
        /*0020*/              @!P0 BRA `(.L_x_5) ;
.L_x_9:
        /*0030*/                   HGMMA.64x256x16.F32.BF16 R24, gdesc[UR12], R24, gsb0 ;
        /*0040*/                   SYNCS.ARRIVE.TRANS64.A1T0 RZ, [UR7+0x30020], RZ ;
        /*0050*/              @!P0 BRA `(.L_x_6) ;
        /*0060*/                   EXIT ;
.L_x_5:
        /*0070*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR7+0x30000], R6 ;
        /*0080*/              @!P0 BRA `(.L_x_5) ;
        /*0090*/                   BRA `(.L_x_9) ;
.L_x_11:
        /*00a0*/                   BRA `(.L_x_11);
";
    let s = parse_sass(text);
    let loops = sass_loops(&s);
    // The k-loop, the retry spin and the trap; not the jump from the retry block back to .L_x_9.
    assert_eq!(loops, vec![(1, 5), (7, 8), (10, 10)]);
    let (mix, pcs) = sass_kloop(&s, Role::Mma).unwrap();
    assert_eq!(pcs, (0x10, 0x50));
    let b = by_base(&mix);
    assert_eq!((b["HGMMA"], b["SYNCS"], b["BRA"]), (1, 2, 2));
    assert!(sass_kloop(&s, Role::Producer).is_none());
}
