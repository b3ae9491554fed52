//! Helpers shared by the CUDA-twin tests (`cuda_twins.rs`, `attention_twins.rs`): compiling a twin
//! with NVRTC and nvdisasm (`scripts/sass.py`), parsing the SASS and finding its main loop per role,
//! finding the matching loop in a recipe's trace, and comparing the two per unit of work (a CTA
//! k-tile of a GEMM, a CTA KV block of attention). How loops are found and counted is described in
//! `cuda_twins.rs`.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use gpusim_isa::opcode::decode;
use gpusim_isa::{KernelTrace, Program, Semantics, Step};

// ---------------------------------------------------------------------------------------------
// Toolchain

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

pub fn wheel_cache() -> (PathBuf, bool) {
    match std::env::var_os("GPUSIM_WHEEL_CACHE") {
        Some(d) if !d.is_empty() => (PathBuf::from(d), true),
        _ => {
            let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/root"));
            (home.join(".cache/gpusim-wheels"), false)
        }
    }
}

/// Compiles `workloads/cuda/<name>.cu` for `arch` and returns the SASS text (`nvdisasm -c`).
pub fn compile(name: &str, arch: &str) -> String {
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

// ---------------------------------------------------------------------------------------------
// SASS parsing

#[derive(Debug, Clone)]
pub struct SassInst {
    pub pc: u32,
    /// `@P0`, `@!UP1`, ...; None when unpredicated.
    pub pred: Option<String>,
    pub mnemonic: String,
    pub operands: String,
}

impl SassInst {
    pub fn base(&self) -> &str {
        self.mnemonic.split('.').next().unwrap_or("")
    }
    /// Unpredicated (or predicated on the always-true `PT`).
    pub fn unconditional(&self) -> bool {
        matches!(self.pred.as_deref(), None | Some("@PT"))
    }
    /// The label a `BRA` jumps to: ``BRA `(.L_x_1)``.
    pub fn branch_target(&self) -> Option<&str> {
        if self.base() != "BRA" {
            return None;
        }
        let start = self.operands.find('(')? + 1;
        let end = start + self.operands[start..].find(')')?;
        Some(&self.operands[start..end])
    }
}

pub struct Sass {
    pub insts: Vec<SassInst>,
    /// Label → index of the instruction that follows it.
    pub labels: BTreeMap<String, usize>,
}

/// Parses `nvdisasm -c` output of a cubin with one kernel.
pub fn parse_sass(text: &str) -> Sass {
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
pub fn sass_loops(s: &Sass) -> Vec<(usize, usize)> {
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

pub fn is_sync(base: &str) -> bool {
    matches!(base, "BAR" | "SYNCS")
}

pub fn is_copy(base: &str) -> bool {
    matches!(base, "LDGSTS" | "UTMALDG" | "UBLKCP")
}

pub fn is_tensor(base: &str) -> bool {
    decode(base).unit == gpusim_isa::UnitClass::Tensor
}

/// The role a k-loop serves: MMA warps (tensor instructions) or copy-only producer warps.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum Role {
    Mma,
    Producer,
}

impl Role {
    pub fn key(self, base: &str) -> bool {
        match self {
            Role::Mma => is_tensor(base),
            Role::Producer => is_copy(base),
        }
    }
}

/// Counts per full mnemonic.
pub type Mix = BTreeMap<String, u64>;

/// The per-iteration mix of the SASS k-loop of `role`: the smallest loop holding a key
/// instruction and a synchronisation. For `Role::Producer`, loops holding tensor instructions do
/// not count (they belong to the MMA warps).
pub fn sass_kloop(s: &Sass, role: Role) -> Option<(Mix, (u32, u32))> {
    let (a, b) = sass_kloop_range(s, role)?;
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

/// The instruction range (first, back-edge `BRA`) of the SASS k-loop of `role`, as
/// [`sass_kloop`] picks it.
pub fn sass_kloop_range(s: &Sass, role: Role) -> Option<(usize, usize)> {
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
    best
}

// ---------------------------------------------------------------------------------------------
// Trace side

/// The k-loop of one warp program: (per-iteration mix, loop step index). The innermost loop
/// holding a key instruction of `role` and a synchronisation; among several, the one that runs
/// most often.
pub fn program_kloop(p: &Program, k: &KernelTrace, role: Role) -> Option<(Mix, usize)> {
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
pub fn flops_per_warp_inst(mnemonic: &str) -> u64 {
    let d = decode(mnemonic);
    match d.tensor {
        Some(t) if d.semantics == Semantics::WgmmaAsync => t.flops() / 4,
        Some(t) => t.flops(),
        None => 0,
    }
}

/// Tensor FLOPs of a mix.
pub fn mix_flops(mix: &Mix) -> u64 {
    mix.iter().map(|(m, n)| flops_per_warp_inst(m) * n).sum()
}

pub fn by_base(mix: &Mix) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (m, n) in mix {
        *out.entry(m.split('.').next().unwrap_or("").to_string()).or_default() += n;
    }
    out
}

pub fn add_scaled(into: &mut Mix, mix: &Mix, warps: u64) {
    for (m, n) in mix {
        *into.entry(m.clone()).or_default() += n * warps;
    }
}

/// One unit of work of a CTA, the unit the per-iteration counts are given in: a k-tile of a GEMM,
/// a KV block of attention.
#[derive(Clone, Copy, Debug)]
pub struct Work {
    /// What a unit is, for messages ("k-tile", "KV block").
    pub name: &'static str,
    /// Tensor FLOPs of one unit, summed over the CTA's MMA warps.
    pub flops: u64,
    /// Bytes one unit copies from global to shared memory (the producer's share).
    pub bytes: u64,
}

/// Bytes one iteration of the loop starting at step `a` copies from global to shared memory
/// (bulk bytes of TMA copies, width × active lanes of `LDGSTS`).
pub fn copy_bytes(k: &KernelTrace, p: &Program, a: usize) -> u64 {
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

/// Per-CTA, per-unit mix of the trace, by role, with a description of each role's warps.
pub fn trace_mix(k: &KernelTrace, work: Work) -> (BTreeMap<Role, Mix>, Vec<String>) {
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
    // Units per loop iteration, per role.
    let mut out: BTreeMap<Role, Mix> = BTreeMap::new();
    let mut notes = Vec::new();
    for role in [Role::Mma, Role::Producer] {
        let of_role: Vec<&Found> = found.iter().filter(|f| f.role == role).collect();
        if of_role.is_empty() {
            continue;
        }
        let (done, whole) = match role {
            Role::Mma => (of_role.iter().map(|f| f.flops * f.warps).sum::<u64>(), work.flops),
            Role::Producer => (of_role.iter().map(|f| f.bytes * f.warps).sum::<u64>(), work.bytes),
        };
        assert!(
            done > 0 && done.is_multiple_of(whole),
            "{role:?} warps of the trace: one k-loop iteration covers {done} {} of the CTA, not a whole number of \
             {}s ({whole} each)",
            if role == Role::Mma { "FLOPs" } else { "bytes" },
            work.name
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
                "trace program {:?} ({} warps): {role:?} loop, {} {}(s) per iteration",
                k.programs[f.prog as usize].name, f.warps, tiles, work.name
            ));
        }
    }
    (out, notes)
}

// ---------------------------------------------------------------------------------------------
// Comparison

pub fn show(mix: &Mix) -> String {
    mix.iter().map(|(m, n)| format!("{n:>4} {m}")).collect::<Vec<_>>().join("\n")
}

/// Compares the per-CTA per-unit mixes in `classes` (base mnemonics) and panics with both listings
/// on a mismatch; a class listed in `known` for this twin, as (twin, class, why), is printed, not
/// asserted.
pub fn compare(
    twin: &str,
    unit: &str,
    classes: &[&str],
    known: &[(&str, &str, &str)],
    sass: &BTreeMap<Role, Mix>,
    trace: &BTreeMap<Role, Mix>,
    notes: &[String],
) {
    let mut sass_all = Mix::new();
    let mut trace_all = Mix::new();
    for m in sass.values() {
        add_scaled(&mut sass_all, m, 1);
    }
    for m in trace.values() {
        add_scaled(&mut trace_all, m, 1);
    }
    let (sb, tb) = (by_base(&sass_all), by_base(&trace_all));
    let mut report = format!("== {twin}: per CTA {unit}\n");
    for n in notes {
        report += &format!("   {n}\n");
    }
    report += &format!("{:<10} {:>6} {:>6}\n", "class", "SASS", "trace");
    let mut failures = Vec::new();
    for &class in classes {
        let (a, b) = (sb.get(class).copied().unwrap_or(0), tb.get(class).copied().unwrap_or(0));
        let known = known.iter().find(|(t, c, _)| *t == twin && *c == class);
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
    assert!(failures.is_empty(), "{twin}: the recipe's loop differs from the compiled twin in {failures:?}\n{report}");
}

/// The SASS side of a twin: per role, the loop mix times the warps that run it, per unit of work.
/// One trip through the twin's loops must be exactly one unit of MMAs.
pub fn sass_mix(sass: &str, roles: &[(Role, u64)], work: Work) -> BTreeMap<Role, Mix> {
    let s = parse_sass(sass);
    let mut out = BTreeMap::new();
    let mut flops = 0;
    for &(role, warps) in roles {
        let (mix, (a, b)) = sass_kloop(&s, role).unwrap_or_else(|| panic!("no {role:?} loop found in the SASS"));
        eprintln!("SASS {role:?} loop: /*{a:04x}*/ .. /*{b:04x}*/, run by {warps} warp(s)");
        flops += mix_flops(&mix) * warps;
        let mut m = Mix::new();
        add_scaled(&mut m, &mix, warps);
        out.insert(role, m);
    }
    assert_eq!(flops, work.flops, "the twin's loop does not do one CTA {} ({work:?}) of MMAs", work.name);
    out
}

/// The checked-in disassembly must be what the twin compiles to now.
pub fn check_reference(name: &str, fresh: &str, arch: &str) {
    let path = repo_root().join("workloads/cuda/sass").join(format!("{name}.sass"));
    let stored = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        stored == fresh,
        "{} is stale (or missing): regenerate it with\n  python3 scripts/sass.py --cache \"$GPUSIM_WHEEL_CACHE\" --arch \
         {arch} workloads/cuda/{name}.cu -o workloads/cuda/sass/{name}.sass",
        path.display()
    );
}
