//! A program-form trace of an 8192×8192×8192 BF16 GEMM is tiny in both forms.

use std::collections::BTreeMap;
use std::sync::Arc;

use gpusim_isa::program::{AddrExpr, Inst, Lanes, ProgramBuilder, Var};
use gpusim_isa::{CtaLayout, Dim3, KernelInfo, KernelTrace, OpTable, Program, Reg, RegRange, Trace, binary, text};

const K: u64 = 8192;
const A: u64 = 0x7f00_0000_0000;
const B: u64 = 0x7f20_0000_0000;
const C: u64 = 0x7f40_0000_0000;

fn r(n: u8, count: u8) -> RegRange {
    RegRange::new(Reg::r(n), count)
}

fn inst(ops: &mut OpTable, m: &str, dst: &[RegRange], src: &[RegRange]) -> Inst {
    let mut i = Inst::new(ops.intern(m).unwrap());
    i.dst[..dst.len()].copy_from_slice(dst);
    i.src[..src.len()].copy_from_slice(src);
    i
}

/// Warps 0..3: copy the A (256×64) and B (128×64) tiles of k-step `i0` into shared memory.
fn producer(ops: &mut OpTable) -> Program {
    let mut b = ProgramBuilder::new("producer");
    b.inst(inst(ops, "S2R", &[r(0, 1)], &[]));
    b.inst(inst(ops, "IMAD.WIDE", &[r(2, 2)], &[r(0, 1), r(1, 1)]));
    // Lane l copies 16 bytes of row l/8, column (l%8)*16: 4 rows of 128 bytes per instruction.
    let offs: Vec<i64> = (0..32).map(|l| (l / 8) * (K as i64 * 2) + (l % 8) * 16).collect();
    let lanes = b.offsets(&offs);
    b.begin_loop(128).unwrap();
    for j in 0..16u64 {
        let e = AddrExpr::constant(A + 4 * j * K * 2)
            .with(Var::CtaX, (256 * K * 2) as i64)
            .with(Var::Warp, (64 * K * 2) as i64)
            .with(Var::Loop(0), 128);
        b.mem_inst(inst(ops, "LDGSTS.E.BYPASS.128", &[], &[r(4, 1), r(2, 2)]), e, lanes, 0);
    }
    for j in 0..8u64 {
        let e = AddrExpr::constant(B + 4 * j * K * 2)
            .with(Var::CtaY, (128 * K * 2) as i64)
            .with(Var::Warp, (32 * K * 2) as i64)
            .with(Var::Loop(0), 128);
        b.mem_inst(inst(ops, "LDGSTS.E.BYPASS.128", &[], &[r(5, 1), r(2, 2)]), e, lanes, 0);
    }
    b.inst(inst(ops, "LDGDEPBAR", &[], &[]));
    let mut wait = inst(ops, "DEPBAR.LE", &[RegRange::one(Reg::sb(0))], &[]);
    wait.imm = 1;
    b.inst(wait);
    b.inst(inst(ops, "BAR.SYNC.DEFER_BLOCKING", &[], &[]));
    b.inst(inst(ops, "IADD3", &[r(2, 1)], &[r(2, 1), r(6, 1)]));
    b.end_loop().unwrap();
    b.inst(inst(ops, "EXIT", &[], &[]));
    b.finish().unwrap()
}

/// Warps 4..7 and 8..11: ldmatrix the fragments and run the tensor cores, then store C.
fn consumer(ops: &mut OpTable, name: &str, row0: u64) -> Program {
    let mut b = ProgramBuilder::new(name);
    b.begin_loop(128).unwrap();
    for j in 0..4u8 {
        let e = AddrExpr::constant(j as u64 * 2048).with(Var::Warp, 4096);
        b.mem_inst(inst(ops, "LDSM.16.M88.4", &[r(100 + 4 * j, 4)], &[r(7, 1)]), e, Lanes::Stride(16), 0);
        let e = AddrExpr::constant(49152 + j as u64 * 1024);
        b.mem_inst(inst(ops, "LDSM.16.MT88.4", &[r(120 + 4 * j, 4)], &[r(8, 1)]), e, Lanes::Stride(16), 0);
    }
    for m in 0..4u8 {
        for n in 0..4u8 {
            let acc = r(16 + 4 * (4 * m + n), 4);
            b.inst(inst(ops, "HMMA.16816.F32.BF16", &[acc], &[r(100 + 4 * m, 4), r(120 + 2 * n, 2), acc]));
        }
    }
    b.inst(inst(ops, "BAR.SYNC.DEFER_BLOCKING", &[], &[]));
    b.end_loop().unwrap();
    for j in 0..16u8 {
        let e = AddrExpr::constant(C + (row0 + j as u64) * K * 4)
            .with(Var::CtaX, (256 * K * 4) as i64)
            .with(Var::CtaY, 128 * 4)
            .with(Var::Warp, (32 * K * 4) as i64);
        b.mem_inst(inst(ops, "STG.E.64", &[], &[r(9, 2), r(16 + 4 * j, 2)]), e, Lanes::Stride(8), 0);
    }
    b.inst(inst(ops, "EXIT", &[], &[]));
    b.finish().unwrap()
}

fn gemm() -> Trace {
    let mut ops = OpTable::new();
    let programs = vec![
        Arc::new(producer(&mut ops)),
        Arc::new(consumer(&mut ops, "consumer0", 0)),
        Arc::new(consumer(&mut ops, "consumer1", 128)),
    ];
    let mut info =
        KernelInfo::new(0, "sm80_xmma_gemm_bf16bf16_f32_tn_n_256x128x64", Dim3::new(32, 64, 1), Dim3::new(384, 1, 1));
    info.regs_per_thread = 232;
    info.smem_bytes = 3 * (256 + 128) * 64 * 2;
    info.sm_version = 80;
    let default = [0u32, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2].to_vec();
    let k = KernelTrace { info, ops, programs, layout: CtaLayout { default, overrides: BTreeMap::new() } };
    k.check().unwrap();
    Trace { kernels: vec![k] }
}

#[test]
fn gemm_trace_is_tiny() {
    let t = gemm();
    let k = &t.kernels[0];
    let per_cta: u64 = (0..12).map(|w| k.programs[k.layout.default[w] as usize].dynamic_len()).sum();
    assert_eq!(k.programs[0].dynamic_len(), 2 + 128 * 28 + 1);
    assert_eq!(per_cta * k.info.num_ctas(), 2048 * (4 * 3587 + 8 * (128 * 25 + 17)));

    let txt = text::to_string(&t).unwrap();
    let bin = binary::to_bytes(&t).unwrap();
    eprintln!(
        "8192^3 GEMM: text {} bytes, binary {} bytes, {} warp instructions",
        txt.len(),
        bin.len(),
        per_cta * 2048
    );
    assert!(txt.len() < 1 << 20 && bin.len() < 1 << 20);
    assert!(txt.len() < 16 << 10, "a few KB of text, got {}", txt.len());
    assert!(bin.len() < 4 << 10, "a few KB of binary, got {}", bin.len());
    assert_eq!(text::read_trace("gemm.trace", &txt).unwrap(), t);
    assert_eq!(binary::read_trace("gemm.bin", &bin).unwrap(), t);
}
