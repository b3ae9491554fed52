//! The SASS opcode table: what each instruction is, as data.
//!
//! An entry gives the unit class that executes the instruction, a default latency and issue
//! interval (used when the chip config says nothing more specific), the memory space it touches,
//! the default access width per lane, and its synchronisation or asynchronous semantics.
//!
//! [`decode`] turns a full mnemonic with modifiers (`LDG.E.128.SYS`, `HMMA.16816.F32.BF16`,
//! `HGMMA.64x256x16.F32.BF16`) into an [`OpDesc`]. An unknown base mnemonic is not an error: it
//! decodes to the [`UnitClass::Misc`] class with `known == false`, and the caller warns with
//! [`crate::diag::UNKNOWN_OPCODE`] and counts it.
//!
//! Default latencies are Ampere (sm_80) figures from microbenchmark literature (Jia et al.,
//! "Dissecting the Ampere GPU architecture via microbenchmarking", and Arafa et al. 2019 for
//! FFMA/HFMA/IMUL = 4/6/4 cycles, `lat-titanv-*` in ../shared/reference/published.toml); the chip
//! configs override them per class and per opcode.

use std::fmt;

/// The functional unit (pipe) class that executes an instruction.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub enum UnitClass {
    /// FP32 FMA pipe (FFMA, FADD, FMUL, ...).
    Fp32,
    /// Packed half-precision pipe (HFMA2, HADD2, ...).
    Fp16,
    /// Integer/logic ALU (IADD3, LOP3, SHF, ISETP, MOV, IMAD, ...).
    Int,
    /// Double-precision pipe.
    Fp64,
    /// Multi-function unit: transcendental and reciprocal (MUFU).
    Mufu,
    /// Conversions (F2F, I2F, F2I, F2FP, ...).
    Conv,
    /// Tensor cores (HMMA, IMMA, DMMA, HGMMA, ...).
    Tensor,
    /// Memory instructions, handled by the LD/ST unit and the memory system.
    Mem,
    /// Branches and control flow.
    Branch,
    /// Uniform datapath (UIADD3, UMOV, R2UR, ...).
    Uniform,
    /// Barriers and synchronisation (BAR, DEPBAR, WARPGROUP, SYNCS wait).
    Sync,
    /// Everything else, and unknown opcodes.
    Misc,
}

impl UnitClass {
    pub const ALL: [UnitClass; 12] = [
        UnitClass::Fp32,
        UnitClass::Fp16,
        UnitClass::Int,
        UnitClass::Fp64,
        UnitClass::Mufu,
        UnitClass::Conv,
        UnitClass::Tensor,
        UnitClass::Mem,
        UnitClass::Branch,
        UnitClass::Uniform,
        UnitClass::Sync,
        UnitClass::Misc,
    ];

    /// The lower-case name used in configs and reports (`fp32`, `tensor`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            UnitClass::Fp32 => "fp32",
            UnitClass::Fp16 => "fp16",
            UnitClass::Int => "int",
            UnitClass::Fp64 => "fp64",
            UnitClass::Mufu => "mufu",
            UnitClass::Conv => "conv",
            UnitClass::Tensor => "tensor",
            UnitClass::Mem => "mem",
            UnitClass::Branch => "branch",
            UnitClass::Uniform => "uniform",
            UnitClass::Sync => "sync",
            UnitClass::Misc => "misc",
        }
    }

    pub const fn index(self) -> usize {
        self as usize
    }

    pub fn from_name(name: &str) -> Option<UnitClass> {
        UnitClass::ALL.into_iter().find(|c| c.name() == name)
    }
}

impl fmt::Display for UnitClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The memory space an instruction reads or writes.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum MemSpace {
    None,
    Global,
    Shared,
    Local,
    Const,
    /// Generic addressing (`LD`/`ST`): global unless the address falls in the shared window.
    Generic,
    Texture,
    /// Distributed shared memory of another CTA of the cluster.
    SharedCluster,
}

/// Synchronisation or asynchronous behaviour beyond "issue, then write the result after latency".
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Semantics {
    None,
    /// The warp finishes.
    Exit,
    /// Control transfer; the next instruction waits for the branch to resolve.
    Branch,
    /// `BAR.SYNC`/`BAR.RED`: wait until every warp of the CTA (or the named count) has arrived.
    BarrierSync,
    /// `BAR.ARV`: arrive at a named barrier without waiting.
    BarrierArrive,
    /// `MEMBAR`/`FENCE`: wait until the warp's outstanding memory operations complete.
    MemBarrier,
    /// `LDGSTS` (cp.async): global → shared copy, completion tracked by groups.
    AsyncCopy,
    /// `LDGDEPBAR` (cp.async.commit_group), `UTMACMDFLUSH` (cp.async.bulk.commit_group): closes
    /// the current group of async copies (bulk stores and reductions).
    AsyncCommit,
    /// `DEPBAR.LE SB0, N` (cp.async.wait_group N): wait until at most N groups are pending.
    AsyncWait,
    /// TMA bulk tensor load global → shared (`UTMALDG`), completes on an mbarrier.
    TmaLoad,
    /// TMA bulk tensor store shared → global (`UTMASTG`).
    TmaStore,
    /// Bulk copy (`UBLKCP`), completes on an mbarrier.
    BulkCopy,
    /// Bulk reduction shared → global (`UBLKRED`, `cp.reduce.async.bulk`): a read-modify-write of
    /// global memory at the L2, like `RED`; completes in the issuing warp's bulk async-group
    /// (`UTMACMDFLUSH` commits it, `DEPBAR.LE SB0, N` waits for it), not on an mbarrier.
    BulkReduce,
    /// mbarrier arrive (`SYNCS.ARRIVE...`), possibly with an expected transaction byte count.
    MbarArrive,
    /// mbarrier initialisation (`SYNCS.EXCH.64`); the immediate, when given, is the arrival count.
    MbarInit,
    /// mbarrier wait/try-wait (`SYNCS.PHASECHK...`).
    MbarWait,
    /// `WARPGROUP.ARRIVE` (wgmma.fence).
    WgmmaFence,
    /// `WARPGROUP.DEPBAR.LE gsb0, N` (wgmma.wait_group N).
    WgmmaWait,
    /// Asynchronous warpgroup MMA (`HGMMA` and friends).
    WgmmaAsync,
    /// Atomic read-modify-write returning a value.
    Atomic,
    /// Reduction without a return value (`RED`).
    Reduction,
    /// `NANOSLEEP`.
    Sleep,
    /// `USETMAXREG`: warpgroup register reallocation.
    SetMaxReg,
}

/// Static description of one base mnemonic.
#[derive(Clone, Copy, Debug)]
pub struct OpcodeEntry {
    pub name: &'static str,
    pub unit: UnitClass,
    /// Cycles from issue until a dependent instruction may issue (fixed-latency units), or the
    /// unloaded latency of a variable-latency operation.
    pub latency: u16,
    /// Cycles the unit is busy with one warp instruction (1 = a new one every cycle).
    pub issue_interval: u8,
    pub mem: MemSpace,
    /// Default bytes accessed per active lane for memory instructions.
    pub width: u8,
    pub semantics: Semantics,
    /// First compute capability (major*10+minor) that has this opcode.
    pub since_sm: u8,
    /// Whether it loads (returns data), stores, or both (atomics).
    pub load: bool,
    pub store: bool,
}

const fn e(name: &'static str, unit: UnitClass, latency: u16, issue_interval: u8) -> OpcodeEntry {
    OpcodeEntry {
        name,
        unit,
        latency,
        issue_interval,
        mem: MemSpace::None,
        width: 0,
        semantics: Semantics::None,
        since_sm: 80,
        load: false,
        store: false,
    }
}

const fn mem(name: &'static str, space: MemSpace, latency: u16, load: bool, store: bool) -> OpcodeEntry {
    OpcodeEntry {
        name,
        unit: UnitClass::Mem,
        latency,
        issue_interval: 1,
        mem: space,
        width: 4,
        semantics: Semantics::None,
        since_sm: 80,
        load,
        store,
    }
}

impl OpcodeEntry {
    const fn sem(mut self, s: Semantics) -> Self {
        self.semantics = s;
        self
    }
    const fn since(mut self, sm: u8) -> Self {
        self.since_sm = sm;
        self
    }
    /// The instruction writes memory (a bulk store or reduction, which has no width).
    const fn stores(mut self) -> Self {
        self.store = true;
        self
    }
    const fn width(mut self, w: u8) -> Self {
        self.width = w;
        self
    }
}

use MemSpace as M;
use Semantics as S;
use UnitClass as U;

/// Every known base mnemonic. Sorted by name for binary search (checked by a test).
pub static OPCODES: &[OpcodeEntry] = &[
    mem("ATOM", M::Generic, 300, true, true).sem(S::Atomic),
    mem("ATOMG", M::Global, 300, true, true).sem(S::Atomic),
    mem("ATOMS", M::Shared, 40, true, true).sem(S::Atomic),
    e("B2R", U::Misc, 4, 1),
    e("BAR", U::Sync, 4, 1).sem(S::BarrierSync),
    e("BGMMA", U::Tensor, 64, 1).sem(S::WgmmaAsync).since(90),
    e("BMMA", U::Tensor, 32, 2),
    e("BMOV", U::Branch, 4, 1),
    e("BMSK", U::Int, 4, 1),
    e("BPT", U::Branch, 4, 1),
    e("BRA", U::Branch, 4, 1).sem(S::Branch),
    e("BREAK", U::Branch, 4, 1),
    e("BREV", U::Int, 4, 1),
    e("BRX", U::Branch, 4, 1).sem(S::Branch),
    e("BSSY", U::Branch, 4, 1),
    e("BSYNC", U::Branch, 4, 1),
    e("CALL", U::Branch, 4, 1).sem(S::Branch),
    mem("CCTL", M::Global, 4, false, false),
    e("CS2R", U::Misc, 6, 1),
    e("CSMTEST", U::Misc, 4, 1),
    e("DADD", U::Fp64, 8, 4),
    e("DEPBAR", U::Sync, 4, 1).sem(S::AsyncWait),
    e("DFMA", U::Fp64, 8, 4),
    e("DMMA", U::Tensor, 32, 4),
    e("DMNMX", U::Fp64, 8, 4),
    e("DMUL", U::Fp64, 8, 4),
    e("DSET", U::Fp64, 8, 4),
    e("DSETP", U::Fp64, 8, 4),
    e("ELECT", U::Uniform, 4, 1).since(90),
    e("ERRBAR", U::Sync, 4, 1).sem(S::MemBarrier),
    e("EXIT", U::Branch, 4, 1).sem(S::Exit),
    e("F2F", U::Conv, 14, 4),
    e("F2FP", U::Conv, 6, 2),
    e("F2I", U::Conv, 14, 4),
    e("F2IP", U::Conv, 6, 2),
    e("FADD", U::Fp32, 4, 1),
    e("FADD32I", U::Fp32, 4, 1),
    e("FCHK", U::Fp32, 4, 1),
    e("FENCE", U::Sync, 8, 1).sem(S::MemBarrier).since(90),
    e("FFMA", U::Fp32, 4, 1),
    e("FFMA32I", U::Fp32, 4, 1),
    e("FLO", U::Int, 6, 2),
    e("FMNMX", U::Fp32, 4, 1),
    e("FMUL", U::Fp32, 4, 1),
    e("FMUL32I", U::Fp32, 4, 1),
    e("FRND", U::Conv, 14, 4),
    e("FSEL", U::Fp32, 4, 1),
    e("FSET", U::Fp32, 4, 1),
    e("FSETP", U::Fp32, 4, 1),
    e("FSWZADD", U::Fp32, 4, 1),
    e("GETLMEMBASE", U::Misc, 4, 1),
    e("HADD2", U::Fp16, 6, 1),
    e("HADD2_32I", U::Fp16, 6, 1),
    e("HFMA2", U::Fp16, 6, 1),
    e("HFMA2_32I", U::Fp16, 6, 1),
    e("HGMMA", U::Tensor, 64, 1).sem(S::WgmmaAsync).since(90),
    e("HMMA", U::Tensor, 32, 2),
    e("HMNMX2", U::Fp16, 6, 1),
    e("HMUL2", U::Fp16, 6, 1),
    e("HMUL2_32I", U::Fp16, 6, 1),
    e("HSET2", U::Fp16, 6, 1),
    e("HSETP2", U::Fp16, 6, 1),
    e("I2F", U::Conv, 14, 4),
    e("I2FP", U::Conv, 6, 2),
    e("I2I", U::Conv, 14, 4),
    e("IABS", U::Int, 4, 1),
    e("IADD", U::Int, 4, 1),
    e("IADD3", U::Int, 4, 1),
    e("IDP", U::Int, 4, 1),
    e("IDP4A", U::Int, 4, 1),
    e("IGMMA", U::Tensor, 64, 1).sem(S::WgmmaAsync).since(90),
    e("IMAD", U::Int, 4, 1),
    e("IMMA", U::Tensor, 32, 2),
    e("IMNMX", U::Int, 4, 1),
    e("IMUL", U::Int, 4, 1),
    e("ISCADD", U::Int, 4, 1),
    e("ISETP", U::Int, 4, 1),
    e("JMP", U::Branch, 4, 1).sem(S::Branch),
    e("JMX", U::Branch, 4, 1).sem(S::Branch),
    e("KILL", U::Branch, 4, 1).sem(S::Exit),
    mem("LD", M::Generic, 300, true, false),
    e("LDC", U::Misc, 8, 1),
    mem("LDG", M::Global, 300, true, false),
    e("LDGDEPBAR", U::Sync, 4, 1).sem(S::AsyncCommit),
    mem("LDGSTS", M::Global, 300, false, false).sem(S::AsyncCopy),
    mem("LDL", M::Local, 300, true, false),
    mem("LDS", M::Shared, 30, true, false),
    mem("LDSM", M::Shared, 30, true, false).width(16),
    e("LEA", U::Int, 4, 1),
    e("LEPC", U::Misc, 4, 1),
    e("LOP", U::Int, 4, 1),
    e("LOP3", U::Int, 4, 1),
    e("LOP32I", U::Int, 4, 1),
    e("MATCH", U::Misc, 30, 2),
    e("MEMBAR", U::Sync, 8, 1).sem(S::MemBarrier),
    e("MOV", U::Int, 4, 1),
    e("MOV32I", U::Int, 4, 1),
    e("MUFU", U::Mufu, 18, 8),
    e("NANOSLEEP", U::Branch, 4, 1).sem(S::Sleep),
    e("NOP", U::Misc, 1, 1),
    e("P2R", U::Int, 4, 1),
    e("PLOP3", U::Int, 4, 1),
    e("PMTRIG", U::Misc, 4, 1),
    e("POPC", U::Int, 6, 2),
    e("PREEXIT", U::Branch, 4, 1),
    e("PRMT", U::Int, 4, 1),
    e("PSETP", U::Int, 4, 1),
    e("QGMMA", U::Tensor, 64, 1).sem(S::WgmmaAsync).since(90),
    mem("QSPC", M::Generic, 30, true, false),
    e("R2B", U::Misc, 4, 1),
    e("R2P", U::Int, 4, 1),
    e("R2UR", U::Uniform, 6, 1),
    mem("RED", M::Global, 300, false, true).sem(S::Reduction),
    mem("REDG", M::Global, 300, false, true).sem(S::Reduction).since(90),
    mem("REDS", M::Shared, 40, false, true).sem(S::Reduction),
    e("RET", U::Branch, 4, 1).sem(S::Branch),
    e("RPCMOV", U::Branch, 4, 1),
    e("S2R", U::Misc, 20, 1),
    e("S2UR", U::Uniform, 20, 1),
    e("SEL", U::Int, 4, 1),
    e("SGXT", U::Int, 4, 1),
    e("SHF", U::Int, 4, 1),
    e("SHFL", U::Misc, 24, 2),
    e("SHL", U::Int, 4, 1),
    e("SHR", U::Int, 4, 1),
    mem("ST", M::Generic, 30, false, true),
    mem("STG", M::Global, 30, false, true),
    mem("STL", M::Local, 30, false, true),
    mem("STS", M::Shared, 30, false, true),
    mem("STSM", M::Shared, 30, false, true).width(16).since(90),
    mem("SULD", M::Texture, 400, true, false),
    mem("SUST", M::Texture, 30, false, true),
    e("SYNCS", U::Sync, 20, 1).since(90),
    mem("TEX", M::Texture, 400, true, false),
    mem("TLD", M::Texture, 400, true, false),
    mem("TLD4", M::Texture, 400, true, false),
    e("UBLKCP", U::Mem, 500, 1).sem(S::BulkCopy).since(90),
    e("UBLKPF", U::Mem, 4, 1).since(90),
    e("UBLKRED", U::Mem, 500, 1).sem(S::BulkReduce).stores().since(90),
    e("UBMSK", U::Uniform, 2, 1),
    e("UBREV", U::Uniform, 2, 1),
    e("UCLEA", U::Uniform, 2, 1),
    e("UFLO", U::Uniform, 2, 1),
    e("UIADD3", U::Uniform, 2, 1),
    e("UIMAD", U::Uniform, 2, 1),
    e("UISETP", U::Uniform, 2, 1),
    e("ULDC", U::Uniform, 6, 1),
    e("ULEA", U::Uniform, 2, 1),
    e("ULOP", U::Uniform, 2, 1),
    e("ULOP3", U::Uniform, 2, 1),
    e("UMOV", U::Uniform, 2, 1),
    e("UP2UR", U::Uniform, 2, 1),
    e("UPLOP3", U::Uniform, 2, 1),
    e("UPOPC", U::Uniform, 2, 1),
    e("UPRMT", U::Uniform, 2, 1),
    e("USEL", U::Uniform, 2, 1),
    e("USETMAXREG", U::Sync, 4, 1).sem(S::SetMaxReg).since(90),
    e("USGXT", U::Uniform, 2, 1),
    e("USHF", U::Uniform, 2, 1),
    e("UTCBAR", U::Sync, 4, 1).since(100),
    e("UTCHMMA", U::Tensor, 64, 1).sem(S::WgmmaAsync).since(100),
    e("UTCIMMA", U::Tensor, 64, 1).sem(S::WgmmaAsync).since(100),
    e("UTCQMMA", U::Tensor, 64, 1).sem(S::WgmmaAsync).since(100),
    e("UTMACCTL", U::Mem, 4, 1).since(90),
    // cp.async.bulk.commit_group: closes the warp's group of bulk stores and reductions.
    e("UTMACMDFLUSH", U::Sync, 4, 1).sem(S::AsyncCommit).since(90),
    e("UTMALDG", U::Mem, 500, 1).sem(S::TmaLoad).since(90),
    e("UTMAPF", U::Mem, 4, 1).since(90),
    e("UTMASTG", U::Mem, 500, 1).sem(S::TmaStore).since(90),
    e("VABSDIFF", U::Int, 4, 1),
    e("VABSDIFF4", U::Int, 4, 1),
    e("VHMNMX", U::Int, 4, 1).since(90),
    e("VIADD", U::Int, 4, 1).since(90),
    e("VIADDMNMX", U::Int, 4, 1).since(90),
    e("VIMNMX", U::Int, 4, 1).since(90),
    e("VIMNMX3", U::Int, 4, 1).since(100),
    e("VOTE", U::Int, 4, 1),
    e("VOTEU", U::Uniform, 4, 1),
    e("WARPGROUP", U::Sync, 4, 1).since(90),
    e("WARPSYNC", U::Branch, 4, 1),
    e("YIELD", U::Branch, 1, 1),
];

/// Generic addresses in `[CLUSTER_SHARED_WINDOW, + 16·CLUSTER_SHARED_RANK_STRIDE)` name the shared
/// memory of CTA rank `(addr − window) / stride` of the thread-block cluster (distributed shared
/// memory). Real SASS builds such addresses from `SR_SWINHI`; traces normalise them to this
/// window so that the simulator can tell local, remote and global accesses apart.
pub const CLUSTER_SHARED_WINDOW: u64 = 0x0000_7e00_0000_0000;
/// Bytes of the cluster shared window per CTA rank.
pub const CLUSTER_SHARED_RANK_STRIDE: u64 = 0x100_0000;

/// The typical opcode of each unit class. A chip's `[pipes.<class>]` timing is that opcode's
/// timing on the chip; other opcodes of the class keep their difference from it in this table.
pub const fn representative(class: UnitClass) -> &'static str {
    match class {
        UnitClass::Fp32 => "FFMA",
        UnitClass::Fp16 => "HFMA2",
        UnitClass::Int => "IADD3",
        UnitClass::Fp64 => "DFMA",
        UnitClass::Mufu => "MUFU",
        UnitClass::Conv => "F2F",
        UnitClass::Tensor => "HMMA",
        UnitClass::Mem => "LDG",
        UnitClass::Branch => "BRA",
        UnitClass::Uniform => "UIADD3",
        UnitClass::Sync => "BAR",
        UnitClass::Misc => "NOP",
    }
}

/// Looks up a base mnemonic (the text before the first `.`).
pub fn lookup(base: &str) -> Option<&'static OpcodeEntry> {
    OPCODES.binary_search_by(|e| e.name.cmp(base)).ok().map(|i| &OPCODES[i])
}

/// Element type of a tensor-core operation's inputs.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum TensorType {
    F16,
    Bf16,
    Tf32,
    F64,
    /// FP8 E4M3.
    E4m3,
    /// FP8 E5M2.
    E5m2,
    /// FP6 (E3M2 or E2M3).
    Fp6,
    /// FP4 (E2M1).
    Fp4,
    S8,
    U8,
    S4,
    B1,
}

impl TensorType {
    /// The config key of the throughput table that rates this type.
    pub const fn rate_key(self) -> &'static str {
        match self {
            TensorType::F16 => "fp16",
            TensorType::Bf16 => "bf16",
            TensorType::Tf32 => "tf32",
            TensorType::F64 => "fp64",
            TensorType::E4m3 | TensorType::E5m2 => "fp8",
            TensorType::Fp6 => "fp6",
            TensorType::Fp4 => "fp4",
            TensorType::S8 | TensorType::U8 => "int8",
            TensorType::S4 => "int4",
            TensorType::B1 => "b1",
        }
    }

    fn from_modifier(m: &str) -> Option<TensorType> {
        Some(match m {
            "F16" => TensorType::F16,
            "BF16" => TensorType::Bf16,
            "TF32" => TensorType::Tf32,
            "F64" => TensorType::F64,
            "E4M3" => TensorType::E4m3,
            "E5M2" => TensorType::E5m2,
            "E3M2" | "E2M3" => TensorType::Fp6,
            "E2M1" => TensorType::Fp4,
            "S8" => TensorType::S8,
            "U8" => TensorType::U8,
            "S4" | "U4" => TensorType::S4,
            _ => return None,
        })
    }
}

/// Shape and input type of a tensor-core instruction.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct TensorShape {
    pub m: u16,
    pub n: u16,
    pub k: u16,
    pub input: TensorType,
}

impl TensorShape {
    /// FLOPs (multiply and add counted separately) of the whole operation: 2·m·n·k.
    pub const fn flops(&self) -> u64 {
        2 * self.m as u64 * self.n as u64 * self.k as u64
    }
}

/// A decoded full mnemonic: the table entry plus what its modifiers say.
#[derive(Clone, Debug, PartialEq)]
pub struct OpDesc {
    /// The full mnemonic as written in the trace (`LDG.E.128.SYS`).
    pub mnemonic: String,
    /// The base mnemonic (`LDG`), or the unknown text before the first `.`.
    pub base: String,
    pub unit: UnitClass,
    pub latency: u16,
    pub issue_interval: u8,
    pub mem: MemSpace,
    /// Bytes per active lane for memory instructions (from `.64`, `.128`, `.U8`, ...).
    pub width: u8,
    pub semantics: Semantics,
    pub load: bool,
    pub store: bool,
    /// `.BYPASS`, `.CG`, `.STRONG.GPU`-style hints that skip the L1.
    pub bypass_l1: bool,
    pub tensor: Option<TensorShape>,
    /// For `LDSM`/`STSM`: number of 8×8 matrices (`.4` → 4).
    pub matrices: u8,
    /// False when the base mnemonic is not in the table.
    pub known: bool,
    /// An mbarrier arrival that also expects transaction bytes (`SYNCS.ARRIVE.TRANS64`).
    pub expect_tx: bool,
    /// A bulk copy that writes the shared memory of several CTAs of the cluster (`.MULTICAST`).
    pub multicast: bool,
    pub since_sm: u8,
}

/// Decodes a full mnemonic. Never fails: an unknown base gives `known == false`, class `Misc`,
/// latency 4, issue interval 1.
pub fn decode(mnemonic: &str) -> OpDesc {
    let mut parts = mnemonic.split('.');
    let base = parts.next().unwrap_or("");
    let modifiers: Vec<&str> = parts.collect();
    let entry = lookup(base);
    let mut d = match entry {
        Some(e) => OpDesc {
            mnemonic: mnemonic.to_string(),
            base: base.to_string(),
            unit: e.unit,
            latency: e.latency,
            issue_interval: e.issue_interval,
            mem: e.mem,
            width: e.width,
            semantics: e.semantics,
            load: e.load,
            store: e.store,
            bypass_l1: false,
            tensor: None,
            matrices: 0,
            known: true,
            expect_tx: false,
            multicast: false,
            since_sm: e.since_sm,
        },
        None => OpDesc {
            mnemonic: mnemonic.to_string(),
            base: base.to_string(),
            unit: UnitClass::Misc,
            latency: 4,
            issue_interval: 1,
            mem: MemSpace::None,
            width: 0,
            semantics: Semantics::None,
            load: false,
            store: false,
            bypass_l1: false,
            tensor: None,
            matrices: 0,
            known: false,
            expect_tx: false,
            multicast: false,
            since_sm: 0,
        },
    };
    apply_modifiers(&mut d, &modifiers);
    d
}

fn apply_modifiers(d: &mut OpDesc, mods: &[&str]) {
    let is_mem = d.unit == UnitClass::Mem && d.width > 0;
    let mut types: Vec<TensorType> = Vec::new();
    for &m in mods {
        match m {
            "64" if is_mem => d.width = 8,
            "128" if is_mem => d.width = 16,
            "U8" | "S8" if is_mem => d.width = 1,
            "U16" | "S16" if is_mem => d.width = 2,
            "32" if is_mem => d.width = 4,
            // A vector reduction (`red.global.add.v4.f32`): 16 bytes per lane.
            "F32x4" if is_mem => d.width = 16,
            "BYPASS" | "CG" | "CS" | "LU" | "CV" | "STRONG" if is_mem => d.bypass_l1 = true,
            "SHARED" if d.mem == MemSpace::Generic => d.mem = MemSpace::Shared,
            "MULTICAST" => d.multicast = true,
            _ => {}
        }
        if let Some(t) = TensorType::from_modifier(m) {
            types.push(t);
        }
    }
    match d.base.as_str() {
        "LDSM" | "STSM" => {
            // LDSM.16.M88.4 / LDSM.16.MT88.2: the trailing digit is the matrix count.
            d.matrices = mods.last().and_then(|m| m.parse().ok()).filter(|n| [1, 2, 4].contains(n)).unwrap_or(1);
        }
        "SYNCS" => {
            if mods.iter().any(|m| m.starts_with("ARRIVE")) {
                d.semantics = Semantics::MbarArrive;
                d.latency = 4;
            } else if mods.iter().any(|m| *m == "PHASECHK" || m.starts_with("TRYWAIT") || *m == "WAIT") {
                d.semantics = Semantics::MbarWait;
            } else if mods.first() == Some(&"EXCH") {
                // mbarrier.init is an exchange on the barrier word.
                d.semantics = Semantics::MbarInit;
                d.latency = 4;
            }
            // `.TRANS64` arrivals carry an expected transaction byte count (expect_tx).
            // `.A1T0` is "arrive once, transaction count 0": a plain arrival (consumer releases).
            d.expect_tx = d.semantics == Semantics::MbarArrive && mods.contains(&"TRANS64") && !mods.contains(&"A1T0");
        }
        "WARPGROUP" => {
            if mods.first() == Some(&"ARRIVE") {
                d.semantics = Semantics::WgmmaFence;
            } else if mods.first() == Some(&"DEPBAR") {
                d.semantics = Semantics::WgmmaWait;
            }
        }
        "BAR" if mods.contains(&"ARV") => d.semantics = Semantics::BarrierArrive,
        // EX2/RCP/RSQ are faster than SIN/COS/LG2 on Ampere (Jia et al. 2021).
        "MUFU" if mods.iter().any(|m| matches!(*m, "SIN" | "COS" | "LG2" | "SQRT")) => d.latency = 22,
        "IMAD" | "LEA" if mods.contains(&"WIDE") => d.issue_interval = 2,
        _ => {}
    }
    if d.unit == UnitClass::Tensor {
        d.tensor = tensor_shape(&d.base, mods, &types);
    }
}

/// Shape from `16816` / `1688` / `16832` / `884` (mma.sync) or `64x256x16` (wgmma).
fn tensor_shape(base: &str, mods: &[&str], types: &[TensorType]) -> Option<TensorShape> {
    let shape_mod = mods.first()?;
    let (m, n, k) = if shape_mod.contains('x') {
        let v: Vec<u16> = shape_mod.split('x').filter_map(|s| s.parse().ok()).collect();
        if v.len() != 3 {
            return None;
        }
        (v[0], v[1], v[2])
    } else {
        match *shape_mod {
            "16816" => (16, 8, 16),
            "1688" => (16, 8, 8),
            "16832" => (16, 8, 32),
            "16864" => (16, 8, 64),
            "884" => (8, 8, 4),
            "8816" => (8, 8, 16),
            "8832" => (8, 8, 32),
            "168256" => (16, 8, 256),
            _ => return None,
        }
    };
    let input = match base {
        "DMMA" => TensorType::F64,
        "BMMA" | "BGMMA" => TensorType::B1,
        "IMMA" | "IGMMA" | "UTCIMMA" => types
            .iter()
            .copied()
            .find(|t| matches!(t, TensorType::S8 | TensorType::U8 | TensorType::S4))
            .unwrap_or(TensorType::S8),
        "QGMMA" | "UTCQMMA" => types
            .iter()
            .copied()
            .find(|t| matches!(t, TensorType::E4m3 | TensorType::E5m2 | TensorType::Fp6 | TensorType::Fp4))
            .unwrap_or(TensorType::E4m3),
        // Accumulator types (F32, S32) are not input types, so the last type named is the
        // input: `HMMA.16816.F32.BF16` → BF16, `HMMA.16816.F16` → F16, `HMMA.16816.F32` → F16.
        _ => types.last().copied().unwrap_or(TensorType::F16),
    };
    Some(TensorShape { m, n, k, input })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_and_unique() {
        for w in OPCODES.windows(2) {
            assert!(w[0].name < w[1].name, "{} before {}", w[0].name, w[1].name);
        }
    }

    #[test]
    fn decodes_full_mnemonics() {
        let d = decode("LDG.E.128.SYS");
        assert!(d.known && d.load && d.mem == MemSpace::Global);
        assert_eq!(d.width, 16);

        // A float4 reduction moves 16 bytes per lane; a bulk reduction writes global memory.
        let d = decode("REDG.E.ADD.F32x4.FTZ.RN.STRONG.GPU");
        assert!(d.store && !d.load && d.semantics == Semantics::Reduction);
        assert_eq!(d.width, 16);
        let d = decode("UBLKRED.G.S.ADD.F32.RN");
        assert!(d.store && d.semantics == Semantics::BulkReduce);
        assert_eq!(decode("UTMACMDFLUSH").semantics, Semantics::AsyncCommit);

        let d = decode("HMMA.16816.F32.BF16");
        assert_eq!(d.unit, UnitClass::Tensor);
        assert_eq!(d.tensor, Some(TensorShape { m: 16, n: 8, k: 16, input: TensorType::Bf16 }));

        let d = decode("HMMA.16816.F32");
        assert_eq!(d.tensor.unwrap().input, TensorType::F16);

        let d = decode("HGMMA.64x256x16.F32.BF16");
        assert_eq!(d.semantics, Semantics::WgmmaAsync);
        let t = d.tensor.unwrap();
        assert_eq!((t.m, t.n, t.k, t.input), (64, 256, 16, TensorType::Bf16));

        let d = decode("LDGSTS.E.BYPASS.128");
        assert_eq!(d.semantics, Semantics::AsyncCopy);
        assert!(d.bypass_l1);
        assert_eq!(d.width, 16);

        let d = decode("SYNCS.ARRIVE.TRANS64.RED.A1T0");
        assert_eq!(d.semantics, Semantics::MbarArrive);
        let d = decode("SYNCS.PHASECHK.TRANS64.TRYWAIT");
        assert_eq!(d.semantics, Semantics::MbarWait);

        let d = decode("LDSM.16.M88.4");
        assert_eq!((d.matrices, d.width), (4, 16));

        let d = decode("WARPGROUP.DEPBAR.LE");
        assert_eq!(d.semantics, Semantics::WgmmaWait);
        let d = decode("BAR.SYNC.DEFER_BLOCKING");
        assert_eq!(d.semantics, Semantics::BarrierSync);
        let d = decode("QGMMA.64x128x32.F32.E4M3.E4M3");
        assert_eq!(d.tensor.unwrap().input, TensorType::E4m3);
        let d = decode("STG.E.U8");
        assert_eq!(d.width, 1);
    }

    #[test]
    fn unknown_opcode_is_not_an_error() {
        let d = decode("FROBNICATE.X");
        assert!(!d.known);
        assert_eq!(d.unit, UnitClass::Misc);
        assert_eq!(d.base, "FROBNICATE");
    }
}
