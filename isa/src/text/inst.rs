//! Instruction lines of the text form: mask, opcode, registers, options.

use std::collections::HashMap;
use std::io::BufRead;

use super::common::{check_loop_vars, check_reg_range};
use super::lex::{parse_expr, parse_i32, parse_i64, parse_u32};
use super::parse::TextParser;
use crate::error::{TraceError, TraceErrorKind};
use crate::kernel::OpTable;
use crate::program::{AddrExpr, Inst, Lanes, MemRef, Step};
use crate::reg::{Reg, RegRange};

use TraceErrorKind::{Invalid, Syntax, Unsupported};

/// Words that begin kernel, program or section lines; an opcode spelled like one must be quoted.
const DIRECTIVES: [&str; 4] = ["program", "warps", "cta", "kernel"];

/// Program-building state while a program's lines are read.
#[derive(Default)]
pub(super) struct ProgState {
    pub(super) steps: Vec<Step>,
    pub(super) exprs: Vec<AddrExpr>,
    pub(super) expr_index: HashMap<AddrExpr, u32>,
    pub(super) lane_offsets: Vec<i64>,
    /// Start of each distinct lane offset list (stored once, like `ProgramBuilder::offsets`).
    pub(super) offset_index: HashMap<Vec<i64>, u32>,
    /// Open loops: step index and line.
    pub(super) open: Vec<(usize, u64)>,
}

impl<R: BufRead> TextParser<R> {
    /// Parses the current line as an instruction and appends it to `st`.
    pub(super) fn parse_inst(&self, st: &mut ProgState, ops: &mut OpTable) -> Result<(), TraceError> {
        let n = self.toks.len();
        let mut i = 0;
        let mut mask = u32::MAX;
        if let Some(m) = self.bare(0).and_then(|t| t.strip_prefix('@')) {
            if m.is_empty() || m.len() > 8 || !m.chars().all(|c| c.is_ascii_hexdigit()) {
                return Err(self.err_tok(Syntax, 0, format!("bad active mask `@{m}`: expected 8 hex digits")));
            }
            mask = u32::from_str_radix(m, 16).unwrap_or(u32::MAX);
            i = 1;
            if n == 1 {
                return Err(self.err_tok(Syntax, 0, "active mask without an opcode"));
            }
        }
        if let Some(d) = self.bare(i).filter(|t| DIRECTIVES.contains(t)) {
            return Err(self.err_tok(Syntax, i, format!("`{d}` inside a program (missing `end`?)")));
        }
        let op = ops.intern(self.tok(i)).map_err(|e| self.err_tok(Unsupported, i, e))?;
        i += 1;
        let mut inst = Inst::new(op);
        inst.mask = mask;
        let (mut nd, mut ns, mut in_src) = (0usize, 0usize, false);
        while i < n {
            let bare = self.bare(i);
            if bare.is_some_and(|t| t.contains('=')) {
                break;
            }
            if bare == Some("<-") {
                if in_src {
                    return Err(self.err_tok(Syntax, i, "a second `<-`"));
                }
                in_src = true;
                i += 1;
                continue;
            }
            let t = self.tok(i);
            let r = bare.and_then(parse_reg_range).ok_or_else(|| {
                self.err_tok(
                    Syntax,
                    i,
                    format!("unknown register `{t}` (expected R4, R4x2, UR5, P0, UP1, B0, SB0, RZ, ...)"),
                )
            })?;
            check_reg_range(r).map_err(|e| self.err_tok(Invalid, i, e))?;
            if in_src {
                if ns == 4 {
                    return Err(self.err_tok(Syntax, i, "too many source registers (at most 4)"));
                }
                inst.src[ns] = r;
                ns += 1;
            } else {
                if nd == 2 {
                    return Err(self.err_tok(
                        Syntax,
                        i,
                        "too many destination registers (at most 2; sources follow `<-`)",
                    ));
                }
                inst.dst[nd] = r;
                nd += 1;
            }
            i += 1;
        }
        enum LaneSpec {
            Stride(i32),
            List(Vec<i64>),
        }
        let mut addr: Option<(AddrExpr, usize)> = None;
        let mut lanes: Option<(LaneSpec, usize)> = None;
        let mut bytes: Option<(u32, usize)> = None;
        let (mut imm, mut pc) = (None, None);
        while i < n {
            let t = self.tok(i);
            let Some((k, v)) = self.bare(i).and_then(|t| t.split_once('=')) else {
                return Err(self.err_tok(Syntax, i, format!("unexpected `{t}`: expected an option `key=value`")));
            };
            let vcol = self.toks[i].col + k.chars().count() as u64 + 1;
            let bad = |what: &str| self.err(Syntax, self.line_no, vcol, format!("bad number `{v}`: expected {what}"));
            let dup = match k {
                "addr" => {
                    let e = parse_expr(v).map_err(|(off, m)| self.err(Syntax, self.line_no, vcol + off as u64, m))?;
                    addr.replace((e, i)).is_some()
                }
                "lanes" => {
                    let spec = if let Some(list) = v.strip_prefix('[') {
                        let Some(list) = list.strip_suffix(']') else {
                            return Err(self.err(Syntax, self.line_no, vcol, "expected `[o0,o1,...]`"));
                        };
                        let mut offs = Vec::new();
                        let mut off = 1usize;
                        if !list.trim().is_empty() {
                            for item in list.split(',') {
                                let lead = item.len() - item.trim_start().len();
                                let col = vcol + v[..off + lead].chars().count() as u64;
                                let o = parse_i64(item.trim()).ok_or_else(|| {
                                    self.err(Syntax, self.line_no, col, format!("bad lane offset `{}`", item.trim()))
                                })?;
                                offs.push(o);
                                off += item.len() + 1;
                            }
                        }
                        LaneSpec::List(offs)
                    } else {
                        LaneSpec::Stride(parse_i32(v).ok_or_else(|| bad("a lane stride in -2^31..2^31"))?)
                    };
                    lanes.replace((spec, i)).is_some()
                }
                "bytes" => bytes.replace((parse_u32(v).ok_or_else(|| bad("a byte count 0..2^32"))?, i)).is_some(),
                "imm" => imm.replace(parse_i32(v).ok_or_else(|| bad("an immediate in -2^31..2^31"))?).is_some(),
                "pc" => pc.replace(parse_u32(v).ok_or_else(|| bad("a program counter 0..2^32"))?).is_some(),
                _ => {
                    return Err(self.err_tok(
                        Syntax,
                        i,
                        format!("unknown option `{k}` (expected addr, lanes, bytes, imm or pc)"),
                    ));
                }
            };
            if dup {
                return Err(self.err_tok(Syntax, i, format!("option `{k}` given twice")));
            }
            i += 1;
        }
        inst.imm = imm.unwrap_or(0);
        inst.pc = pc.unwrap_or(0);
        match addr {
            None => {
                if let Some(j) = lanes.map(|l| l.1).or(bytes.map(|b| b.1)) {
                    return Err(self.err_tok(Invalid, j, "a memory option without `addr=`"));
                }
            }
            Some((e, j)) => {
                check_loop_vars(&e.coef, st.open.len()).map_err(|m| self.err_tok(Invalid, j, m))?;
                let next = st.exprs.len() as u32;
                let idx = *st.expr_index.entry(e).or_insert(next);
                if idx == next {
                    st.exprs.push(e);
                }
                let lanes = match lanes {
                    None => Lanes::Stride(ops.get(op).width as i32),
                    Some((LaneSpec::Stride(s), _)) => Lanes::Stride(s),
                    Some((LaneSpec::List(offs), j)) => {
                        if offs.len() != mask.count_ones() as usize {
                            return Err(self.err_tok(
                                Invalid,
                                j,
                                format!("{} lane offsets for {} active lanes", offs.len(), mask.count_ones()),
                            ));
                        }
                        let start = match st.offset_index.get(&offs) {
                            Some(&s) => s,
                            None => {
                                let s = u32::try_from(st.lane_offsets.len())
                                    .ok()
                                    .filter(|s| s.checked_add(32).is_some())
                                    .ok_or_else(|| {
                                        self.err_tok(Unsupported, j, "too many lane offsets in one program")
                                    })?;
                                st.lane_offsets.extend_from_slice(&offs);
                                st.offset_index.insert(offs, s);
                                s
                            }
                        };
                        Lanes::Offsets { start }
                    }
                };
                inst.mem = Some(MemRef { addr: idx, lanes, bulk_bytes: bytes.map_or(0, |b| b.0) });
            }
        }
        self.push_step(st, Step::Inst(inst))
    }
}

/// `R4`, `R4x4`, `UR5`, `P0`, `RZ`, ... as a register range.
fn parse_reg_range(t: &str) -> Option<RegRange> {
    let (name, count) = match t.split_once('x') {
        Some((n, c)) => {
            if c.is_empty() || !c.chars().all(|d| d.is_ascii_digit()) {
                return None;
            }
            (n, c.parse::<u8>().ok().filter(|&c| c > 0)?)
        }
        None => (t, 1),
    };
    Some(RegRange::new(Reg::parse(name)?, count))
}
