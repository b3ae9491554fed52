//! `key=value` parameters for [`super::by_name`].

use gpusim_configs::{Arch, Bytes};

use super::{
    CopyEngine, CopyPipeline, Dsmem, L2Read, NAMES, PointerChase, SharedBanks, Stream, StreamKind, UbenchTrace,
    async_copy_pipeline, dsmem_latency, l2_read, pointer_chase, shared_bank_conflicts, stream,
};

/// The parameters of one generator, checked against the keys it accepts.
struct Params<'a> {
    generator: &'a str,
    given: &'a [(String, String)],
    valid: &'static [&'static str],
}

impl<'a> Params<'a> {
    fn new(generator: &'a str, given: &'a [(String, String)], valid: &'static [&'static str]) -> Result<Self, String> {
        for (i, (k, _)) in given.iter().enumerate() {
            if !valid.contains(&k.as_str()) {
                return Err(format!(
                    "unknown parameter `{k}` for `{generator}`; valid parameters: {}",
                    valid.join(", ")
                ));
            }
            if given[..i].iter().any(|(k2, _)| k2 == k) {
                return Err(format!("parameter `{k}` is given twice"));
            }
        }
        Ok(Params { generator, given, valid })
    }

    fn raw(&self, key: &str) -> Option<&'a str> {
        debug_assert!(self.valid.contains(&key), "{key} is not declared for {}", self.generator);
        self.given.iter().find(|(k, _)| k == key).map(|(_, v)| v.trim())
    }

    fn bad(&self, key: &str, value: &str, what: &str) -> String {
        format!("parameter `{key}` of `{}`: `{value}` is not {what}", self.generator)
    }

    fn bytes(&self, key: &str, into: &mut u64) -> Result<(), String> {
        if let Some(v) = self.raw(key) {
            *into = match parse_int(v) {
                Some(n) => n,
                None => v.parse::<Bytes>().map_err(|e| format!("parameter `{key}` of `{}`: {e}", self.generator))?.0,
            };
        }
        Ok(())
    }

    fn bytes32(&self, key: &str, into: &mut u32) -> Result<(), String> {
        let mut v = *into as u64;
        self.bytes(key, &mut v)?;
        *into = u32::try_from(v).map_err(|_| self.bad(key, self.raw(key).unwrap_or(""), "below 4 GiB"))?;
        Ok(())
    }

    fn u64(&self, key: &str, into: &mut u64) -> Result<(), String> {
        if let Some(v) = self.raw(key) {
            *into = parse_int(v).ok_or_else(|| self.bad(key, v, "a non-negative integer"))?;
        }
        Ok(())
    }

    fn u32(&self, key: &str, into: &mut u32) -> Result<(), String> {
        if let Some(v) = self.raw(key) {
            *into = parse_int(v)
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| self.bad(key, v, "a non-negative 32-bit integer"))?;
        }
        Ok(())
    }

    fn opt_u32(&self, key: &str, into: &mut Option<u32>) -> Result<(), String> {
        if let Some(v) = self.raw(key) {
            *into = match v {
                "all" | "default" | "none" | "" => None,
                _ => Some(
                    parse_int(v)
                        .and_then(|n| u32::try_from(n).ok())
                        .ok_or_else(|| self.bad(key, v, "a count or `all`"))?,
                ),
            };
        }
        Ok(())
    }

    fn bool(&self, key: &str, into: &mut bool) -> Result<(), String> {
        if let Some(v) = self.raw(key) {
            *into = match v.to_ascii_lowercase().as_str() {
                "true" | "1" | "yes" | "on" => true,
                "false" | "0" | "no" | "off" => false,
                _ => return Err(self.bad(key, v, "a boolean (true or false)")),
            };
        }
        Ok(())
    }
}

/// Decimal or `0x` hexadecimal, `_` separators allowed.
fn parse_int(s: &str) -> Option<u64> {
    let s = s.replace('_', "");
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

pub(super) fn build(name: &str, given: &[(String, String)], arch: &Arch) -> Result<UbenchTrace, String> {
    match name {
        "pointer-chase" => {
            const KEYS: &[&str] = &[
                "footprint_bytes",
                "stride_bytes",
                "random",
                "passes",
                "max_steps",
                "base_address",
                "bypass_l1",
                "seed",
                "cover_footprint",
            ];
            let ps = Params::new(name, given, KEYS)?;
            let mut p = PointerChase::default();
            ps.bytes("footprint_bytes", &mut p.footprint_bytes)?;
            ps.bytes("stride_bytes", &mut p.stride_bytes)?;
            ps.bool("random", &mut p.random)?;
            ps.u32("passes", &mut p.passes)?;
            ps.u64("max_steps", &mut p.max_steps)?;
            ps.u64("base_address", &mut p.base_address)?;
            ps.bool("bypass_l1", &mut p.bypass_l1)?;
            ps.u64("seed", &mut p.seed)?;
            ps.bool("cover_footprint", &mut p.cover_footprint)?;
            p.validate().map_err(|e| format!("{name}: {e}"))?;
            Ok(pointer_chase(&p))
        }
        "stream-read" | "stream-write" | "stream-copy" | "stream-triad" => {
            const KEYS: &[&str] =
                &["bytes_per_array", "active_sms", "threads_per_cta", "unroll", "triad_loads", "base_address"];
            let ps = Params::new(name, given, KEYS)?;
            let kind = match name {
                "stream-read" => StreamKind::Read,
                "stream-write" => StreamKind::Write,
                "stream-copy" => StreamKind::Copy,
                _ => StreamKind::Triad,
            };
            let mut p = Stream { kind, ..Stream::default() };
            ps.bytes("bytes_per_array", &mut p.bytes_per_array)?;
            ps.opt_u32("active_sms", &mut p.active_sms)?;
            ps.u32("threads_per_cta", &mut p.threads_per_cta)?;
            ps.u32("unroll", &mut p.unroll)?;
            ps.u32("triad_loads", &mut p.triad_loads)?;
            ps.u64("base_address", &mut p.base_address)?;
            p.validate(arch).map_err(|e| format!("{name}: {e}"))?;
            Ok(stream(&p, arch))
        }
        "l2-read" => {
            const KEYS: &[&str] = &[
                "footprint_bytes",
                "total_bytes_read",
                "bypass_l1",
                "width_bytes",
                "threads_per_cta",
                "loads_per_thread",
                "base_address",
            ];
            let ps = Params::new(name, given, KEYS)?;
            let mut p = L2Read::default();
            ps.bytes("footprint_bytes", &mut p.footprint_bytes)?;
            ps.bytes("total_bytes_read", &mut p.total_bytes_read)?;
            ps.bool("bypass_l1", &mut p.bypass_l1)?;
            ps.bytes32("width_bytes", &mut p.width_bytes)?;
            ps.u32("threads_per_cta", &mut p.threads_per_cta)?;
            ps.u32("loads_per_thread", &mut p.loads_per_thread)?;
            ps.u64("base_address", &mut p.base_address)?;
            p.validate().map_err(|e| format!("{name}: {e}"))?;
            Ok(l2_read(&p, arch))
        }
        "shared-banks" => {
            const KEYS: &[&str] = &["ways", "iterations", "store", "threads_per_cta", "unroll"];
            let ps = Params::new(name, given, KEYS)?;
            let mut p = SharedBanks::default();
            ps.u32("ways", &mut p.ways)?;
            ps.u32("iterations", &mut p.iterations)?;
            ps.bool("store", &mut p.store)?;
            ps.u32("threads_per_cta", &mut p.threads_per_cta)?;
            ps.u32("unroll", &mut p.unroll)?;
            p.validate().map_err(|e| format!("{name}: {e}"))?;
            Ok(shared_bank_conflicts(&p))
        }
        "cp-async-pipeline" | "tma-pipeline" => {
            const KEYS: &[&str] =
                &["stages", "tiles", "tile_bytes", "compute_per_tile", "ctas", "threads_per_cta", "base_address"];
            let ps = Params::new(name, given, KEYS)?;
            let engine = if name == "tma-pipeline" { CopyEngine::Tma } else { CopyEngine::CpAsync };
            let mut p = CopyPipeline { engine, ..CopyPipeline::default() };
            ps.u32("stages", &mut p.stages)?;
            ps.u32("tiles", &mut p.tiles)?;
            ps.bytes32("tile_bytes", &mut p.tile_bytes)?;
            ps.u32("compute_per_tile", &mut p.compute_per_tile)?;
            ps.opt_u32("ctas", &mut p.ctas)?;
            ps.u32("threads_per_cta", &mut p.threads_per_cta)?;
            ps.u64("base_address", &mut p.base_address)?;
            p.validate(arch).map_err(|e| format!("{name}: {e}"))?;
            Ok(async_copy_pipeline(&p, arch))
        }
        "dsmem-latency" => {
            const KEYS: &[&str] = &["cluster_size", "remote", "steps", "generic"];
            let ps = Params::new(name, given, KEYS)?;
            let mut p = Dsmem::default();
            ps.u32("cluster_size", &mut p.cluster_size)?;
            ps.bool("remote", &mut p.remote)?;
            ps.u64("steps", &mut p.steps)?;
            ps.bool("generic", &mut p.generic)?;
            p.validate().map_err(|e| format!("{name}: {e}"))?;
            if p.cluster_size > arch.sm.max_cluster_size {
                return Err(format!(
                    "{name}: cluster_size = {} exceeds {}'s limit of {}",
                    p.cluster_size, arch.name, arch.sm.max_cluster_size
                ));
            }
            Ok(dsmem_latency(&p))
        }
        _ => Err(format!("unknown microbenchmark `{name}`; valid names: {}", NAMES.join(", "))),
    }
}
