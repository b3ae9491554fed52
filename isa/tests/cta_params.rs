//! Per-CTA parameters (format version 2): causal and varlen style kernels whose per-CTA loop
//! counts differ, evaluation rules of `CtaParam`, and text syntax errors.

use std::sync::Arc;

use gpusim_isa::program::{CtaParam, MAX_PARAMS, NUM_VARS, Var};
use gpusim_isa::{Cursor, KernelTrace, Trace, TraceErrorKind, binary, text};

/// Sum over every CTA and warp of the instructions a cursor walks, and of `dynamic_len_for`
/// (asserted equal).
fn walked_total(k: &KernelTrace) -> u64 {
    let mut total = 0u64;
    for c in 0..k.info.num_ctas() {
        let cta = k.cta(c);
        for (w, p) in cta.warps.iter().enumerate() {
            let mut cur = Cursor::new(p, cta.coord.as_array(), w as u32);
            let mut n = 0u64;
            let mut walked = std::collections::BTreeMap::<(u16, u32), u64>::new();
            while let Some(i) = cur.peek(p) {
                *walked.entry((i.op, i.pc)).or_default() += 1;
                cur.advance();
                n += 1;
            }
            assert_eq!(n, p.dynamic_len_for(cta.coord.as_array(), w as u32));
            // `for_each_executed` counts what the cursor walks, instruction by instruction.
            let mut counted = std::collections::BTreeMap::<(u16, u32), u64>::new();
            p.for_each_executed(cta.coord.as_array(), w as u32, |i, m| *counted.entry((i.op, i.pc)).or_default() += m);
            assert_eq!(counted, walked);
            total += n;
        }
    }
    total
}

/// The trace, its text form read back and its binary form read back: all equal.
fn three_ways(src: &str) -> [Trace; 3] {
    let t = text::read_trace("src.trace", src).unwrap_or_else(|e| panic!("{e}"));
    let s = text::to_string(&t).unwrap();
    assert!(s.starts_with("gpusim-trace 2\n"), "{s}");
    let from_text = text::read_trace("w.trace", &s).unwrap_or_else(|e| panic!("{e}\n{s}"));
    let from_bin = binary::read_trace("w.bin", &binary::to_bytes(&t).unwrap()).unwrap();
    assert_eq!(from_text, t);
    assert_eq!(from_bin, t);
    [t, from_text, from_bin]
}

const T: u64 = 7;

/// Causal attention: query tile `cta.x` runs `cta.x + 1` KV iterations of a 3-instruction body,
/// after a 2-instruction prologue and before a 1-instruction epilogue; 4 warps per CTA.
const CAUSAL: &str = "gpusim-trace 2
kernel causal
  grid 7 1 1
  block 128 1 1
  program attn
    param p0 = cta.x + 1
    S2R R0 <-
    S2R R1 <-
    loop p0
      LDG.E.128 R4x4 <- R0 addr=0x1000+65536*cta.x+128*i0+16*p0 lanes=16
      HMMA.16816.F32 R8x4 <- R4x4 R4x4 R8x4
      BAR.SYNC
    end
    EXIT
  end
  warps 0..3 attn
end
";

#[test]
fn causal_total_matches_closed_form_in_text_and_binary() {
    for t in three_ways(CAUSAL) {
        let k = &t.kernels[0];
        let body = 3;
        let want = 4 * (T * (T + 1) / 2 * body + T * 3);
        assert_eq!(walked_total(k), want);
    }
}

/// Varlen + causal: batch `cta.z`'s length in 64-row blocks comes from a table; a query tile of
/// 128 rows (`cta.x`) past the sequence's end does no work, and its KV loop count is
/// min(ceil((cta.x+1)*128/64), seqlen blocks) = min(2*cta.x + 2, len), the min chained as
/// `p3 = p1 - clamp(p1 - p0, 0, inf)`.
const VARLEN: &str = "gpusim-trace 2
kernel varlen
  grid 4 1 3
  block 32 1 1
  program fa
    table seqlen_blocks = 3 8 0
    param p0 = seqlen_blocks[cta.z]
    param p1 = (128*cta.x + 127 + 64) / 64
    param p2 = clamp(p1 - p0, 0, inf)
    param p3 = p1 - p2
    param p4 = clamp(p0 - 2*cta.x, 0, 1)
    loop p4
      S2R R0 <-
      loop p3
        LDG.E R4 <- R0 addr=0x2000+64*i1+4096*p0
      end
    end
    EXIT
  end
  warps 0..0 fa
end
";

#[test]
fn varlen_total_matches_closed_form_in_text_and_binary() {
    let lens = [3i64, 8, 0];
    let mut want = 0u64;
    for len in lens {
        for x in 0..4i64 {
            let active = 2 * x < len;
            let n = (2 * x + 2).min(len);
            want += 1 + if active { 1 + n as u64 } else { 0 };
        }
    }
    for t in three_ways(VARLEN) {
        assert_eq!(walked_total(&t.kernels[0]), want);
    }
}

fn vars(cta: [i64; 3], warp: i64, params: &[i64]) -> [i64; NUM_VARS] {
    let mut v = [0; NUM_VARS];
    v[..3].copy_from_slice(&cta);
    v[3] = warp;
    for (k, p) in params.iter().enumerate() {
        v[Var::Param(k as u8).index()] = *p;
    }
    v
}

#[test]
fn division_rounds_toward_negative_infinity() {
    let p = CtaParam { div: 4, ..CtaParam::constant(-1).with(Var::CtaX, 1) };
    let at = |x| p.eval(&vars([x, 0, 0], 0, &[]), &[]);
    assert_eq!([at(0), at(1), at(4), at(5), at(-2)], [-1, 0, 0, 1, -1]);
    let q = CtaParam { div: 3, ..CtaParam::constant(-7) };
    assert_eq!(q.eval(&vars([0; 3], 0, &[]), &[]), -3);
    // Extreme values wrap instead of panicking.
    let r = CtaParam { div: 1, ..CtaParam::constant(i64::MIN).with(Var::Warp, -1) };
    assert_eq!(r.eval(&vars([0; 3], 1, &[]), &[]), i64::MAX);
    let bad = CtaParam { div: 0, lo: 5, hi: -5, table: Some(9), ..CtaParam::constant(3) };
    let _ = bad.eval(&vars([0; 3], 0, &[]), &[]);
}

#[test]
fn clamps_and_table_index_clamping() {
    let p = CtaParam { lo: 2, hi: 5, ..CtaParam::constant(0).with(Var::CtaY, 1) };
    let at = |y| p.eval(&vars([0, y, 0], 0, &[]), &[]);
    assert_eq!([at(0), at(3), at(9)], [2, 3, 5]);
    let tabs: Vec<Arc<[i64]>> = vec![vec![10, 20, 30].into()];
    let t = CtaParam { table: Some(0), ..CtaParam::constant(0).with(Var::CtaZ, 1) };
    let at = |z| t.eval(&vars([0, 0, z], 0, &[]), &tabs);
    assert_eq!([at(-4), at(0), at(1), at(2), at(3), at(1 << 40)], [10, 10, 20, 30, 30, 30]);
}

#[test]
fn min_and_max_by_chaining() {
    for (a, b) in [(3i64, 9i64), (9, 3), (-4, -4), (0, -7)] {
        let mut prog = gpusim_isa::ProgramBuilder::new("m");
        prog.add_param(CtaParam::constant(a)).unwrap();
        prog.add_param(CtaParam::constant(b)).unwrap();
        // p2 = min(p0, p1) = p0 - clamp(p0 - p1, 0, inf)
        let d = CtaParam { lo: 0, ..CtaParam::constant(0).with(Var::Param(0), 1).with(Var::Param(1), -1) };
        let di = prog.add_param(d).unwrap();
        prog.add_param(CtaParam::constant(0).with(Var::Param(0), 1).with(Var::Param(di), -1)).unwrap();
        // p4 = max(p0, p1) = p0 + clamp(p1 - p0, 0, inf)
        let e = CtaParam { lo: 0, ..CtaParam::constant(0).with(Var::Param(1), 1).with(Var::Param(0), -1) };
        let ei = prog.add_param(e).unwrap();
        prog.add_param(CtaParam::constant(0).with(Var::Param(0), 1).with(Var::Param(ei), 1)).unwrap();
        let p = prog.finish().unwrap();
        let v = p.eval_params([0; 3], 0);
        assert_eq!((v[3], v[5]), (a.min(b), a.max(b)), "a={a} b={b}");
    }
}

#[test]
fn builder_and_check_reject_bad_params() {
    let mut b = gpusim_isa::ProgramBuilder::new("b");
    assert!(b.add_param(CtaParam::constant(0).with(Var::Param(0), 1)).unwrap_err().contains("not defined"));
    // A tile parameter (one that follows a loop counter) is fine; it may not be a trip count.
    let tile = b.add_param(CtaParam::constant(0).with(Var::Loop(0), 1)).unwrap();
    assert_eq!(tile, 0);
    assert!(b.add_param(CtaParam { div: 0, ..CtaParam::constant(0) }).unwrap_err().contains("divisor"));
    assert!(b.add_param(CtaParam { lo: 1, hi: 0, ..CtaParam::constant(0) }).unwrap_err().contains("empty"));
    assert!(b.add_param(CtaParam { table: Some(0), ..CtaParam::constant(0) }).unwrap_err().contains("table"));
    assert!(b.begin_loop_param(1).is_err());
    for _ in 1..MAX_PARAMS {
        b.add_param(CtaParam::constant(1)).unwrap();
    }
    assert!(b.add_param(CtaParam::constant(1)).unwrap_err().contains("more than 8"));
}

#[track_caller]
fn text_err(body: &str, line: u64, col: u64, part: &str) {
    let src = format!(
        "gpusim-trace 2\nkernel k\n  grid 2 1 1\n  block 32 1 1\n  program a\n{body}    EXIT\n  end\n  warps 0..0 a\nend\n"
    );
    let e = text::read_trace("t.trace", &src).expect_err("expected an error");
    assert_eq!((e.at.line, e.at.col), (line, col), "{e}");
    assert!(e.to_string().contains(part), "{e} lacks {part}");
    assert!(matches!(e.kind, TraceErrorKind::Syntax | TraceErrorKind::Invalid | TraceErrorKind::Unsupported));
}

#[test]
fn param_syntax_errors_name_line_and_column() {
    text_err("    param p0 = lens[cta.x]\n", 6, 16, "unknown table `lens`");
    text_err("    param p0 = p1 + 1\n", 6, 16, "before it is defined");
    text_err("    param p1 = 3\n", 6, 11, "expected `p0`");
    text_err("    param p0 = cta.x * cta.y\n", 6, 22, "linear");
    text_err("    param p0 = cta.x / 0\n", 6, 22, "at least 1");
    text_err("    param p0 = clamp(cta.x, 5, 2)\n", 6, 32, "empty");
    text_err("    param p0 = cta.q\n", 6, 16, "unknown variable");
    text_err("    param p0 = i0\n    loop p0\n    EXIT\n    end\n", 5, 1, "follows loop counters");
    text_err("    param p0 = 1 2\n", 6, 18, "unexpected text");
    text_err("    loop p0\n    end\n", 6, 10, "not a defined parameter");
    text_err("    table t = 1 x\n", 6, 17, "bad table entry");
    let many: String = (0..9).map(|k| format!("    param p{k} = {k}\n")).collect();
    text_err(&many, 14, 5, "more than 8");
}

/// A grouped kernel: each CTA's expert read from a table (as the grouped GEMMs do), the CTAs
/// grouped by it.
const GROUPED: &str = "gpusim-trace 2
kernel grouped
  grid 5 1 1
  block 32 1 1
  group expert p0
  program g
    table experts = 0 0 3 3 3
    param p0 = experts[cta.x]
    loop p0
      FFMA R1 <- R1 R1 R1
    end
    EXIT
  end
  warps 0..0 g
end
";

#[test]
fn cta_groups_read_write_and_round_trip() {
    let [t, ..] = three_ways(GROUPED);
    let g = t.kernels[0].info.cta_group.clone().expect("the group directive is read");
    assert_eq!((g.name.as_str(), g.param), ("expert", 0));
    // The binary form before version 3 has no group: a grouped kernel written today reads
    // back grouped, and a version 2 file (no flag byte) still reads.
    let bin = binary::to_bytes(&t).unwrap();
    assert_eq!(u32::from_le_bytes(bin[8..12].try_into().unwrap()), 3);
    let plain = text::read_trace("c", CAUSAL).unwrap();
    let mut v2 = binary::to_bytes(&plain).unwrap();
    v2[8] = 2;
    // Drop the flag byte (0: no group) after the sm version: name, 9 dims, 4 fields.
    let at = 12 + 1 + 1 + "causal".len() + 9 + 4;
    assert_eq!(v2[at], 0);
    v2.remove(at);
    assert_eq!(binary::read_trace("v2.bin", &v2).unwrap(), plain);
}

#[test]
fn cta_group_errors_name_line_and_column() {
    let with = |line: &str| GROUPED.replace("  group expert p0\n", line);
    let e = |src: String| text::read_trace("t.trace", &src).expect_err("expected an error");
    let x = e(with("  group expert\n"));
    assert_eq!((x.at.line, x.kind), (5, TraceErrorKind::Syntax), "{x}");
    let x = e(with("  group expert q0\n"));
    assert_eq!((x.at.line, x.at.col), (5, 16), "{x}");
    assert!(x.message.contains("expected a parameter"), "{x}");
    let x = e(with("  group expert p8\n"));
    assert!(x.message.contains("p8 does not exist"), "{x}");
    let x = e(with("  group ex/pert p0\n"));
    assert_eq!((x.at.line, x.at.col), (5, 9), "{x}");
    let x = e(with("  group expert p0\n  group expert p0\n"));
    assert!(x.message.contains("given twice"), "{x}");
    // A version 1 writer refuses a grouped kernel.
    let t = text::read_trace("g", GROUPED).unwrap();
    let mut w = text::TextWriter::new(Vec::new()).unwrap();
    assert!(w.write_kernel(&t.kernels[0]).unwrap_err().to_string().contains("version 2"));
}

#[test]
fn version_1_writer_refuses_params_and_old_traces_stay_version_1() {
    let t = text::read_trace("c", CAUSAL).unwrap();
    let mut w = text::TextWriter::new(Vec::new()).unwrap();
    assert!(w.write_kernel(&t.kernels[0]).unwrap_err().to_string().contains("version 2"));
    let old = text::read_trace("f", include_str!("fixtures/stream_copy_small.trace")).unwrap();
    assert!(text::to_string(&old).unwrap().starts_with("gpusim-trace 1\n"));
}

/// Regenerates the fuzz seeds of the binary reader from the text seeds (run with
/// `cargo test -p gpusim-isa --test cta_params -- --ignored`).
#[test]
#[ignore]
fn write_fuzz_seeds() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../fuzz/corpus");
    for (name, src) in [("causal", CAUSAL), ("varlen", VARLEN)] {
        let t = text::read_trace(name, src).unwrap();
        std::fs::write(format!("{root}/binary_reader/{name}.bin"), binary::to_bytes(&t).unwrap()).unwrap();
    }
}
