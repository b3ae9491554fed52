//! Cross-field rules: parameters that are each in range but together describe an impossible
//! chip. [`validate`] runs on every loaded chip; call it on an `Arch` built or changed by hand.

use gpusim_isa::UnitClass;

use crate::arch::Arch;
use crate::error::ConfigError;
use crate::field::rate_keys;
use crate::units::Bytes;

/// Scheduling policies `scheduler.policy` may name.
pub const POLICIES: [&str; 3] = ["gto", "lrr", "two_level"];

/// Memory models `sim.memory_model` may name (the registry is sim-core's `mem::MODELS`; a test
/// there checks that the two agree).
pub const MEMORY_MODELS: [&str; 2] = ["hierarchy", "simple"];

/// Launch modes `sim.launch` may name: kernels launched one by one on their streams, or replayed
/// as one CUDA graph ([`crate::SimParams::launch_gap`]).
pub const LAUNCH_MODES: [&str; 2] = ["eager", "graph"];

fn rule(ok: bool, keys: &[&str], message: impl FnOnce() -> String) -> Result<(), ConfigError> {
    if ok {
        return Ok(());
    }
    Err(ConfigError::Invalid { keys: keys.iter().map(|k| k.to_string()).collect(), message: message(), at: None })
}

/// Checks every rule; the error names the first rule broken and all the parameters it involves.
pub fn validate(a: &Arch) -> Result<(), ConfigError> {
    chip(a)?;
    sm(a)?;
    shared(a)?;
    pipes(a)?;
    tensor(a)?;
    memory(a)
}

fn chip(a: &Arch) -> Result<(), ConfigError> {
    let cc = a.compute_capability;
    rule((10..200).contains(&cc), &["compute_capability"], || {
        format!("compute capability {}.{} is not one of a CUDA GPU", cc / 10, cc % 10)
    })?;
    rule(a.clocks.sm.0 > 0, &["clocks.sm"], || "the SM clock must be > 0".into())?;
    rule(a.clocks.memory.0 > 0, &["clocks.memory"], || "the memory clock must be > 0".into())?;
    rule(a.clocks.sm_tensor_load.0 <= a.clocks.sm.0, &["clocks.sm_tensor_load", "clocks.sm"], || {
        format!(
            "the clock under tensor load ({}) must not exceed the SM clock ({})",
            a.clocks.sm_tensor_load, a.clocks.sm
        )
    })?;
    rule(a.sim.watchdog_cycles.0 >= 1, &["sim.watchdog_cycles"], || "the watchdog needs at least 1 cycle".into())
}

fn sm(a: &Arch) -> Result<(), ConfigError> {
    let s = &a.sm;
    rule(s.count >= 1, &["sm.count"], || "a chip needs at least one SM".into())?;
    rule(s.gpcs >= 1 && s.gpcs <= s.count, &["sm.gpcs", "sm.count"], || {
        format!("{} GPCs for {} SMs: need 1 ≤ gpcs ≤ count so that every GPC has an SM", s.gpcs, s.count)
    })?;
    rule(s.max_cluster_size <= s.count / s.gpcs.max(1), &["sm.max_cluster_size", "sm.count", "sm.gpcs"], || {
        format!(
            "a cluster of {} CTAs must fit in one GPC, which has at least {} SMs ({} SMs / {} GPCs)",
            s.max_cluster_size,
            s.count / s.gpcs.max(1),
            s.count,
            s.gpcs
        )
    })?;
    rule(
        a.compute_capability >= 90 || s.max_cluster_size == 1,
        &["sm.max_cluster_size", "compute_capability"],
        || "thread-block clusters need compute capability 9.0 or later; set max_cluster_size = 1".into(),
    )?;
    rule(s.sub_cores >= 1 && s.max_warps.is_multiple_of(s.sub_cores), &["sm.max_warps", "sm.sub_cores"], || {
        format!("{} warps do not divide evenly over {} sub-cores", s.max_warps, s.sub_cores)
    })?;
    rule(s.max_threads <= 32 * s.max_warps, &["sm.max_threads", "sm.max_warps"], || {
        format!("{} threads need more than {} warps of 32", s.max_threads, s.max_warps)
    })?;
    rule(s.max_ctas >= 1 && s.max_ctas <= s.max_warps, &["sm.max_ctas", "sm.max_warps"], || {
        format!("{} resident CTAs need at least one warp each, but an SM holds {} warps", s.max_ctas, s.max_warps)
    })?;
    rule(
        s.register_alloc_unit >= 1 && s.registers.is_multiple_of(s.register_alloc_unit),
        &["sm.registers", "sm.register_alloc_unit"],
        || {
            format!(
                "{} registers are not a whole number of {}-register allocation units",
                s.registers, s.register_alloc_unit
            )
        },
    )?;
    rule(
        (1..=255).contains(&s.max_registers_per_thread) && 32 * s.max_registers_per_thread <= s.registers,
        &["sm.max_registers_per_thread", "sm.registers"],
        || {
            format!(
                "one warp at {} registers per thread does not fit in {} registers",
                s.max_registers_per_thread, s.registers
            )
        },
    )?;
    rule(s.lsu_queue_depth >= 1, &["sm.lsu_queue_depth"], || "the LSU queue needs at least one entry".into())?;
    let sched = &a.scheduler;
    rule(POLICIES.contains(&sched.policy.as_str()), &["scheduler.policy"], || {
        format!("unknown scheduling policy `{}`; use one of {}", sched.policy, POLICIES.join(", "))
    })?;
    rule(MEMORY_MODELS.contains(&a.sim.memory_model.as_str()), &["sim.memory_model"], || {
        format!("unknown memory model `{}`; use one of {}", a.sim.memory_model, MEMORY_MODELS.join(", "))
    })?;
    rule(LAUNCH_MODES.contains(&a.sim.launch.as_str()), &["sim.launch"], || {
        format!("unknown launch mode `{}`; use one of {}", a.sim.launch, LAUNCH_MODES.join(", "))
    })?;
    let per_sub_core = s.max_warps / s.sub_cores.max(1);
    rule(
        sched.active_warps >= 1 && sched.active_warps <= per_sub_core,
        &["scheduler.active_warps", "sm.max_warps", "sm.sub_cores"],
        || {
            format!(
                "an active set of {} warps is not within 1 ..= {per_sub_core} warps per sub-core",
                sched.active_warps
            )
        },
    )
}

fn shared(a: &Arch) -> Result<(), ConfigError> {
    let s = &a.sm;
    rule(s.shared_mem_alloc_unit.0 >= 1, &["sm.shared_mem_alloc_unit"], || "the allocation unit must be ≥ 1 B".into())?;
    rule(
        s.shared_mem_per_cta.0 + s.shared_mem_reserved_per_cta.0 <= s.shared_mem_per_sm.0,
        &["sm.shared_mem_per_cta", "sm.shared_mem_reserved_per_cta", "sm.shared_mem_per_sm"],
        || {
            format!(
                "a CTA's {} plus the {} reserved per CTA exceed the {} of shared memory per SM",
                s.shared_mem_per_cta, s.shared_mem_reserved_per_cta, s.shared_mem_per_sm
            )
        },
    )?;
    rule(s.shared_mem_per_sm <= a.l1.sram, &["sm.shared_mem_per_sm", "l1.sram"], || {
        format!("{} of shared memory does not fit in {} of L1/shared SRAM", s.shared_mem_per_sm, a.l1.sram)
    })?;
    let c = &s.shared_mem_carveouts;
    rule(!c.is_empty() && c.windows(2).all(|w| w[0] < w[1]), &["sm.shared_mem_carveouts"], || {
        "carveouts must be listed, strictly ascending".into()
    })?;
    rule(c.iter().all(|&b| b <= a.l1.sram), &["sm.shared_mem_carveouts", "l1.sram"], || {
        format!("every carveout must fit in the {} of L1/shared SRAM", a.l1.sram)
    })?;
    rule(c.last() == Some(&s.shared_mem_per_sm), &["sm.shared_mem_carveouts", "sm.shared_mem_per_sm"], || {
        format!("the largest carveout must be shared_mem_per_sm ({})", s.shared_mem_per_sm)
    })?;
    rule(a.l1.shared_banks >= 1 && a.l1.shared_bank_width.0 >= 1, &["l1.shared_banks", "l1.shared_bank_width"], || {
        "shared memory needs at least one bank of at least one byte".into()
    })
}

fn pipes(a: &Arch) -> Result<(), ConfigError> {
    for class in UnitClass::ALL {
        let t = a.pipes.get(class);
        let key = format!("pipes.{}", class.name());
        rule(t.issue_interval.0 >= 1, &[&format!("{key}.issue_interval")], || {
            format!("the {class} pipe's issue interval must be ≥ 1 cycle")
        })?;
        rule(t.latency.0 >= 1, &[&format!("{key}.latency")], || {
            format!("the {class} pipe's latency must be ≥ 1 cycle")
        })?;
    }
    for (base, t) in &a.opcodes {
        let key = format!("opcodes.{base}");
        rule(gpusim_isa::opcode::lookup(base).is_some(), &[&key], || {
            format!("`{base}` is not a base mnemonic of the ISA opcode table")
        })?;
        rule(t.issue_interval.0 >= 1, &[&format!("{key}.issue_interval")], || {
            format!("{base}'s issue interval must be ≥ 1 cycle")
        })?;
        rule(t.latency.0 >= 1, &[&format!("{key}.latency")], || format!("{base}'s latency must be ≥ 1 cycle"))?;
    }
    Ok(())
}

fn tensor(a: &Arch) -> Result<(), ConfigError> {
    let known = rate_keys();
    let maps = [
        ("flops_per_clk_per_sm", &a.tensor.flops_per_clk_per_sm),
        ("mma_sync_flops_per_clk_per_sm", &a.tensor.mma_sync_flops_per_clk_per_sm),
    ];
    for (map, rates) in maps {
        for (k, &v) in rates {
            let key = format!("tensor.{map}.{k}");
            rule(known.contains(&k.as_str()), &[&key], || {
                format!("`{k}` is not a tensor input type ({})", known.join(", "))
            })?;
            rule(v.is_finite() && v >= 0.0, &[&key], || format!("a tensor rate must be a finite number ≥ 0, not {v}"))?;
        }
    }
    rule(
        a.tensor.mma_latency.0 >= 1 && a.tensor.wgmma_base_latency.0 >= 1,
        &["tensor.mma_latency", "tensor.wgmma_base_latency"],
        || "tensor latencies must be ≥ 1 cycle".into(),
    )
}

fn positive_rate(v: f64) -> bool {
    v.is_finite() && v > 0.0
}

fn memory(a: &Arch) -> Result<(), ConfigError> {
    let (l1, l2) = (&a.l1, &a.l2);
    rule(
        l1.sector.0 >= 1 && l1.line.0 >= 1 && l1.line.0.is_multiple_of(l1.sector.0),
        &["l1.line", "l1.sector"],
        || format!("an L1 line of {} is not a whole number of {} sectors", l1.line, l1.sector),
    )?;
    rule(l1.sector.0 >= 1 && l2.line.0.is_multiple_of(l1.sector.0), &["l2.line", "l1.sector"], || {
        format!("an L2 line of {} is not a whole number of {} L1 sectors", l2.line, l1.sector)
    })?;
    let (line, sector) = a.model_line_and_sector();
    rule(line / sector <= crate::arch::MAX_SECTORS_PER_LINE, &["l2.line", "l1.sector"], || {
        format!(
            "an L2 line of {} holds {} sectors of {} (as the model rounds them); it tracks at most {}",
            l2.line,
            line / sector,
            Bytes(sector),
            crate::arch::MAX_SECTORS_PER_LINE
        )
    })?;
    rule(l1.assoc >= 1, &["l1.assoc"], || "the L1 needs ≥ 1 way".into())?;
    rule(l1.line <= l1.sram, &["l1.line", "l1.sram"], || {
        format!("an L1 line of {} exceeds the {} SRAM", l1.line, l1.sram)
    })?;
    let l1_set = l1.line.0 * l1.assoc as u64;
    let l1_sets_whole = |carveout: &Bytes| l1.sram.0.saturating_sub(carveout.0).is_multiple_of(l1_set);
    rule(
        l1_sets_whole(&Bytes(0)) && a.sm.shared_mem_carveouts.iter().all(l1_sets_whole),
        &["l1.sram", "l1.assoc", "l1.line", "sm.shared_mem_carveouts"],
        || {
            format!(
                "for some carveout, what is left of the {} SRAM is not a whole number of {}-way sets of {} lines",
                l1.sram, l1.assoc, l1.line
            )
        },
    )?;
    rule(positive_rate(l1.bandwidth.0), &["l1.bandwidth"], || "the L1 bandwidth must be > 0".into())?;
    rule(l1.miss_bandwidth.0 == 0.0 || positive_rate(l1.miss_bandwidth.0), &["l1.miss_bandwidth"], || {
        "the L1 miss bandwidth must be > 0 and finite, or 0 for no limit".into()
    })?;
    rule(l1.hit_latency < l2.hit_latency, &["l1.hit_latency", "l2.hit_latency"], || {
        format!("an L1 hit ({}) must be faster than an L2 hit ({})", l1.hit_latency, l2.hit_latency)
    })?;
    rule(
        l2.partitions >= 1 && l2.slices >= l2.partitions && l2.slices.is_multiple_of(l2.partitions),
        &["l2.slices", "l2.partitions"],
        || format!("{} L2 slices do not divide evenly into {} partitions", l2.slices, l2.partitions),
    )?;
    let set_bytes = l2.slices as u64 * l2.assoc as u64 * l2.line.0;
    rule(
        set_bytes > 0 && l2.size.0.is_multiple_of(set_bytes) && l2.size.0 / set_bytes >= 1,
        &["l2.size", "l2.slices", "l2.assoc", "l2.line"],
        || {
            format!(
                "{} of L2 is not a whole number ≥ 1 of sets across {} slices × {} ways × {} lines",
                l2.size, l2.slices, l2.assoc, l2.line
            )
        },
    )?;
    // The memory model tracks one line size through both levels (an L1 line is the L2 line it
    // caches), so a chip whose levels differ would silently run with the L2's.
    rule(l1.line == l2.line, &["l1.line", "l2.line"], || {
        format!("the model needs equal L1 and L2 lines (l1.line {}, l2.line {})", l1.line, l2.line)
    })?;
    rule(positive_rate(l2.slice_bandwidth.0), &["l2.slice_bandwidth"], || "the L2 slice bandwidth must be > 0".into())?;
    rule(positive_rate(a.noc.sm_port_bandwidth.0), &["noc.sm_port_bandwidth"], || {
        "the SM port bandwidth must be > 0".into()
    })?;
    let h = &a.hbm;
    rule(positive_rate(h.bandwidth.0), &["hbm.bandwidth"], || "the HBM bandwidth must be a finite number > 0".into())?;
    rule(h.stacks >= 1 && h.channels_per_stack >= 1, &["hbm.stacks", "hbm.channels_per_stack"], || {
        "HBM needs at least one stack with at least one channel".into()
    })?;
    rule(h.size.0 >= 1, &["hbm.size"], || "HBM size must be > 0".into())?;
    rule(h.latency.0 > 0, &["hbm.latency"], || "the DRAM latency must be > 0".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::{BytesPerCycle, BytesPerSec, Cycles, Hertz, Picos};

    fn base() -> Arch {
        crate::load_preset("h100-sxm5-80gb").unwrap()
    }

    /// Each rule, broken on purpose: the mutation and the first key the error must name.
    #[test]
    fn every_rule_rejects_an_impossible_chip() {
        type Break = fn(&mut Arch);
        let cases: Vec<(&str, Break)> = vec![
            ("compute_capability", |a| a.compute_capability = 5),
            ("clocks.sm", |a| a.clocks.sm = Hertz(0)),
            ("clocks.memory", |a| a.clocks.memory = Hertz(0)),
            ("sim.watchdog_cycles", |a| a.sim.watchdog_cycles = Cycles(0)),
            ("sm.count", |a| a.sm.count = 0),
            ("sm.gpcs", |a| a.sm.gpcs = 200),
            ("sm.gpcs", |a| a.sm.gpcs = 0),
            ("sm.max_cluster_size", |a| a.sm.max_cluster_size = 32),
            ("sm.max_cluster_size", |a| a.compute_capability = 80),
            ("sm.max_warps", |a| a.sm.max_warps = 63),
            ("sm.max_warps", |a| a.sm.sub_cores = 0),
            ("sm.max_threads", |a| a.sm.max_threads = 4096),
            ("sm.max_ctas", |a| a.sm.max_ctas = 65),
            ("sm.registers", |a| a.sm.register_alloc_unit = 1000),
            ("sm.max_registers_per_thread", |a| a.sm.max_registers_per_thread = 300),
            ("sm.max_registers_per_thread", |a| a.sm.registers = 4096),
            ("scheduler.policy", |a| a.scheduler.policy = "fifo".into()),
            ("scheduler.active_warps", |a| a.scheduler.active_warps = 17),
            ("sm.shared_mem_alloc_unit", |a| a.sm.shared_mem_alloc_unit = Bytes(0)),
            ("sm.shared_mem_per_cta", |a| a.sm.shared_mem_per_cta = a.sm.shared_mem_per_sm),
            ("sm.shared_mem_per_sm", |a| a.l1.sram = Bytes(200 << 10)),
            ("sm.shared_mem_carveouts", |a| a.sm.shared_mem_carveouts.swap(1, 2)),
            ("sm.shared_mem_carveouts", |a| a.sm.shared_mem_carveouts.clear()),
            ("sm.shared_mem_carveouts", |a| {
                a.sm.shared_mem_carveouts.push(Bytes(300 << 10));
            }),
            ("sm.shared_mem_carveouts", |a| {
                a.sm.shared_mem_carveouts.pop();
            }),
            ("l1.shared_banks", |a| a.l1.shared_banks = 0),
            ("pipes.fp32.issue_interval", |a| a.pipes.by_class[UnitClass::Fp32.index()].issue_interval = Cycles(0)),
            ("pipes.mem.latency", |a| a.pipes.by_class[UnitClass::Mem.index()].latency = Cycles(0)),
            ("opcodes.FROB", |a| {
                a.opcodes.insert("FROB".into(), a.pipes.get(UnitClass::Misc));
            }),
            ("opcodes.DFMA.issue_interval", |a| {
                let t = crate::PipeTiming { latency: Cycles(8), issue_interval: Cycles(0) };
                a.opcodes.insert("DFMA".into(), t);
            }),
            ("tensor.flops_per_clk_per_sm.fp9", |a| {
                a.tensor.flops_per_clk_per_sm.insert("fp9".into(), 1.0);
            }),
            ("tensor.flops_per_clk_per_sm.bf16", |a| {
                a.tensor.flops_per_clk_per_sm.insert("bf16".into(), -1.0);
            }),
            ("tensor.flops_per_clk_per_sm.bf16", |a| {
                a.tensor.flops_per_clk_per_sm.insert("bf16".into(), f64::NAN);
            }),
            ("tensor.mma_sync_flops_per_clk_per_sm.fp9", |a| {
                a.tensor.mma_sync_flops_per_clk_per_sm.insert("fp9".into(), 1.0);
            }),
            ("tensor.mma_sync_flops_per_clk_per_sm.bf16", |a| {
                a.tensor.mma_sync_flops_per_clk_per_sm.insert("bf16".into(), f64::INFINITY);
            }),
            ("tensor.mma_latency", |a| a.tensor.mma_latency = Cycles(0)),
            ("l1.line", |a| a.l1.line = Bytes(100)),
            ("l1.line", |a| a.l1.line = Bytes(0)),
            ("l2.line", |a| a.l2.line = Bytes(48)),
            ("l1.line", |a| a.l1.line = Bytes(64)),
            ("l1.assoc", |a| a.l1.assoc = 0),
            ("l2.line", |a| {
                // 64 sectors of 8 B in a 512 B line (with the L1's line, as the model needs).
                (a.l1.sector, a.l1.line, a.l2.line) = (Bytes(8), Bytes(512), Bytes(512));
            }),
            ("l1.line", |a| a.l1.line = Bytes(a.l1.sram.0 * 2)),
            ("l1.sram", |a| a.l1.assoc = 64),
            ("l1.sram", |a| a.l1.sram = Bytes(a.l1.sram.0 + 1024)),
            ("l1.bandwidth", |a| a.l1.bandwidth = BytesPerCycle(0.0)),
            ("l1.miss_bandwidth", |a| a.l1.miss_bandwidth = BytesPerCycle(-1.0)),
            ("l1.miss_bandwidth", |a| a.l1.miss_bandwidth = BytesPerCycle(f64::INFINITY)),
            ("l1.hit_latency", |a| a.l1.hit_latency = Cycles(1000)),
            ("l2.slices", |a| a.l2.partitions = 3),
            ("l2.slices", |a| a.l2.partitions = 200),
            ("l2.size", |a| a.l2.size = Bytes(a.l2.size.0 + 128)),
            ("l2.size", |a| a.l2.size = Bytes(1 << 20)),
            ("l2.slice_bandwidth", |a| a.l2.slice_bandwidth = BytesPerCycle(0.0)),
            ("noc.sm_port_bandwidth", |a| a.noc.sm_port_bandwidth = BytesPerCycle(f64::INFINITY)),
            ("hbm.bandwidth", |a| a.hbm.bandwidth = BytesPerSec(0.0)),
            ("hbm.stacks", |a| a.hbm.stacks = 0),
            ("hbm.size", |a| a.hbm.size = Bytes(0)),
            ("hbm.latency", |a| a.hbm.latency = Picos(0)),
        ];
        validate(&base()).unwrap();
        for (key, break_it) in cases {
            let mut a = base();
            break_it(&mut a);
            let e = validate(&a).expect_err(key);
            assert_eq!(e.key(), Some(key), "{e}");
            assert!(e.to_string().starts_with("impossible chip: "), "{e}");
        }
    }
}
