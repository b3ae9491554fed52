//! What the writers refuse (a kernel they could not read back equal) and what they emit for the
//! less common cases (`ops` lines, `%N` references, section programs).

use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::sync::Arc;

use gpusim_isa::program::{AddrExpr, Inst, Lanes, ProgramBuilder, Var};
use gpusim_isa::{CtaLayout, Dim3, KernelInfo, KernelTrace, OpTable, Reg, RegRange, Trace, binary, text};

fn kernel(inst: Inst, mem: Option<AddrExpr>, loops: usize) -> KernelTrace {
    let mut ops = OpTable::new();
    ops.intern("LDG.E").unwrap();
    let mut b = ProgramBuilder::new("p");
    for _ in 0..loops {
        b.begin_loop(2).unwrap();
    }
    match mem {
        Some(e) => b.mem_inst(inst, e, Lanes::Stride(4), 0),
        None => b.inst(inst),
    };
    for _ in 0..loops {
        b.end_loop().unwrap();
    }
    let p = Arc::new(b.finish().unwrap());
    KernelTrace {
        info: KernelInfo::new(0, "k", Dim3::new(2, 1, 1), Dim3::new(64, 1, 1)),
        ops,
        programs: vec![p],
        layout: CtaLayout { default: vec![0, 0], overrides: BTreeMap::new() },
    }
}

#[track_caller]
fn refused(k: KernelTrace, part: &str) {
    let t = Trace { kernels: vec![k] };
    for e in [text::to_string(&t).unwrap_err(), binary::to_bytes(&t).unwrap_err()] {
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
        assert!(e.to_string().contains(part), "`{e}` does not contain `{part}`");
    }
}

#[test]
fn writers_refuse_what_cannot_be_read_back() {
    let ok = kernel(Inst::new(0), None, 0);
    assert!(text::to_string(&Trace { kernels: vec![ok.clone()] }).is_ok());

    let mut k = ok.clone();
    k.info.id = 3;
    refused(k, "is not its position");

    let mut i = Inst::new(0);
    i.dst[0] = RegRange { first: Reg(255), count: 1 };
    refused(kernel(i, None, 0), "does not exist");
    i.dst[0] = RegRange::new(Reg::r(250), 8);
    refused(kernel(i, None, 0), "runs past");

    refused(kernel(Inst::new(0), Some(AddrExpr::constant(0).with(Var::Loop(1), 4)), 1), "`i1` used at loop depth 1");
    assert!(
        text::to_string(&Trace {
            kernels: vec![kernel(Inst::new(0), Some(AddrExpr::constant(0).with(Var::Loop(1), 4)), 2)]
        })
        .is_ok()
    );

    refused(kernel(Inst::new(1), None, 0), "opcode id 1");

    let mut k = ok.clone();
    k.layout.default = vec![0];
    refused(k, "1 warp programs for 2 warps");

    let mut k = ok.clone();
    k.layout.default.clear();
    refused(k, "no default layout");

    let mut k = ok.clone();
    k.layout.overrides.insert(2, vec![0, 0]);
    refused(k, "outside the grid");

    let mut k = ok.clone();
    k.info.block = Dim3::new(2048, 1, 1);
    refused(k, "more than 1024");

    let mut k = ok.clone();
    k.info.grid = Dim3::new(u32::MAX, u32::MAX, 2);
    refused(k, "more than 2^64 CTAs");

    let mut k = ok;
    k.info.deps = vec![0];
    refused(k, "does not come earlier");
}

#[test]
fn emits_ops_lines_references_and_sections() {
    // Table order differs from first use: the writer declares it with `ops`.
    let mut ops = OpTable::new();
    let unused = ops.intern("NOP").unwrap();
    let exit = ops.intern("EXIT").unwrap();
    assert_eq!((unused, exit), (0, 1));
    let prog = |name: &str, op| {
        let mut b = ProgramBuilder::new(name);
        b.inst(Inst::new(op));
        Arc::new(b.finish().unwrap())
    };
    // Two programs named `main`: the first can only be named by number.
    let programs = vec![prog("main", exit), prog("main", exit), prog("own", exit), prog("own", exit)];
    let mut overrides = BTreeMap::new();
    overrides.insert(1, vec![2, 0]);
    overrides.insert(2, vec![3, 3]);
    let k = KernelTrace {
        info: KernelInfo::new(0, "two words", Dim3::new(3, 1, 1), Dim3::new(33, 1, 1)),
        ops,
        programs,
        layout: CtaLayout { default: vec![0, 1], overrides },
    };
    let t = Trace { kernels: vec![k] };
    let s = text::to_string(&t).unwrap();
    assert!(s.contains("kernel \"two words\"\n"), "{s}");
    assert!(s.contains("  ops NOP EXIT\n"), "{s}");
    assert!(s.contains("  warps 0 %0\n  warps 1 main\n"), "{s}");
    // Programs 2 and 3 are each used by one CTA only: they are defined in its section.
    assert!(
        s.contains("  cta 1 0 0\n    program own\n      EXIT\n    end\n    warps 0 own\n    warps 1 %0\n  end\n"),
        "{s}"
    );
    assert!(s.contains("  cta 2 0 0\n    program own\n"), "{s}");
    assert_eq!(text::read_trace("t", &s).unwrap(), t);
    assert_eq!(binary::read_trace("b", &binary::to_bytes(&t).unwrap()).unwrap(), t);
}

#[test]
fn streaming_writers() {
    let t = text::read_trace("f", include_str!("fixtures/stream_copy_small.trace")).unwrap();
    let mut w = text::TextWriter::new(Vec::new()).unwrap();
    let mut b = binary::BinaryWriter::new(Vec::new()).unwrap();
    for k in &t.kernels {
        w.write_kernel(k).unwrap();
        b.write_kernel(k).unwrap();
    }
    let s = String::from_utf8(w.finish().unwrap()).unwrap();
    assert_eq!(s, text::to_string(&t).unwrap());
    assert_eq!(b.finish().unwrap(), binary::to_bytes(&t).unwrap());
    // Writing kernel 1 first is refused: ids are positions.
    let mut w = text::TextWriter::new(Vec::new()).unwrap();
    assert_eq!(w.write_kernel(&t.kernels[1]).unwrap_err().kind(), ErrorKind::InvalidInput);
}
