//! The text reader: the fixture's contents, every error case (kind, line, column), streaming.

use std::cell::Cell;
use std::io::{BufReader, Read};
use std::rc::Rc;

use gpusim_isa::program::{Lanes, Step, Var};
use gpusim_isa::text::{self, TextReader};
use gpusim_isa::{Dim3, Reg, RegRange, TraceError, TraceErrorKind, TraceSource};

use TraceErrorKind::{Invalid, Syntax, Truncated, Unsupported};

const FIXTURE: &str = include_str!("fixtures/stream_copy_small.trace");

fn err(src: &str) -> TraceError {
    let e = text::read_trace("t.trace", src).expect_err("expected an error");
    // The streaming reader reports the same error when everything is consumed.
    let mut r = TextReader::from_reader("t.trace", src.as_bytes());
    let streamed = (|| -> Result<(), TraceError> {
        while let Some(mut k) = r.next_kernel()? {
            while k.next_cta()?.is_some() {}
        }
        Ok(())
    })();
    assert_eq!(streamed.expect_err("streaming should fail too"), e);
    e
}

#[track_caller]
fn check(src: &str, kind: TraceErrorKind, line: u64, col: u64, msg_part: &str) {
    let e = err(src);
    assert_eq!((e.kind, e.at.line, e.at.col), (kind, line, col), "{e}");
    assert_eq!(e.at.file, "t.trace");
    assert!(e.message.contains(msg_part), "`{}` does not contain `{msg_part}`", e.message);
}

/// A kernel with one program; `body` goes inside the program (its first line is line 6).
fn prog(body: &str) -> String {
    format!("gpusim-trace 1\nkernel k\n  grid 2 1 1\n  block 64 1 1\n  program p\n{body}\n  end\n  warps 0..1 p\nend\n")
}

#[test]
fn reads_the_fixture() {
    let t = text::read_trace("f", FIXTURE).unwrap();
    assert_eq!(t.kernels.len(), 2);
    let k = &t.kernels[0];
    assert_eq!(k.info.name, "stream_copy");
    assert_eq!((k.info.grid, k.info.block, k.info.regs_per_thread), (Dim3::new(4, 2, 1), Dim3::new(256, 1, 1), 16));
    assert_eq!(k.layout.default, vec![0; 8]);
    let p = &k.programs[0];
    assert_eq!(p.dynamic_len(), 2 + 128 + 1);
    let Step::Inst(imad) = p.steps[1] else { panic!() };
    assert_eq!(imad.src[..3], [RegRange::one(Reg::r(0)), RegRange::NONE, RegRange::one(Reg::r(4))]);
    assert_eq!(imad.dst[0], RegRange::new(Reg::r(2), 2));
    let Step::Inst(ldg) = p.steps[3] else { panic!() };
    let m = ldg.mem.unwrap();
    assert_eq!(m.lanes, Lanes::Stride(16));
    let e = p.exprs[m.addr as usize];
    assert_eq!(e.base, 0x7f00_0000_0000);
    assert_eq!(
        (e.coef[Var::Warp.index()], e.coef[Var::CtaX.index()], e.coef[Var::Loop(0).index()]),
        (4096, 32768, 262144)
    );
    let Step::Inst(stg) = p.steps[4] else { panic!() };
    assert_eq!(stg.mem.unwrap().lanes, Lanes::Stride(16), "default stride is the access width");
    assert_eq!(p.exprs.len(), 2);

    let k = &t.kernels[1];
    assert_eq!(k.info.name, "phase 2");
    assert_eq!((k.info.smem_bytes, k.info.stream, k.info.deps.clone(), k.info.sm_version), (4096, 1, vec![0], 90));
    assert_eq!(k.programs.len(), 3, "the section program is appended");
    assert_eq!(k.layout.default, vec![0, 1]);
    assert_eq!(k.layout.overrides.get(&1), Some(&vec![2, 1]));
    assert_eq!(k.layout.overrides.get(&2), Some(&vec![1, 1]));
    let a = &k.programs[0];
    let Step::Inst(lds) = a.steps[0] else { panic!() };
    assert_eq!(lds.mask, 0x0000_ffff);
    assert_eq!(lds.mem.unwrap().lanes, Lanes::Offsets { start: 0 });
    assert_eq!(a.lane_offsets.len(), 16);
    assert_eq!(a.lane_offsets[15], -60);
    let Step::Inst(bar) = a.steps[1] else { panic!() };
    assert_eq!((bar.pc, bar.imm), (0x70, 0));
    let ublkcp = a.steps.iter().find_map(|s| match s {
        Step::Inst(i) if k.ops.get(i.op).base == "UBLKCP" => Some(*i),
        _ => None,
    });
    assert_eq!(ublkcp.unwrap().mem.unwrap().bulk_bytes, 8192);
    let frob = k.ops.iter().find(|(_, d)| d.base == "FROBNICATE").unwrap().1;
    assert!(!frob.known, "unknown opcodes are not errors");
    assert_eq!(a.dynamic_len(), 2 + 6 + 4);
    for k in &t.kernels {
        k.check().unwrap();
    }
}

#[test]
fn magic_and_version() {
    check("", Truncated, 1, 1, "empty");
    check("# only a comment\n\n", Truncated, 1, 1, "empty");
    check("gpusim-trace 3\n", Unsupported, 1, 14, "version 3");
    check("  # c\ngpusim-trace x\n", Syntax, 2, 14, "bad number");
    check("kernel k\n", Syntax, 1, 1, "not a gpusim text trace");
    check("gpusim-trace 1 extra\n", Syntax, 1, 16, "unexpected `extra`");
    assert_eq!(text::read_trace("t", "gpusim-trace 1\n").unwrap().kernels.len(), 0);
    assert_eq!(text::read_trace("t", "\u{feff}gpusim-trace 1\r\n# crlf\r\n").unwrap().kernels.len(), 0);
}

#[test]
fn truncated_inputs() {
    let head = "gpusim-trace 1\nkernel k\n  grid 2 1 1\n  block 64 1 1\n";
    check(head, Truncated, 5, 1, "kernel `k` (line 2) is never closed");
    check(&format!("{head}  program p\n    EXIT\n"), Truncated, 7, 1, "program `p` (line 5)");
    check(&format!("{head}  program p\n    loop 2\n      loop 3\n"), Truncated, 8, 1, "`loop` at line 7");
    check(&format!("{head}  program p\n  end\n  warps 0..1 p\n"), Truncated, 8, 1, "kernel `k`");
    check(
        &format!("{head}  program p\n  end\n  warps 0..1 p\n  cta 1 0 0\n"),
        Truncated,
        9,
        1,
        "`cta` section at line 8",
    );
    let sec = "  cta 1 0 0\n    warps 0..1 p\n  end\n";
    check(&format!("{head}  program p\n  end\n  warps 0..1 p\n{sec}"), Truncated, 11, 1, "kernel `k`");
}

#[test]
fn bad_numbers() {
    check("gpusim-trace 1\nkernel k\n  grid 2 x 1\n", Syntax, 3, 10, "bad number `x`");
    check("gpusim-trace 1\nkernel k\n  grid 2 1 1\n  block 99999999999 1 1\n", Syntax, 4, 9, "bad number");
    check(&prog("    loop -1\n    end"), Syntax, 6, 10, "bad number");
    check(&prog("    LDG.E R1 addr=0x10+4*i9"), Syntax, 6, 26, "unknown variable `i9`");
    check(&prog("    LDG.E R1 addr=0x1g"), Syntax, 6, 19, "bad number `0x1g`");
    check(&prog("    LDG.E R1 addr=99999999999999999999"), Syntax, 6, 19, "bad number");
    check(&prog("    LDG.E R1 addr=1 lanes=0x80000000"), Syntax, 6, 27, "bad number");
    check(&prog("    LDG.E R1 addr=1 lanes=[1, 2, z]"), Syntax, 6, 34, "bad lane offset `z`");
    check(&prog("    DEPBAR.LE SB0 imm=1.5"), Syntax, 6, 23, "bad number");
    check(&prog("    @12345678g EXIT"), Syntax, 6, 5, "bad active mask");
}

#[test]
fn registers() {
    check(&prog("    FFMA R0 <- R1 Q2"), Syntax, 6, 19, "unknown register `Q2`");
    check(&prog("    FFMA R0 <- R1 R256"), Syntax, 6, 19, "unknown register");
    check(&prog("    FFMA R0 <- R1x0"), Syntax, 6, 16, "unknown register");
    check(&prog("    FFMA R0 <- R253x4"), Invalid, 6, 16, "runs past");
    check(&prog("    FFMA R0 R1 R2 <- R3"), Syntax, 6, 16, "too many destination registers");
    check(&prog("    FFMA R0 <- R1 R2 R3 R4 R5"), Syntax, 6, 28, "too many source registers");
    check(&prog("    FFMA R0 <- R1 <- R2"), Syntax, 6, 19, "a second `<-`");
    check(&prog("    FFMA R0 <- \"R1\""), Syntax, 6, 16, "unknown register");
}

#[test]
fn options() {
    check(&prog("    LDG.E R1 addr=0 foo=1"), Syntax, 6, 21, "unknown option `foo`");
    check(&prog("    LDG.E R1 addr=0 addr=1"), Syntax, 6, 21, "given twice");
    check(&prog("    LDG.E R1 addr=0 R2"), Syntax, 6, 21, "expected an option");
    check(&prog("    LDG.E R1 lanes=4"), Invalid, 6, 14, "without `addr=`");
    check(&prog("    @00000003 LDG.E R1 addr=0 lanes=[1,2,3]"), Invalid, 6, 31, "3 lane offsets for 2 active lanes");
    check(&prog("    loop 2\n      LDG.E R1 addr=0+4*i1\n    end"), Invalid, 7, 16, "`i1` used at loop depth 1");
    check(&prog("    LDG.E R1 addr=0+4*i0"), Invalid, 6, 14, "`i0` used at loop depth 0");
    check(&prog("    LDG.E R1 lanes=[1,2"), Syntax, 6, 20, "never closed");
    check(&prog("    @0000ffff"), Syntax, 6, 5, "without an opcode");
    check(&prog("    warps 0..1 p"), Syntax, 6, 5, "`warps` inside a program");
}

#[test]
fn loops_and_ends() {
    let deep = "    loop 1\n      loop 1\n        loop 1\n          loop 1\n            loop 1\n";
    check(&prog(deep), Unsupported, 10, 13, "nest deeper than 4");
    check(&format!("{}\nend\n", prog("    EXIT")), Syntax, 11, 1, "`end` without an open kernel");
    check(&prog("    loop 2 3\n    end"), Syntax, 6, 12, "unexpected `3`");
    check(&prog("    end x"), Syntax, 6, 9, "unexpected `x`");
    // Zero-trip loops are fine.
    let t = text::read_trace("t", &prog("    loop 0\n      EXIT\n    end\n    EXIT")).unwrap();
    assert_eq!(t.kernels[0].programs[0].dynamic_len(), 1);
}

#[test]
fn kernel_header() {
    check("gpusim-trace 1\nkernel k\n  block 32 1 1\n  program p\n", Syntax, 2, 1, "no `grid` line");
    check("gpusim-trace 1\nkernel k\n  grid 1 1 1\n  grid 1 1 1\n", Syntax, 4, 3, "given twice");
    check("gpusim-trace 1\nkernel k\n  grid 0 1 1\n", Invalid, 4 - 1, 8, "empty dimension");
    check("gpusim-trace 1\nkernel k\n  grid 1 1 1\n  block 1025 1 1\n", Invalid, 4, 9, "more than 1024");
    check("gpusim-trace 1\nkernel k\n  grid 1 1 1\n  cluster 0 1 1\n", Invalid, 4, 11, "empty dimension");
    check("gpusim-trace 1\nkernel k\n  grid 1 1 1\n  frob 1\n", Syntax, 4, 3, "unknown kernel directive `frob`");
    check("gpusim-trace 1\nkernel k\n  grid 1 1 1\n  regs\n", Syntax, 4, 7, "missing operand");
    check("gpusim-trace 1\nkernel\n", Syntax, 2, 7, "missing operand");
    check("gpusim-trace 1\nkern k\n", Syntax, 2, 1, "expected `kernel NAME`");
    let src = "gpusim-trace 1\nkernel k\n  grid 1 1 1\n  block 32 1 1\n  program p\n  end\n  regs 3\n";
    check(src, Syntax, 7, 3, "must come before");
}

#[test]
fn dependencies() {
    check("gpusim-trace 1\nkernel k\n  grid 1 1 1\n  after 0\n", Invalid, 4, 9, "dependencies must come earlier");
    let one = "kernel a\n  grid 1 1 1\n  block 32 1 1\n  program p\n    EXIT\n  end\n  warps 0 p\nend\n";
    let src = format!("gpusim-trace 1\n{one}kernel b\n  grid 1 1 1\n  after 0 1\n");
    check(&src, Invalid, 12, 11, "depend on kernel 1");
    let src = format!("gpusim-trace 1\n{one}{}", one.replace("kernel a\n", "kernel b\n  after 0\n"));
    let t = text::read_trace("t", &src).unwrap();
    assert_eq!(t.kernels[1].info.deps, vec![0]);
    assert_eq!(t.kernels[1].info.id, 1);
}

/// Kernel with 2 warps, programs p and q; `layout` follows (first line is line 10).
fn lay(layout: &str) -> String {
    format!(
        "gpusim-trace 1\nkernel k\n  grid 4 2 1\n  block 64 1 1\n  program p\n    EXIT\n  end\n  program q\n  end\n{layout}\nend\n"
    )
}

#[test]
fn layouts() {
    check(&lay("  warps 0 p"), Invalid, 11, 1, "warps 1 have no program in the default layout");
    check(&lay("  warps 0 p\n  cta 1 0 0\n    warps 0..1 p\n  end"), Invalid, 11, 3, "warps 1 have no program");
    check(&lay("  warps 0..1 p\n  warps 1 q"), Invalid, 11, 9, "warp 1 is given a program twice");
    check(&lay("  warps 0..2 p"), Invalid, 10, 9, "warp 2 is outside the CTA");
    check(&lay("  warps 1..0 p"), Invalid, 10, 9, "empty warp range");
    check(&lay("  warps a..1 p"), Syntax, 10, 9, "bad warp range");
    check(&lay("  warps 0..1 r"), Invalid, 10, 14, "unknown program `r`");
    check(&lay("  warps 0..1 %2"), Invalid, 10, 14, "program %2 is not defined here");
    check(&lay("  warps 0..1 %1x"), Syntax, 10, 14, "bad program number");
    check(&lay("  warps 0..1 p\n  cta 1 0 0\n    warps 0..1 %2\n  end"), Invalid, 12, 16, "not defined here");
    check(
        &lay(
            "  warps 0..1 p\n  cta 1 0 0\n    program r\n    end\n    warps 0..1 r\n  end\n  cta 2 0 0\n    warps 0..1 r\n  end",
        ),
        Invalid,
        17,
        16,
        "unknown program `r`",
    );
    // A program defined after a warps line at kernel level is fine before the first section.
    let t = text::read_trace("t", &lay("  warps 0 p\n  program r\n  end\n  warps 1 r")).unwrap();
    assert_eq!(t.kernels[0].layout.default, vec![0, 2]);
    // %N and shadowing: a section program named like a kernel-level one shadows it.
    let src =
        lay("  warps 0..1 p\n  cta 1 0 0\n    program p\n      NOP\n    end\n    warps 0 p\n    warps 1 %0\n  end");
    let k = &text::read_trace("t", &src).unwrap().kernels[0];
    assert_eq!(k.layout.overrides[&1], vec![2, 0]);
}

#[test]
fn cta_sections() {
    let base = "  warps 0..1 p\n";
    check(&lay(&format!("{base}  cta 4 0 0\n  end")), Invalid, 11, 7, "outside the grid (4,2,1)");
    check(&lay(&format!("{base}  cta 0 2 0\n  end")), Invalid, 11, 7, "outside the grid");
    let two = format!("{base}  cta 1 1 0\n    warps 0..1 q\n  end\n  cta 3 0 0\n    warps 0..1 q\n  end");
    check(&lay(&two), Invalid, 14, 7, "ascending order: CTA (3,0,0) after CTA (1,1,0)");
    let dup = format!("{base}  cta 1 0 0\n    warps 0..1 q\n  end\n  cta 1 0 0\n    warps 0..1 q\n  end");
    check(&lay(&dup), Invalid, 14, 7, "ascending order");
    check(&lay(&format!("{base}  cta 1 0\n  end")), Syntax, 11, 10, "missing operand");
    check(
        &lay(&format!("{base}  cta 1 0 0\n    grid 1 1 1\n  end")),
        Syntax,
        12,
        5,
        "expected `program`, `warps` or `end`",
    );
    // No default layout: every CTA needs a section.
    let e = err(&lay("  cta 0 0 0\n    warps 0..1 p\n  end"));
    assert_eq!(e.kind, Invalid);
    assert!(e.message.contains("no default layout"), "{e}");
}

#[test]
fn lexical_errors() {
    check(&prog("    \"FFMA R0"), Syntax, 6, 5, "unterminated");
    check("gpusim-trace 1\nkernel \"a\\qb\"\n", Syntax, 2, 10, "unknown escape");
    let bad = b"gpusim-trace 1\nkernel k\xff\n";
    let e = TextReader::from_reader("t.trace", &bad[..]).next_kernel().err().unwrap();
    assert_eq!((e.kind, e.at.line, e.at.col), (Syntax, 2, 9));
}

#[test]
fn unknown_opcodes_and_escapes_are_fine() {
    let src = prog("    \"end\" R1\n    \"has space\".X\n    FROB.Z R2 <- R3");
    let k = &text::read_trace("t", &src.replace("\"has space\".X", "\"has space.X\"")).unwrap().kernels[0];
    let names: Vec<&str> = k.ops.iter().map(|(_, d)| d.mnemonic.as_str()).collect();
    assert_eq!(names, ["end", "has space.X", "FROB.Z"]);
    assert!(k.ops.iter().all(|(_, d)| !d.known));
}

/// Counts the bytes the reader pulled from the input.
struct Counting<R> {
    inner: R,
    n: Rc<Cell<usize>>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let k = self.inner.read(buf)?;
        self.n.set(self.n.get() + k);
        Ok(k)
    }
}

#[test]
fn streams_cta_sections_lazily() {
    // 4000 CTAs; every even one has a section with its own program.
    let mut s = String::from("gpusim-trace 1\nkernel many\n  grid 4000 1 1\n  block 64 1 1\n");
    s.push_str("  program d\n    FFMA R0 <- R1 R2 R0\n  end\n  warps 0..1 d\n");
    let mut section_end = Vec::new();
    for c in (0..4000).step_by(2) {
        s.push_str(&format!(
            "  cta {c} 0 0\n    program p{c}\n      LDG.E R1 <- R2x2 addr={:#x}+128*warp\n      EXIT\n    end\n    warps 0 p{c}\n    warps 1 d\n  end\n",
            0x1000 * c
        ));
        section_end.push(s.len());
    }
    s.push_str("end\n");
    let n = Rc::new(Cell::new(0));
    let input = BufReader::with_capacity(256, Counting { inner: s.as_bytes(), n: n.clone() });
    let mut r = TextReader::from_reader("many", input);
    let mut k = r.next_kernel().unwrap().unwrap();
    assert!(n.get() < 512, "the kernel head does not read sections");
    let mut count = 0u64;
    while let Some(cta) = k.next_cta().unwrap() {
        let i = cta.coord.x as usize;
        assert_eq!(i as u64, count);
        let next_section = section_end[i.div_ceil(2).min(1999)];
        assert!(n.get() <= next_section + 256, "CTA {i}: read {} bytes, section ends at {next_section}", n.get());
        if i.is_multiple_of(2) {
            assert_eq!(cta.warps[0].name, format!("p{i}"));
        } else {
            assert_eq!(cta.warps[0].name, "d");
        }
        assert_eq!(cta.warps[1].name, "d");
        count += 1;
    }
    assert_eq!(count, 4000);
    assert_eq!(k.ops().len(), 3);
    drop(k);
    assert!(r.next_kernel().unwrap().is_none());
    assert_eq!(r.line(), s.lines().count() as u64);
}

#[test]
fn skips_unread_ctas() {
    let mut r = TextReader::from_reader("f", FIXTURE.as_bytes());
    let mut k = r.next_kernel().unwrap().unwrap();
    assert_eq!(k.info().name, "stream_copy");
    assert!(k.next_cta().unwrap().is_some());
    drop(k);
    let mut k = r.next_kernel().unwrap().unwrap();
    assert_eq!(k.info().name, "phase 2");
    assert_eq!(k.next_cta().unwrap().unwrap().warps[0].name, "a");
    let c1 = k.next_cta().unwrap().unwrap();
    assert_eq!(c1.coord, Dim3::new(1, 0, 0));
    assert_eq!(c1.warps[0].steps.len(), 2, "the section's own program `a`");
    drop(k);
    assert!(r.next_kernel().unwrap().is_none());
    assert!(r.next_kernel().unwrap().is_none());
}

#[test]
fn errors_stick() {
    let src = lay("  warps 0..1 p\n  cta 1 0 0\n    warps 0..1 q\n  end\n  cta 9 0 0\n  end");
    let mut r = TextReader::from_reader("t", src.as_bytes());
    let mut k = r.next_kernel().unwrap().unwrap();
    assert!(k.next_cta().unwrap().is_some());
    assert!(k.next_cta().unwrap().is_some());
    let e = k.next_cta().unwrap_err();
    assert_eq!((e.kind, e.at.line), (Invalid, 14));
    assert_eq!(k.next_cta().unwrap_err(), e);
    drop(k);
    assert_eq!(r.next_kernel().err().unwrap(), e);
}
