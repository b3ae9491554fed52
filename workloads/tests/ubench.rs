//! The microbenchmark generators: well-formed, small, deterministic traces whose addresses,
//! dependencies and synchronisation are what each microbenchmark needs.

use std::collections::{BTreeMap, BTreeSet};

use gpusim_configs::{Arch, load_preset, presets};
use gpusim_isa::{Cursor, Inst, KernelTrace, MemTraceSource, OpDesc, Reg, RegRange, Trace, binary, text};
use gpusim_sim_core::{SimOptions, occupancy, simulate};
use gpusim_workloads::ubench::*;

/// A preset without its fixed per-kernel launch time: these tests compare the SM and memory
/// work of small kernels, which a constant 2 µs per kernel would drown.
fn steady(mut a: Arch) -> Arch {
    a.sim.kernel_launch_latency = gpusim_configs::Picos(0);
    a
}

fn h100() -> Arch {
    steady(load_preset("h100-sxm5-80gb").unwrap())
}

fn a100() -> Arch {
    steady(load_preset("a100-sxm4-80gb").unwrap())
}

/// A preset shrunk to `sms` SMs (for address enumeration on small grids).
fn small(sms: u32) -> Arch {
    let mut a = h100();
    a.sm.count = sms;
    a.sm.gpcs = 1;
    a.sm.max_cluster_size = a.sm.max_cluster_size.min(sms);
    gpusim_configs::validate(&a).unwrap();
    a
}

/// One dynamic instruction of one warp.
struct Dyn {
    inst: Inst,
    desc: OpDesc,
    addrs: Vec<u64>,
    base: Option<u64>,
}

/// The dynamic instruction stream of warp `w` of CTA `cta` (linear index).
fn run_warp(k: &KernelTrace, cta: u64, w: usize) -> Vec<Dyn> {
    let c = k.cta(cta);
    let prog = &c.warps[w];
    let mut cur = Cursor::new(prog, c.coord.as_array(), w as u32);
    let mut out = Vec::new();
    while let Some(i) = cur.peek(prog) {
        let i = *i;
        let mut a = [0u64; 32];
        let addrs = if cur.lane_addresses(prog, &i, &mut a) {
            (0..32).filter(|l| i.mask >> l & 1 == 1).map(|l| a[l]).collect()
        } else {
            Vec::new()
        };
        out.push(Dyn { inst: i, desc: k.ops.get(i.op).clone(), addrs, base: cur.base_address(prog, &i) });
        cur.advance();
    }
    out
}

/// Every warp of every CTA: (cta, warp, stream).
fn run_all(k: &KernelTrace) -> Vec<(u64, usize, Vec<Dyn>)> {
    let warps = k.info.warps_per_cta() as usize;
    let mut v = Vec::new();
    for cta in 0..k.info.num_ctas() {
        for w in 0..warps {
            v.push((cta, w, run_warp(k, cta, w)));
        }
    }
    v
}

fn all_defaults(arch: &Arch) -> Vec<(&'static str, UbenchTrace)> {
    NAMES
        .iter()
        .filter(|n| arch.compute_capability >= 90 || !matches!(**n, "tma-pipeline" | "dsmem-latency"))
        .map(|n| (*n, by_name(n, &[], arch).unwrap_or_else(|e| panic!("{n}: {e}"))))
        .collect()
}

fn kv(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn simulate_cycles(arch: &Arch, t: &Trace) -> Vec<u64> {
    let mut src = MemTraceSource::new(t.clone());
    let r = simulate(arch, &mut src, &SimOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    r.kernels.iter().map(|k| k.cycles).collect()
}

// ---------------------------------------------------------------------------------------------
// Every generator

#[test]
fn every_generator_is_well_formed_known_and_round_trips() {
    for arch in [h100(), a100()] {
        for (name, u) in all_defaults(&arch) {
            assert!(!u.description.is_empty());
            assert!(u.timed_kernel < u.trace.kernels.len(), "{name}");
            for (i, k) in u.trace.kernels.iter().enumerate() {
                k.check().unwrap_or_else(|e| panic!("{name}: {e}"));
                assert_eq!(k.info.id as usize, i, "{name}");
                let unknown: Vec<_> = k.ops.iter().filter(|(_, d)| !d.known).map(|(_, d)| d.mnemonic.clone()).collect();
                assert!(unknown.is_empty(), "{name}: unknown opcodes {unknown:?}");
                occupancy(&arch, &k.info).unwrap_or_else(|e| panic!("{name} on {}: {e}", arch.name));
            }
            let txt = text::to_string(&u.trace).unwrap();
            assert_eq!(text::read_trace(name, &txt).unwrap(), u.trace, "{name}: text round trip");
            let bin = binary::to_bytes(&u.trace).unwrap();
            assert_eq!(binary::read_trace(name, &bin).unwrap(), u.trace, "{name}: binary round trip");
        }
    }
}

#[test]
fn generators_are_deterministic() {
    let arch = h100();
    let a = all_defaults(&arch);
    let b = all_defaults(&arch);
    for ((n, x), (_, y)) in a.iter().zip(&b) {
        assert_eq!(x.trace, y.trace, "{n}");
        assert_eq!(x.description, y.description, "{n}");
        assert_eq!(x.measure, y.measure, "{n}");
    }
}

#[test]
fn traces_stay_small() {
    let arch = h100();
    let size = |u: &UbenchTrace| binary::to_bytes(&u.trace).unwrap().len();
    let big = |bytes: &str| by_name("stream-triad", &kv(&[("bytes_per_array", bytes)]), &arch).unwrap();
    // An 8 GiB-per-array triad: a few instructions and a tail layout.
    let t = big("8 GiB");
    assert!(size(&t) < 4096, "{} bytes", size(&t));
    assert!(text::to_string(&t.trace).unwrap().len() < 8192);
    assert_eq!(t.measure, Measure::Bandwidth { bytes: 4 * (8 << 30) });
    // An odd size needs tail programs, still small.
    assert!(size(&big("8589934928")) < 8192);
    for (name, u) in all_defaults(&arch) {
        // The chase carries one address per step (default: 32768 steps).
        let limit = if name == "pointer-chase" { 32 * 32768 } else { 16 << 10 };
        assert!(size(&u) < limit, "{name}: {} bytes", size(&u));
    }
    // A chase over 1 GiB visits max_steps elements: the program stays bounded.
    let chase = by_name("pointer-chase", &kv(&[("footprint_bytes", "1 GiB")]), &arch).unwrap();
    assert!(size(&chase) < 32 * 65536);
    let l2 = by_name("l2-read", &kv(&[("total_bytes_read", "16 GiB")]), &arch).unwrap();
    assert!(size(&l2) < 2048);
}

// ---------------------------------------------------------------------------------------------
// Pointer chase

/// The addresses of the chase's loads, per pass.
fn chase_passes(u: &UbenchTrace, per_pass: u64) -> Vec<Vec<u64>> {
    let k = &u.trace.kernels[0];
    assert_eq!(k.info.num_ctas(), 1);
    assert_eq!(k.info.threads_per_cta(), 1);
    let stream = run_warp(k, 0, 0);
    let loads: Vec<&Dyn> = stream.iter().filter(|d| d.desc.load).collect();
    loads.chunks(per_pass as usize).map(|c| c.iter().map(|d| d.addrs[0]).collect()).collect()
}

#[test]
fn pointer_chase_is_one_dependent_cycle_over_the_elements() {
    for random in [true, false] {
        let p = PointerChase { footprint_bytes: 64 << 10, random, passes: 2, ..PointerChase::default() };
        let u = pointer_chase(&p).unwrap();
        let k = &u.trace.kernels[0];
        let n = (64 << 10) / 128;
        assert_eq!(p.steps(), n);
        assert_eq!(u.measure, Measure::LatencyPerAccess { accesses: 2 * n });
        // One lane, dependent registers.
        for d in run_warp(k, 0, 0) {
            assert_eq!(d.inst.mask, 1, "{}", d.desc.mnemonic);
            if d.desc.load {
                let a = RegRange::new(Reg::r(2), 2);
                assert_eq!((d.inst.dst[0], d.inst.src[0]), (a, a), "each load's address is the previous load's result");
                assert_eq!(d.desc.mnemonic, "LDG.E.64");
                assert_eq!(d.addrs.len(), 1);
            }
        }
        let passes = chase_passes(&u, n);
        assert_eq!(passes.len(), 3, "warm-up + 2 timed passes");
        assert!(passes.iter().all(|q| *q == passes[0]), "every pass walks the same cycle");
        let elems: Vec<u64> = passes[0].iter().map(|a| (a - p.base_address) / 128).collect();
        assert!(passes[0].iter().all(|a| (a - p.base_address).is_multiple_of(128)));
        let set: BTreeSet<u64> = elems.iter().copied().collect();
        assert_eq!(set, (0..n).collect(), "a single cycle over every element");
        if random {
            assert_ne!(elems, (0..n).collect::<Vec<_>>(), "random order");
            // A random cycle rarely steps to the next line.
            let next = elems.windows(2).filter(|w| w[1] == w[0] + 1).count();
            assert!(next < 8, "{next} sequential steps");
        } else {
            assert_eq!(elems, (0..n).collect::<Vec<_>>());
        }
    }
}

#[test]
fn pointer_chase_large_footprints_visit_max_steps_distinct_lines() {
    let p = PointerChase { footprint_bytes: 1 << 30, max_steps: 4096, ..PointerChase::default() };
    let u = pointer_chase(&p).unwrap();
    let pass = &chase_passes(&u, 4096)[0];
    assert_eq!(pass.len(), 4096);
    let lines: BTreeSet<u64> = pass.iter().map(|a| a / 128).collect();
    assert_eq!(lines.len(), 4096);
    assert!(pass.iter().all(|&a| a >= p.base_address && a < p.base_address + (1 << 30)));
    // Spread over the whole footprint, not bunched at its start.
    assert!(pass.iter().any(|&a| a >= p.base_address + (1 << 29)));
    // Other seeds, other chains; the same seed, the same chain.
    assert_ne!(p.chain(), PointerChase { seed: 7, ..p.clone() }.chain());
    assert_eq!(p.chain(), p.clone().chain());
}

#[test]
fn pointer_chase_covering_the_footprint_walks_every_line_with_max_steps_loads() {
    let p =
        PointerChase { footprint_bytes: 8 << 20, max_steps: 1024, cover_footprint: true, ..PointerChase::default() };
    assert_eq!((p.steps(), p.windows(), p.accesses_per_pass()), (1024, 64, 65536));
    let u = pointer_chase(&p).unwrap();
    let prog = &u.trace.kernels[0].programs[0];
    assert!(prog.steps.len() < 1024 + 16, "{} steps", prog.steps.len());
    assert_eq!(u.measure, Measure::LatencyPerAccess { accesses: 65536 });
    let passes = chase_passes(&u, 65536);
    assert_eq!(passes.len(), 2);
    assert_eq!(passes[0], passes[1]);
    let lines: BTreeSet<u64> = passes[0].iter().map(|a| (a - p.base_address) / 128).collect();
    assert_eq!(lines, (0..65536).collect(), "every line of the footprint, once per pass");
    // Random within each window, windows in order.
    for (w, chunk) in passes[0].chunks(1024).enumerate() {
        let lo = p.base_address + w as u64 * 1024 * 128;
        assert!(chunk.iter().all(|&a| a >= lo && a < lo + 1024 * 128));
    }
    let (_, _, extra) = pointer_chase_pair(&p).unwrap();
    assert_eq!(extra, 65536);
    // Without it, the same footprint visits max_steps lines only.
    let q = PointerChase { cover_footprint: false, ..p.clone() };
    assert_eq!(q.accesses_per_pass(), 1024);
    // A footprint within max_steps is unaffected.
    let r = PointerChase { footprint_bytes: 64 << 10, cover_footprint: true, ..PointerChase::default() };
    assert_eq!(
        pointer_chase(&r).unwrap().trace,
        pointer_chase(&PointerChase { cover_footprint: false, ..r }).unwrap().trace
    );
}

#[test]
fn pointer_chase_pair_differs_by_one_pass() {
    let p = PointerChase { footprint_bytes: 32 << 10, stride_bytes: 64, bypass_l1: true, ..PointerChase::default() };
    let (a, b, extra) = pointer_chase_pair(&p).unwrap();
    assert_eq!(extra, 512);
    let (Measure::LatencyPerAccess { accesses: x }, Measure::LatencyPerAccess { accesses: y }) = (a.measure, b.measure)
    else {
        panic!("latency measures")
    };
    assert_eq!(y - x, extra);
    assert_eq!(chase_passes(&a, extra).len() + 1, chase_passes(&b, extra).len());
    let (pa, pb) = (&a.trace.kernels[0].programs[0], &b.trace.kernels[0].programs[0]);
    assert_eq!(pa.dynamic_len() + extra, pb.dynamic_len());
    assert_eq!(pa.exprs, pb.exprs);
    let k = &a.trace.kernels[0];
    assert!(k.ops.iter().any(|(_, d)| d.mnemonic == "LDG.E.64.STRONG.GPU" && d.bypass_l1));
}

#[test]
fn pointer_chase_rejects_bad_parameters() {
    let bad = [
        PointerChase { stride_bytes: 12, ..PointerChase::default() },
        PointerChase { footprint_bytes: 64, ..PointerChase::default() },
        PointerChase { passes: 0, ..PointerChase::default() },
        PointerChase { max_steps: 0, ..PointerChase::default() },
        PointerChase { base_address: 3, ..PointerChase::default() },
    ];
    for p in bad {
        assert!(p.validate().is_err(), "{p:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// STREAM

/// Checks that every array's elements are touched exactly once and the bytes add up.
fn check_stream(p: &Stream, arch: &Arch) {
    let u = stream(p, arch).unwrap();
    let k = &u.trace.kernels[0];
    let stride = p.bytes_per_array.div_ceil(2 << 20) * (2 << 20);
    let units = p.bytes_per_array / 16;
    let mut seen: BTreeMap<(u64, bool), Vec<u32>> = BTreeMap::new();
    let mut bytes = 0u64;
    for (_, _, s) in run_all(k) {
        for d in s.iter().filter(|d| d.desc.load || d.desc.store) {
            assert_eq!(d.desc.width, 16, "{}", d.desc.mnemonic);
            bytes += 16 * d.addrs.len() as u64;
            for &a in &d.addrs {
                let off = a - p.base_address;
                let (array, e) = (off / stride, (off % stride) / 16);
                assert!(e < units, "{p:?}: element {e} past the end");
                let v = seen.entry((array, d.desc.store)).or_insert_with(|| vec![0; units as usize]);
                v[e as usize] += 1;
            }
        }
    }
    assert_eq!(u.measure, Measure::Bandwidth { bytes });
    assert_eq!(bytes, p.arrays() * p.bytes_per_array);
    assert_eq!(seen.len() as u64, p.arrays(), "{p:?}");
    for ((array, store), v) in &seen {
        assert!(v.iter().all(|&n| n == 1), "{p:?}: array {array} (store {store}) not touched exactly once");
    }
    // Grid: 2 CTAs per active SM.
    assert_eq!(k.info.num_ctas(), 2 * p.active_sms.unwrap_or(arch.sm.count) as u64);
}

#[test]
fn stream_touches_every_element_once_and_counts_bytes() {
    let arch = small(3);
    let threads = 64u64;
    let total = 6 * threads;
    // Whole grid-stride steps, then tails of whole warps and a partial warp.
    for units in [total * 5, total * 5 + 64, total * 4 + 37, total * 3 + 100, 5] {
        for kind in [StreamKind::Read, StreamKind::Write, StreamKind::Copy, StreamKind::Triad] {
            for unroll in [1, 2, 3] {
                for triad_loads in [2, 3] {
                    if kind != StreamKind::Triad && triad_loads == 2 {
                        continue;
                    }
                    let p = Stream {
                        kind,
                        bytes_per_array: 16 * units,
                        threads_per_cta: threads as u32,
                        unroll,
                        triad_loads,
                        ..Stream::default()
                    };
                    check_stream(&p, &arch);
                }
            }
        }
    }
    let p = Stream { bytes_per_array: 16 * 1000, threads_per_cta: 64, active_sms: Some(2), ..Stream::default() };
    check_stream(&p, &arch);
}

#[test]
fn stream_loop_bytes_match_the_grid_shape() {
    let arch = h100();
    let p = Stream { kind: StreamKind::Read, bytes_per_array: 264 * 1024 * 16 * 10, ..Stream::default() };
    let u = stream(&p, &arch).unwrap();
    let k = &u.trace.kernels[0];
    assert!(k.layout.overrides.is_empty(), "an exact multiple needs no tail");
    let loads = k.programs[0].dynamic_len();
    let per_warp_loads = run_warp(k, 0, 0).iter().filter(|d| d.desc.load).count() as u64;
    assert_eq!(per_warp_loads, 10);
    assert!(loads > 10);
    // grid × warps × loop count × 16 B × 32 lanes.
    assert_eq!(u.measure, Measure::Bandwidth { bytes: 264 * 32 * 10 * 16 * 32 });
    assert_eq!(k.info.grid.x, 264);
    assert!(k.ops.iter().any(|(_, d)| d.mnemonic == "LDG.E.128.CONSTANT"));
}

#[test]
fn stream_pins_two_ctas_per_sm_on_every_preset() {
    for (name, _) in presets() {
        let arch = load_preset(name).unwrap();
        for threads in [1024, 512, 256] {
            for kind in [StreamKind::Read, StreamKind::Write, StreamKind::Copy, StreamKind::Triad] {
                let p = Stream { kind, threads_per_cta: threads, bytes_per_array: 1 << 20, ..Stream::default() };
                let u = stream(&p, &arch).unwrap();
                let occ = occupancy(&arch, &u.trace.kernels[0].info).unwrap();
                assert_eq!(occ.ctas_per_sm, 2, "{name}, {threads} threads, {kind:?}: {occ:?}");
            }
        }
        assert!(two_cta_spoiler(&arch) > 0, "{name}");
    }
}

#[test]
fn stream_rejects_what_cannot_run_two_ctas_per_sm() {
    let arch = h100();
    let triad4 = Stream { kind: StreamKind::Triad, unroll: 4, ..Stream::default() };
    let e = triad4.validate(&arch).unwrap_err();
    assert!(e.contains("registers"), "{e}");
    assert!(
        Stream { unroll: 4, threads_per_cta: 256, kind: StreamKind::Triad, ..Stream::default() }
            .validate(&arch)
            .is_ok()
    );
    assert!(Stream { active_sms: Some(1000), ..Stream::default() }.validate(&arch).is_err());
    assert!(Stream { bytes_per_array: 24, ..Stream::default() }.validate(&arch).is_err());
    assert!(Stream { threads_per_cta: 100, ..Stream::default() }.validate(&arch).is_err());
}

// ---------------------------------------------------------------------------------------------
// L2 read

#[test]
fn l2_read_matches_rrze_data_sets_and_reads_each_line_reps_times() {
    let arch = a100();
    // RRZE's blockRun for the published cases (doubles: 256 KiB per CTA slice).
    let rrze = |kb: u64| L2Read { footprint_bytes: kb << 10, width_bytes: 8, ..L2Read::default() };
    assert_eq!(rrze(16896).block_run(), 66);
    assert_eq!(rrze(23552).block_run(), 92);
    assert_eq!(L2Read::default().block_run(), 33);
    assert_eq!(L2Read { footprint_bytes: 23 << 20, ..L2Read::default() }.block_run(), 46);

    let p = L2Read {
        footprint_bytes: 3 << 20,
        total_bytes_read: 12 << 20,
        threads_per_cta: 256,
        loads_per_thread: 8,
        ..L2Read::default()
    };
    let u = l2_read(&p, &arch).unwrap();
    assert_eq!(u.timed_kernel, 1);
    assert_eq!(u.trace.kernels.len(), 2);
    assert_eq!(p.effective_footprint(), 3 << 20);
    assert_eq!(p.reps(), 4);
    assert_eq!(u.measure, Measure::Bandwidth { bytes: 12 << 20 });
    for (ki, reps) in [(0, 1u32), (1, 4)] {
        let k = &u.trace.kernels[ki];
        assert_eq!((k.info.grid.x as u64, k.info.grid.y), (p.block_run(), reps));
        let mut count: BTreeMap<u64, u32> = BTreeMap::new();
        let mut bytes = 0;
        for (_, _, s) in run_all(k) {
            for d in s.iter().filter(|d| d.desc.load) {
                assert!(d.desc.bypass_l1, "{}", d.desc.mnemonic);
                bytes += 16 * d.addrs.len() as u64;
                for &a in &d.addrs {
                    *count.entry(a).or_default() += 1;
                }
            }
        }
        assert_eq!(bytes, reps as u64 * (3 << 20));
        assert_eq!(count.len() as u64, (3 << 20) / 16, "the whole data set");
        assert!(count.values().all(|&c| c == reps));
        assert_eq!(*count.keys().next().unwrap(), p.base_address);
    }
    let plain = l2_read(&L2Read { bypass_l1: false, width_bytes: 8, ..L2Read::default() }, &arch).unwrap();
    let ops = &plain.trace.kernels[1].ops;
    assert!(ops.iter().any(|(_, d)| d.mnemonic == "LDG.E.64.CONSTANT" && !d.bypass_l1 && d.width == 8));
}

// ---------------------------------------------------------------------------------------------
// Shared-memory bank conflicts

/// Wavefronts of a 4-byte access: the most distinct words any one bank must serve.
fn conflict_degree(addrs: &[u64]) -> usize {
    let mut banks: BTreeMap<u64, BTreeSet<u64>> = BTreeMap::new();
    for a in addrs {
        banks.entry((a / 4) % 32).or_default().insert(a / 4);
    }
    banks.values().map(|w| w.len()).max().unwrap()
}

#[test]
fn shared_banks_produce_the_requested_conflict() {
    for store in [false, true] {
        for ways in [1, 2, 4, 8, 16, 32] {
            let p = SharedBanks { ways, store, iterations: 64, ..SharedBanks::default() };
            let u = shared_bank_conflicts(&p).unwrap();
            assert_eq!(u.measure, Measure::Cycles);
            assert_eq!(u.trace.kernels.len(), 2);
            for (ki, want) in [(0, ways as usize), (1, 1)] {
                let k = &u.trace.kernels[ki];
                let mut n = 0;
                for (_, _, s) in run_all(k) {
                    for d in s.iter().filter(|d| d.desc.mem == gpusim_isa::MemSpace::Shared) {
                        assert_eq!(d.desc.store, store);
                        assert_eq!(d.addrs.len(), 32);
                        assert_eq!(conflict_degree(&d.addrs), want, "ways {ways}, kernel {ki}");
                        n += 1;
                    }
                }
                assert_eq!(n, 64 * p.threads_per_cta / 32);
                assert!(k.info.smem_bytes as u64 >= 128 * want as u64);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Copy pipelines

#[test]
fn cp_async_pipeline_stage_structure() {
    let arch = a100();
    for stages in 1..=8u32 {
        for tiles in [1u32, 2, 3, 7, 16, 17] {
            let p = CopyPipeline { stages, tiles, ctas: Some(2), compute_per_tile: 20, ..CopyPipeline::default() };
            if p.validate(&arch).is_err() {
                assert!(stages as u64 * 16384 > arch.sm.shared_mem_per_cta.0 - 64);
                continue;
            }
            let u = async_copy_pipeline(&p, &arch).unwrap();
            let k = &u.trace.kernels[0];
            assert_eq!(k.info.smem_bytes, stages * 16384);
            let n = p.per_thread() as usize;
            assert_eq!(n, 8);
            for (cta, w, s) in run_all(k) {
                let count = |m: &str| s.iter().filter(|d| d.desc.mnemonic == m).count();
                assert_eq!(count("LDGSTS.E.BYPASS.128"), tiles as usize * n);
                assert_eq!(count("LDGDEPBAR"), (stages - 1).min(tiles) as usize + tiles as usize);
                assert_eq!(count("BAR.SYNC.DEFER_BLOCKING"), 2 * tiles as usize);
                assert_eq!(count("LDS.128"), tiles as usize * n);
                assert_eq!(count("FFMA"), tiles as usize * 20);
                // Before the wait for tile t, tiles 0..min(T, t + stages) have been issued, in order.
                let mut issued: Vec<u64> = Vec::new();
                let mut waits = 0u64;
                let mut lds_stage = Vec::new();
                for d in &s {
                    match d.desc.mnemonic.as_str() {
                        "LDGSTS.E.BYPASS.128" => issued.push(d.base.unwrap()),
                        "DEPBAR.LE" => {
                            assert_eq!(d.inst.imm, stages as i32 - 1);
                            assert_eq!(issued.len() as u64, (waits + stages as u64).min(tiles as u64) * n as u64);
                            waits += 1;
                        }
                        "LDS.128" => lds_stage.push(d.base.unwrap() / 16384),
                        _ => {}
                    }
                }
                assert_eq!(waits, tiles as u64);
                let region = p.base_address + cta * tiles as u64 * 16384;
                let expect: Vec<u64> = (0..tiles as u64)
                    .flat_map(|t| (0..n as u64).map(move |k| region + t * 16384 + k * 2048 + 512 * w as u64))
                    .collect();
                assert_eq!(issued, expect, "tiles in order, each thread's share");
                let want: Vec<u64> =
                    (0..tiles as u64).flat_map(|t| std::iter::repeat_n(t % stages as u64, n)).collect();
                assert_eq!(lds_stage, want, "tile t is read from stage t % stages");
            }
            if stages == 1 {
                // The wait comes right after the copy is committed: the latency is exposed.
                let s = run_warp(k, 0, 0);
                let i = s.iter().position(|d| d.desc.mnemonic == "DEPBAR.LE").unwrap();
                assert_eq!(s[i].inst.imm, 0);
                assert_eq!(s[i - 1].desc.mnemonic, "LDGDEPBAR");
                assert_eq!(s[i - 2].desc.mnemonic, "LDGSTS.E.BYPASS.128");
            }
        }
    }
}

#[test]
fn tma_pipeline_stage_structure() {
    let arch = h100();
    for stages in 1..=8u32 {
        for tiles in [1u32, 2, 5, 8, 9, 20] {
            let p = CopyPipeline {
                engine: CopyEngine::Tma,
                stages,
                tiles,
                ctas: Some(2),
                compute_per_tile: 9,
                ..CopyPipeline::default()
            };
            let u = async_copy_pipeline(&p, &arch).unwrap();
            let k = &u.trace.kernels[0];
            assert_eq!(k.info.sm_version, 90);
            for (cta, w, s) in run_all(k) {
                let mut issued = Vec::new();
                let mut arrives = 0;
                let mut waits = 0u64;
                for d in &s {
                    match d.desc.mnemonic.as_str() {
                        "UTMALDG.2D" => {
                            assert_eq!(d.inst.mask, 1, "one elected thread");
                            assert_eq!(d.inst.mem.unwrap().bulk_bytes, p.tile_bytes);
                            assert_eq!(issued.len() + 1, arrives, "an expect-tx arrive before each load");
                            issued.push(d.base.unwrap());
                        }
                        "SYNCS.ARRIVE.TRANS64" => {
                            assert_eq!(d.inst.mask, 1);
                            let stage = issued.len() as u64 % stages as u64;
                            assert_eq!(d.base, Some(stages as u64 * 16384 + 8 * stage), "the stage's mbarrier");
                            arrives += 1;
                        }
                        "SYNCS.PHASECHK.TRANS64.TRYWAIT" => {
                            assert_eq!(d.base, Some(stages as u64 * 16384 + 8 * (waits % stages as u64)));
                            if w == 0 {
                                assert_eq!(issued.len() as u64, (waits + stages as u64).min(tiles as u64));
                            }
                            waits += 1;
                        }
                        _ => {}
                    }
                }
                assert_eq!(waits, tiles as u64, "every warp waits for every tile");
                if w == 0 {
                    let region = p.base_address + cta * tiles as u64 * 16384;
                    let expect: Vec<u64> = (0..tiles as u64).map(|t| region + t * 16384).collect();
                    assert_eq!(issued, expect);
                    let inits = s.iter().filter(|d| d.desc.mnemonic == "SYNCS.EXCH.64").count();
                    assert_eq!(inits, stages as usize);
                } else {
                    assert!(issued.is_empty(), "only warp 0 issues");
                }
            }
        }
    }
    let e = CopyPipeline { engine: CopyEngine::Tma, ..CopyPipeline::default() }.validate(&a100()).unwrap_err();
    assert!(e.contains("9.0"), "{e}");
}

// ---------------------------------------------------------------------------------------------
// Distributed shared memory

#[test]
fn dsmem_chain_targets_the_requested_rank() {
    for (remote, generic) in [(true, true), (false, true), (false, false)] {
        let p = Dsmem { remote, generic, steps: 256, ..Dsmem::default() };
        let u = dsmem_latency(&p).unwrap();
        let k = &u.trace.kernels[0];
        assert_eq!(k.info.cluster.x, 2);
        assert_eq!(k.info.grid.x, 2);
        assert_eq!(u.measure, Measure::LatencyPerAccess { accesses: 256 });
        let s = run_warp(k, 0, 0);
        let chain: Vec<&Dyn> = s.iter().filter(|d| d.desc.load).collect();
        assert_eq!(chain.len(), 256);
        for d in &chain {
            assert_eq!(d.inst.mask, 1);
            assert_eq!(d.addrs.len(), 1);
            assert_eq!(d.inst.dst[0], RegRange::one(Reg::r(6)));
            assert_eq!(d.inst.src[0].first, Reg::r(6), "dependent on the previous load");
            if generic {
                assert_eq!(d.desc.mnemonic, "LD.E");
                let rank = if remote { 1 } else { 0 };
                let w = CLUSTER_SHARED_WINDOW + rank * CLUSTER_SHARED_RANK_STRIDE;
                assert!(d.addrs[0] >= w && d.addrs[0] < w + (16 << 10));
            } else {
                assert_eq!(d.desc.mnemonic, "LDS");
                assert!(d.addrs[0] < 16 << 10);
            }
        }
        // The peer CTA only initialises its buffer.
        assert!(run_warp(k, 1, 0).iter().all(|d| !d.desc.load));
    }
    assert!(Dsmem { remote: true, generic: false, ..Dsmem::default() }.validate().is_err());
    let (a, b, extra) = dsmem_latency_pair(&Dsmem::default()).unwrap();
    assert_eq!(b.trace.kernels[0].programs[0].dynamic_len() - a.trace.kernels[0].programs[0].dynamic_len(), 4 * extra);
}

// ---------------------------------------------------------------------------------------------
// by_name

#[test]
fn by_name_parses_parameters_and_reports_errors() {
    let arch = h100();
    let e = by_name("stream-sum", &[], &arch).unwrap_err();
    assert!(e.contains("unknown microbenchmark `stream-sum`") && e.contains("stream-triad"), "{e}");
    let e = by_name("l2-read", &kv(&[("footprint", "1 MiB")]), &arch).unwrap_err();
    assert!(e.contains("unknown parameter `footprint`") && e.contains("footprint_bytes"), "{e}");
    let e = by_name("pointer-chase", &kv(&[("random", "maybe")]), &arch).unwrap_err();
    assert!(e.contains("random") && e.contains("boolean"), "{e}");
    let e = by_name("pointer-chase", &kv(&[("passes", "1"), ("passes", "2")]), &arch).unwrap_err();
    assert!(e.contains("twice"), "{e}");
    let e = by_name("shared-banks", &kv(&[("ways", "3")]), &arch).unwrap_err();
    assert!(e.contains("ways"), "{e}");
    let e = by_name("dsmem-latency", &kv(&[("cluster_size", "32")]), &arch).unwrap_err();
    assert!(e.contains("cluster_size"), "{e}");

    let u = by_name(
        "pointer-chase",
        &kv(&[("footprint_bytes", "16 KiB"), ("stride_bytes", "64"), ("random", "false"), ("base_address", "0x1000")]),
        &arch,
    )
    .unwrap();
    assert_eq!(u.measure, Measure::LatencyPerAccess { accesses: 256 });
    assert_eq!(chase_passes(&u, 256)[0][..2], [0x1000, 0x1040]);
    let u = by_name("stream-copy", &kv(&[("bytes_per_array", "1 MiB"), ("active_sms", "4")]), &arch).unwrap();
    assert_eq!(u.measure, Measure::Bandwidth { bytes: 2 << 20 });
    assert_eq!(u.trace.kernels[0].info.grid.x, 8);
    let u = by_name("stream-copy", &kv(&[("active_sms", "all")]), &arch).unwrap();
    assert_eq!(u.trace.kernels[0].info.grid.x, 2 * arch.sm.count);
    let u = by_name("tma-pipeline", &kv(&[("stages", "4"), ("tile_bytes", "8 KiB"), ("ctas", "3")]), &arch).unwrap();
    assert_eq!(u.trace.kernels[0].info.grid.x, 3);
    assert_eq!(u.trace.kernels[0].info.smem_bytes, 4 * 8192 + 32);
    let u = by_name("stream-triad", &kv(&[("triad_loads", "2")]), &arch).unwrap();
    assert_eq!(u.measure, Measure::Bandwidth { bytes: 3 * (256 << 20) });
}

// ---------------------------------------------------------------------------------------------
// A few small simulations: the traces exercise what they are meant to.

#[test]
fn simulated_bank_conflicts_cost_about_ways_times_more() {
    let arch = h100();
    let u = shared_bank_conflicts(&SharedBanks { ways: 8, iterations: 256, ..SharedBanks::default() }).unwrap();
    let c = simulate_cycles(&arch, &u.trace);
    assert!(c[0] > 4 * c[1], "8-way {} vs conflict-free {}", c[0], c[1]);
}

#[test]
fn simulated_pointer_chase_pair_gives_a_per_access_latency() {
    let arch = h100();
    let latency = |p: PointerChase| {
        let (a, b, extra) = pointer_chase_pair(&p).unwrap();
        let (c1, c2) = (simulate_cycles(&arch, &a.trace)[0], simulate_cycles(&arch, &b.trace)[0]);
        assert!(c2 > c1);
        (c2 - c1) as f64 / extra as f64
    };
    // L1-resident when the L1 is modelled; L2-resident and L1-bypassing.
    let l1 = latency(PointerChase { footprint_bytes: 32 << 10, ..PointerChase::default() });
    let l2 = latency(PointerChase { footprint_bytes: 1 << 20, bypass_l1: true, ..PointerChase::default() });
    assert!(l1 >= 1.0 && l1 <= l2 && l2 < 5000.0, "L1 {l1}, L2 {l2} cycles per access");
}

#[test]
fn simulated_three_stage_cp_async_hides_copy_latency() {
    let arch = a100();
    let cycles = |stages| {
        let p = CopyPipeline { stages, tiles: 8, ctas: Some(4), ..CopyPipeline::default() };
        simulate_cycles(&arch, &async_copy_pipeline(&p, &arch).unwrap().trace)[0]
    };
    let (one, three) = (cycles(1), cycles(3));
    assert!(three < one, "3 stages {three} cycles, 1 stage {one}");
}
