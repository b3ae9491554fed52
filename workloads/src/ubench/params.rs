//! The parameter tables of the microbenchmarks ([`crate::params!`]): one line per field of each
//! parameter struct. Ranges are what a value may be on its own; `validate` checks the fields
//! together and against the chip.

use crate::params;
use crate::params::Param;

use super::{CopyPipeline, Dsmem, L2Read, PointerChase, SharedBanks, Stream};

const U32: u64 = u32::MAX as u64;
const ADDR: u64 = 1 << 56;

pub const POINTER_CHASE: &[Param<PointerChase>] = params!(PointerChase {
    footprint_bytes: Bytes [8, 1 << 44] "bytes the chain's elements are spread over",
    stride_bytes: Bytes [8, 1 << 32] "bytes between consecutive elements (a multiple of 8)",
    random: Bool "visit the elements in random order (else sequentially)",
    passes: Int [1, U32 - 2] "timed passes over the chain, after one warm-up pass",
    max_steps: Int [1, 1 << 24] "most loads in the chain",
    base_address: Int [0, ADDR] "address of the first element (8-byte aligned)",
    bypass_l1: Bool "load with LDG.E.64.STRONG.GPU, which bypasses the L1",
    seed: Int [0, u64::MAX] "seed of the random order",
    cover_footprint: Bool "walk the whole footprint window by window when it exceeds max_steps",
});

pub const STREAM: &[Param<Stream>] = params!(Stream {
    bytes_per_array: Bytes [16, 1 << 42] "bytes of each array (a multiple of 16)",
    active_sms: OptInt [1, U32] "SMs that get CTAs (all: every SM)",
    threads_per_cta: Int [32, 1024] "threads per CTA (a multiple of 32)",
    unroll: Int [1, 8] "loads per thread per loop iteration",
    triad_loads: Int [2, 3] "arrays the triad reads (2 or 3)",
    base_address: Int [0, ADDR] "address of the first array (16-byte aligned)",
});

pub const L2_READ: &[Param<L2Read>] = params!(L2Read {
    footprint_bytes: Bytes [1, 1 << 40] "the data set read repeatedly",
    total_bytes_read: Bytes [1, 1 << 48] "bytes the timed kernel reads in all",
    bypass_l1: Bool "load with .STRONG.GPU (bypass the L1)",
    width_bytes: Bytes [8, 16] "bytes per load per thread (8 or 16)",
    threads_per_cta: Int [32, 1024] "threads per CTA (a multiple of 32)",
    loads_per_thread: Int [1, U32] "loads per thread of the timed kernel",
    base_address: Int [0, ADDR] "address of the data set",
});

pub const SHARED_BANKS: &[Param<SharedBanks>] = params!(SharedBanks {
    ways: Int [1, 32] "n-way bank conflict (1, 2, 4, 8, 16 or 32)",
    iterations: Int [1, U32] "loads per thread (a multiple of unroll)",
    store: Bool "store instead of load",
    threads_per_cta: Int [32, 1024] "threads per CTA (a multiple of 32)",
    unroll: Int [1, 32] "accesses per loop iteration",
});

pub const COPY_PIPELINE: &[Param<CopyPipeline>] = params!(CopyPipeline {
    stages: Int [1, 8] "stages in flight",
    tiles: Int [1, U32] "tiles each CTA copies",
    tile_bytes: Bytes [16, U32] "bytes per tile (a multiple of 16 · threads_per_cta)",
    compute_per_tile: Int [0, U32] "FFMAs per thread per tile",
    ctas: OptInt [1, U32] "CTAs (all: one per SM)",
    threads_per_cta: Int [32, 1024] "threads per CTA (a multiple of 32)",
    base_address: Int [0, ADDR] "address of the source",
});

pub const DSMEM: &[Param<Dsmem>] = params!(Dsmem {
    cluster_size: Int [2, 16] "CTAs per cluster (at most the chip's max_cluster_size)",
    remote: Bool "read the next CTA's shared memory (else the CTA's own)",
    steps: Int [1, 1 << 32] "dependent loads (a multiple of the chain's length)",
    generic: Bool "cluster (generic) addressing, needed by remote",
});
