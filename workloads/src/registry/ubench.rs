//! The microbenchmarks as registry entries.

use gpusim_configs::Arch;

use super::{Generated, Generator, ParamGroup};
use crate::params::{Param, ParamInfo, WorkloadError, apply, describe};
use crate::ubench::params as t;
use crate::ubench::{
    CopyEngine, CopyPipeline, Dsmem, L2Read, PointerChase, SharedBanks, Stream, StreamKind, UbenchTrace,
    async_copy_pipeline, dsmem_latency, l2_read, pointer_chase, shared_bank_conflicts, stream,
};

fn group<T>(table: &[Param<T>], defaults: &T) -> Vec<ParamGroup> {
    let params: Vec<ParamInfo> = describe(table, Some(defaults));
    vec![ParamGroup { title: "parameters", params }]
}

fn done(u: UbenchTrace) -> Generated {
    Generated { trace: u.trace, description: u.description, measure: Some(u.measure), timed_kernel: u.timed_kernel }
}

fn invalid(name: &str, e: String) -> WorkloadError {
    WorkloadError(format!("{name}: {e}"))
}

pub(super) const POINTER_CHASE: Generator = Generator {
    name: "pointer-chase",
    summary: "dependent loads of one thread over a footprint (load latency; HPMLL, RRZE gpu-latency)",
    params: || group(t::POINTER_CHASE, &PointerChase::default()),
    build: |name, given, _arch| {
        let mut p = PointerChase::default();
        apply(name, t::POINTER_CHASE, given, &mut p)?;
        p.validate().map_err(|e| invalid(name, e))?;
        Ok(done(pointer_chase(&p)?))
    },
};

fn stream_entry(
    name: &str,
    kind: StreamKind,
    given: &[(String, String)],
    arch: &Arch,
) -> Result<Generated, WorkloadError> {
    let mut p = Stream { kind, ..Stream::default() };
    apply(name, t::STREAM, given, &mut p)?;
    p.validate(arch).map_err(|e| invalid(name, e))?;
    Ok(done(stream(&p, arch)?))
}

macro_rules! stream_generator {
    ($NAME:ident, $name:literal, $kind:expr, $summary:literal) => {
        pub(super) const $NAME: Generator = Generator {
            name: $name,
            summary: $summary,
            params: || group(t::STREAM, &Stream { kind: $kind, ..Stream::default() }),
            build: |name, given, arch| stream_entry(name, $kind, given, arch),
        };
    };
}

stream_generator!(STREAM_READ, "stream-read", StreamKind::Read, "STREAM read: DRAM read bandwidth (RRZE gpu-stream)");
stream_generator!(STREAM_WRITE, "stream-write", StreamKind::Write, "STREAM write: DRAM write bandwidth");
stream_generator!(STREAM_COPY, "stream-copy", StreamKind::Copy, "STREAM copy: a[i] = b[i]");
stream_generator!(STREAM_TRIAD, "stream-triad", StreamKind::Triad, "STREAM triad: a[i] = b[i] + s·c[i]");

pub(super) const L2_READ: Generator = Generator {
    name: "l2-read",
    summary: "L2 read bandwidth at a data-set size (RRZE gpu-l2-cache)",
    params: || group(t::L2_READ, &L2Read::default()),
    build: |name, given, arch| {
        let mut p = L2Read::default();
        apply(name, t::L2_READ, given, &mut p)?;
        p.validate().map_err(|e| invalid(name, e))?;
        Ok(done(l2_read(&p, arch)?))
    },
};

pub(super) const SHARED_BANKS: Generator = Generator {
    name: "shared-banks",
    summary: "n-way shared-memory bank conflicts, with the conflict-free reference kernel",
    params: || group(t::SHARED_BANKS, &SharedBanks::default()),
    build: |name, given, _arch| {
        let mut p = SharedBanks::default();
        apply(name, t::SHARED_BANKS, given, &mut p)?;
        p.validate().map_err(|e| invalid(name, e))?;
        Ok(done(shared_bank_conflicts(&p)?))
    },
};

fn pipeline_entry(
    name: &str,
    engine: CopyEngine,
    given: &[(String, String)],
    arch: &Arch,
) -> Result<Generated, WorkloadError> {
    let mut p = CopyPipeline { engine, ..CopyPipeline::default() };
    apply(name, t::COPY_PIPELINE, given, &mut p)?;
    p.validate(arch).map_err(|e| invalid(name, e))?;
    Ok(done(async_copy_pipeline(&p, arch)?))
}

pub(super) const CP_ASYNC_PIPELINE: Generator = Generator {
    name: "cp-async-pipeline",
    summary: "multistage cp.async copy loop (copy latency hiding)",
    params: || group(t::COPY_PIPELINE, &CopyPipeline { engine: CopyEngine::CpAsync, ..CopyPipeline::default() }),
    build: |name, given, arch| pipeline_entry(name, CopyEngine::CpAsync, given, arch),
};

pub(super) const TMA_PIPELINE: Generator = Generator {
    name: "tma-pipeline",
    summary: "multistage TMA bulk-copy loop with mbarriers (sm_90)",
    params: || group(t::COPY_PIPELINE, &CopyPipeline { engine: CopyEngine::Tma, ..CopyPipeline::default() }),
    build: |name, given, arch| pipeline_entry(name, CopyEngine::Tma, given, arch),
};

pub(super) const DSMEM_LATENCY: Generator = Generator {
    name: "dsmem-latency",
    summary: "distributed shared memory latency within a cluster (HPMLL DSM/Latency)",
    params: || group(t::DSMEM, &Dsmem::default()),
    build: |name, given, arch| {
        let mut p = Dsmem::default();
        apply(name, t::DSMEM, given, &mut p)?;
        p.validate().map_err(|e| invalid(name, e))?;
        if p.cluster_size > arch.sm.max_cluster_size {
            return Err(WorkloadError(format!(
                "{name}: cluster_size = {} exceeds {}'s limit of {}",
                p.cluster_size, arch.name, arch.sm.max_cluster_size
            )));
        }
        Ok(done(dsmem_latency(&p)?))
    },
};
