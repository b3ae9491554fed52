//! One instruction line of a `.traceg` body, decoded into an [`Inst`] plus its lane addresses.

use super::lines::{At, Tokens, parse_dec_i64, parse_dec_u64, parse_hex_u32, parse_hex_u64};
use crate::error::{TraceError, TraceErrorKind};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::kernel::OpTable;
use crate::opcode::{OpDesc, Semantics};
use crate::program::{Inst, OpId};
use crate::reg::{Reg, RegRange};

/// Register operands the model holds per instruction.
const MAX_DST: usize = 2;
const MAX_SRC: usize = 4;

/// How the active lanes' addresses follow from the base address.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum LanePat {
    /// Lane `l` accesses `base + l·stride`.
    Stride(i32),
    /// The first `n` entries of the offset scratch: one offset from `base` per active lane.
    Offsets(usize),
}

/// A decoded instruction line. `inst.mem` is left `None`; the memory operand is in `mem`.
pub(super) struct Decoded {
    pub inst: Inst,
    pub mem: Option<(u64, LanePat)>,
}

/// A kernel's op table with an index in front that hashes a mnemonic cheaply (FNV-1a; the
/// table's own index uses the standard, DoS-resistant hasher, a third of a short line's cost).
#[derive(Default)]
pub(super) struct Ops {
    pub table: OpTable,
    index: HashMap<Box<str>, OpId, BuildHasherDefault<Fnv1a>>,
}

/// The 64-bit FNV-1a hash.
struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv1a {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// Instruction lines already decoded, by their text: a flat trace repeats every line of a loop
/// body once per iteration and per warp, and a line without a memory operand decodes to the
/// same [`Inst`] each time (its op table and the kernel's `lineinfo` flag are the reader's
/// own). A hit costs a hash and a compare of the line instead of tokenizing and parsing it.
/// Holds at most [`LineMemo::CAP`] lines, so memory stays bounded whatever the trace.
#[derive(Default)]
pub(super) struct LineMemo {
    map: HashMap<Box<str>, Inst, BuildHasherDefault<WordHash>>,
}

impl LineMemo {
    /// Lines kept at most (about 100 bytes each).
    pub const CAP: usize = 1 << 16;

    #[inline]
    pub fn get(&self, line: &str) -> Option<Inst> {
        self.map.get(line).copied()
    }

    /// Remembers `line`, which decoded to `inst` (no memory operand) without error.
    pub fn insert(&mut self, line: &str, inst: Inst) {
        debug_assert!(inst.mem.is_none());
        if self.map.len() < Self::CAP {
            self.map.insert(line.into(), inst);
        }
    }
}

/// A hash of short byte strings eight bytes at a time (the FxHash step: rotate, xor, multiply):
/// a trace line is 20 to 60 bytes, which FNV's byte-at-a-time chain takes several times longer
/// over. Not DoS-resistant, which a trace reader does not need.
#[derive(Default)]
pub(super) struct WordHash(u64);

impl WordHash {
    #[inline]
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl Hasher for WordHash {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut b = [0u8; 8];
            b[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(b));
        }
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// Parses one instruction line: `[line] PC mask ndst {R} OPCODE nsrc {R} width [mode addrs] [imm]`.
pub(super) fn parse_inst(
    at: &At,
    lineinfo: bool,
    ops: &mut Ops,
    offsets: &mut [i64; 32],
) -> Result<Decoded, TraceError> {
    let mut tk = Tokens::new(at.text);
    if lineinfo {
        let (o, t) = need(at, &mut tk, "source line number")?;
        parse_dec_u64(t).ok_or_else(|| at.syntax(o, format!("bad source line number `{t}` (lineinfo is enabled)")))?;
    }
    let (o, t) = need(at, &mut tk, "PC")?;
    let pc = parse_hex_u32(t).ok_or_else(|| at.syntax(o, format!("bad PC `{t}` (expected up to 8 hex digits)")))?;
    let (o, t) = need(at, &mut tk, "active mask")?;
    let mask =
        parse_hex_u32(t).ok_or_else(|| at.syntax(o, format!("bad active mask `{t}` (expected up to 8 hex digits)")))?;

    let (o, t) = need(at, &mut tk, "destination count")?;
    let ndst = parse_dec_u64(t).ok_or_else(|| at.syntax(o, format!("bad destination count `{t}`")))?;
    if ndst > MAX_DST as u64 {
        return Err(at.err(
            TraceErrorKind::Unsupported,
            o,
            format!("{ndst} destination registers (at most {MAX_DST} are supported; Accel-Sim writes at most 1)"),
        ));
    }
    let mut dst = [Reg::NONE; MAX_DST];
    for d in dst.iter_mut().take(ndst as usize) {
        let (o, t) = need(at, &mut tk, "destination register")?;
        *d = reg(t).ok_or_else(|| at.syntax(o, format!("bad destination register `{t}`")))?;
    }

    let (op_off, mnemonic) = need(at, &mut tk, "opcode")?;
    let op = match ops.index.get(mnemonic) {
        // Seen before, so it passed the checks below.
        Some(&op) => op,
        None => {
            if !mnemonic.starts_with(|c: char| c.is_ascii_alphabetic()) {
                return Err(at.syntax(op_off, format!("bad opcode `{mnemonic}`")));
            }
            if Reg::parse(mnemonic).is_some() {
                return Err(at.syntax(
                    op_off,
                    format!("expected an opcode, found the register `{mnemonic}` (does the destination count match?)"),
                ));
            }
            let op = ops.table.intern(mnemonic).map_err(|e| at.err(TraceErrorKind::Invalid, op_off, e))?;
            ops.index.insert(mnemonic.into(), op);
            op
        }
    };

    let (o, t) = need(at, &mut tk, "source count")?;
    let nsrc = parse_dec_u64(t).ok_or_else(|| at.syntax(o, format!("bad source count `{t}`")))?;
    if nsrc > MAX_SRC as u64 {
        return Err(at.err(
            TraceErrorKind::Unsupported,
            o,
            format!("{nsrc} source registers (at most {MAX_SRC} are supported)"),
        ));
    }
    let mut src = [Reg::NONE; MAX_SRC];
    for s in src.iter_mut().take(nsrc as usize) {
        let (o, t) = need(at, &mut tk, "source register")?;
        *s = reg(t).ok_or_else(|| at.syntax(o, format!("bad source register `{t}`")))?;
    }

    let (o, t) = need(at, &mut tk, "memory width")?;
    let width = parse_dec_u64(t)
        .and_then(|v| u32::try_from(v).ok())
        .ok_or_else(|| at.syntax(o, format!("bad memory width `{t}`")))?;

    let mut mem = None;
    if width > 0 {
        let mut addrs = [0u64; 32];
        read_addresses(at, &mut tk, mask, &mut addrs)?;
        mem = Some(compress(mask, &addrs, offsets));
    }

    let mut imm = 0i32;
    if let Some((o, t)) = tk.next_tok() {
        let v =
            parse_dec_i64(t).ok_or_else(|| at.syntax(o, format!("bad immediate `{t}` (expected a decimal number)")))?;
        imm = v.clamp(i32::MIN as i64, i32::MAX as i64) as i32;
    }
    if let Some((o, t)) = tk.next_tok() {
        return Err(at.syntax(o, format!("unexpected `{t}` after the end of the instruction")));
    }

    let desc = ops.table.get(op);
    let w = if width > 0 { width } else { desc.width as u32 };
    let mut inst = Inst::new(op);
    inst.pc = pc;
    inst.mask = mask;
    inst.imm = imm;
    let dn = dst_count(desc, w);
    for (i, r) in dst.iter().enumerate() {
        inst.dst[i] = range(*r, if i == 0 { dn } else { 1 });
    }
    let sn = data_src_count(desc, w);
    for (i, r) in src.iter().enumerate() {
        inst.src[i] = range(*r, if i >= 1 { sn } else { 1 });
    }
    Ok(Decoded { inst, mem })
}

/// [`Reg::parse`], with a fast path for the form nearly every operand of a trace has: `R` and
/// one to three digits below 255.
#[inline]
fn reg(t: &str) -> Option<Reg> {
    if let [b'R', d @ ..] = t.as_bytes()
        && (1..=3).contains(&d.len())
        && d.iter().all(u8::is_ascii_digit)
    {
        let n = d.iter().fold(0u16, |n, &c| n * 10 + (c - b'0') as u16);
        if n < 255 {
            return Some(Reg(n));
        }
    }
    Reg::parse(t)
}

/// The next token, or a syntax error at the end of the line naming what is missing.
fn need<'a>(at: &At, tk: &mut Tokens<'a>, what: &str) -> Result<(usize, &'a str), TraceError> {
    let end = tk.end();
    tk.next_tok().ok_or_else(|| at.syntax(end, format!("the line ends before the {what}")))
}

/// Reads the address block after a non-zero memory width into `addrs` (by lane).
fn read_addresses(at: &At, tk: &mut Tokens, mask: u32, addrs: &mut [u64; 32]) -> Result<(), TraceError> {
    let (mo, mt) = need(at, tk, "address compression mode")?;
    let Some(mode) = parse_dec_u64(mt) else {
        return Err(at.syntax(mo, format!("bad address compression mode `{mt}`")));
    };
    let hex = |o: usize, t: &str, what: &str| {
        parse_hex_u64(t).ok_or_else(|| at.syntax(o, format!("bad {what} `{t}` (expected a hex address)")))
    };
    let lanes = || (0..32u32).filter(move |l| mask & (1 << l) != 0);
    match mode {
        // One address per active lane.
        0 => {
            let n = mask.count_ones();
            for (k, l) in lanes().enumerate() {
                let (o, t) = tk.next_tok().ok_or_else(|| {
                    let what = format!("address {} of {n} (mode 0 lists one per active lane)", k + 1);
                    at.syntax(at.text.len(), format!("the line ends before the {what}"))
                })?;
                addrs[l as usize] = hex(o, t, "address")?;
            }
        }
        // Base of the first active lane and a decimal stride per lane.
        1 => {
            let (o, t) = need(at, tk, "base address")?;
            let base = hex(o, t, "base address")?;
            let (o, t) = need(at, tk, "stride")?;
            let stride = parse_dec_i64(t).ok_or_else(|| at.syntax(o, format!("bad stride `{t}`")))?;
            let first = mask.trailing_zeros();
            for l in lanes() {
                addrs[l as usize] = base.wrapping_add(((l - first) as i64).wrapping_mul(stride) as u64);
            }
        }
        // Base of the first active lane, then one delta per further active lane, each from the
        // previous active lane's address.
        2 => {
            let (o, t) = need(at, tk, "base address")?;
            let mut a = hex(o, t, "base address")?;
            let n = mask.count_ones();
            for (k, l) in lanes().enumerate() {
                if k > 0 {
                    let (o, t) = tk.next_tok().ok_or_else(|| {
                        let what = format!("delta {k} of {} (mode 2 gives one per active lane after the first)", n - 1);
                        at.syntax(at.text.len(), format!("the line ends before the {what}"))
                    })?;
                    let d = parse_dec_i64(t).ok_or_else(|| at.syntax(o, format!("bad address delta `{t}`")))?;
                    a = a.wrapping_add(d as u64);
                }
                addrs[l as usize] = a;
            }
        }
        3 | 4 => {
            return Err(at.err(
                TraceErrorKind::Unsupported,
                mo,
                format!("address mode {mode} (TMA transfer lists of newer tracers) is not supported"),
            ));
        }
        _ => return Err(at.syntax(mo, format!("unknown address compression mode {mode} (expected 0, 1 or 2)"))),
    }
    Ok(())
}

/// Finds the compact form of the active lanes' addresses: a stride in lane index when they are
/// an exact arithmetic progression that fits `i32`, else offsets from the first active lane.
pub(super) fn compress(mask: u32, addrs: &[u64; 32], offsets: &mut [i64; 32]) -> (u64, LanePat) {
    if mask == 0 {
        return (0, LanePat::Stride(0));
    }
    let l0 = mask.trailing_zeros() as usize;
    let a0 = addrs[l0];
    let rest = mask & (mask - 1);
    if rest == 0 {
        return (a0, LanePat::Stride(0));
    }
    let l1 = rest.trailing_zeros() as usize;
    let d = addrs[l1].wrapping_sub(a0) as i64;
    let dl = (l1 - l0) as i64;
    if d % dl == 0
        && let Ok(s) = i32::try_from(d / dl)
        && (0..32)
            .filter(|l| mask & (1 << l) != 0)
            .all(|l| addrs[l] == a0.wrapping_add(((l - l0) as i64).wrapping_mul(s as i64) as u64))
    {
        return (a0.wrapping_sub((l0 as i64).wrapping_mul(s as i64) as u64), LanePat::Stride(s));
    }
    let mut n = 0;
    for l in (0..32).filter(|l| mask & (1 << l) != 0) {
        offsets[n] = addrs[l].wrapping_sub(a0) as i64;
        n += 1;
    }
    (a0, LanePat::Offsets(n))
}

/// A register range of `count` registers from `r`, clipped to the end of `r`'s register file.
fn range(r: Reg, count: u8) -> RegRange {
    if r.is_none() {
        return RegRange::NONE;
    }
    let i = r.index();
    let room = match i {
        0..=254 => 255 - i,
        256..=319 => 320 - i,
        _ => 1,
    };
    RegRange::new(r, count.min(room.min(255) as u8))
}

/// Registers the (single) destination named in the trace stands for.
fn dst_count(desc: &OpDesc, width: u32) -> u8 {
    if let Some(t) = desc.tensor {
        return accumulator_regs(desc, t.m as u32, t.n as u32);
    }
    if desc.base == "LDSM" {
        return desc.matrices.max(1);
    }
    if desc.load && width > 4 { (width / 4).min(255) as u8 } else { 1 }
}

/// Registers each data source (every source after the address) of a store stands for.
fn data_src_count(desc: &OpDesc, width: u32) -> u8 {
    if desc.store && width > 4 { (width / 4).min(255) as u8 } else { 1 }
}

/// Accumulator registers per thread of a tensor-core instruction: `m·n` accumulators spread over
/// the 32 threads of a warp (128 of a warpgroup for `*GMMA`), 4 bytes each for F32/S32, 2 for
/// F16 (packed in pairs), 8 for F64. tcgen05 (`UTC*MMA`) accumulates in tensor memory: 1.
fn accumulator_regs(desc: &OpDesc, m: u32, n: u32) -> u8 {
    if desc.base.starts_with("UTC") {
        return 1;
    }
    let bytes = match desc.base.as_str() {
        "DMMA" => 8,
        "IMMA" | "IGMMA" | "BMMA" | "BGMMA" => 4,
        _ if desc.mnemonic.split('.').skip(1).any(|m| m == "F32") => 4,
        _ => 2,
    };
    let threads = if desc.semantics == Semantics::WgmmaAsync { 128 } else { 32 };
    (m * n / threads * bytes / 4).clamp(1, 255) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str, lineinfo: bool) -> Result<(Decoded, OpTable, [i64; 32]), TraceError> {
        let mut ops = Ops::default();
        let mut offs = [0i64; 32];
        let at = At { file: "t", line: 7, text };
        let d = parse_inst(&at, lineinfo, &mut ops, &mut offs)?;
        Ok((d, ops.table, offs))
    }

    #[test]
    fn plain_instruction() {
        let (d, ops, _) = parse("0000 ffffffff 1 R1 IMAD.MOV.U32 2 R255 R255 0", false).unwrap();
        assert_eq!(ops.get(d.inst.op).mnemonic, "IMAD.MOV.U32");
        assert_eq!(d.inst.dst[0], RegRange::one(Reg::r(1)));
        assert_eq!(d.inst.src[0], RegRange::NONE);
        assert_eq!(d.inst.mask, u32::MAX);
        assert!(d.mem.is_none());
    }

    #[test]
    fn wide_load_and_store_registers() {
        let (d, _, _) = parse("0030 ffffffff 1 R4 LDG.E.128.SYS 1 R2 16 1 0x7f0000000000 16", false).unwrap();
        assert_eq!(d.inst.dst[0], RegRange::new(Reg::r(4), 4));
        assert_eq!(d.inst.src[0], RegRange::one(Reg::r(2)));
        assert_eq!(d.mem, Some((0x7f0000000000, LanePat::Stride(16))));
        let (d, _, _) = parse("0040 ffffffff 0 STG.E.64 2 R2 R6 8 1 0x100 8 0", false).unwrap();
        assert_eq!(d.inst.src[0], RegRange::one(Reg::r(2)));
        assert_eq!(d.inst.src[1], RegRange::new(Reg::r(6), 2));
        let (d, _, _) = parse("0040 ffffffff 1 R253 LDS.128 1 R2 16 1 0x100 16", false).unwrap();
        assert_eq!(d.inst.dst[0], RegRange::new(Reg::r(253), 2));
        let (d, _, _) = parse("0050 ffffffff 1 R8 LDSM.16.M88.4 1 R3 2 1 0x200 16", false).unwrap();
        assert_eq!(d.inst.dst[0], RegRange::new(Reg::r(8), 4));
    }

    #[test]
    fn tensor_destinations() {
        for (m, n) in [
            ("HMMA.16816.F32", 4),
            ("HMMA.16816.F32.BF16", 4),
            ("HMMA.16816.F16", 2),
            ("HMMA.1688.F32.TF32", 4),
            ("IMMA.16832.S8.S8", 4),
            ("DMMA.884", 4),
            ("HGMMA.64x128x16.F32.BF16", 64),
        ] {
            let (d, _, _) = parse(&format!("0 ffffffff 1 R12 {m} 3 R4 R8 R12 0"), false).unwrap();
            assert_eq!(d.inst.dst[0], RegRange::new(Reg::r(12), n), "{m}");
            assert_eq!(d.inst.src[2], RegRange::one(Reg::r(12)), "{m}");
        }
    }

    #[test]
    fn errors_point_at_tokens() {
        let e = parse("0000 fffffffz 0 EXIT 0 0", false).err().unwrap();
        assert_eq!((e.kind, e.at.line, e.at.col), (TraceErrorKind::Syntax, 7, 6));
        assert!(parse("12 0000 ffffffff 0 EXIT 0 0", true).is_ok());
        let e = parse("12 0000 ffffffff 0 EXIT 0 0", false).err().unwrap();
        assert_eq!(e.at.col, 9, "{e}");
        let e = parse("x12 0000 ffffffff 0 EXIT 0 0", true).err().unwrap();
        assert_eq!(e.at.col, 1, "{e}");
        let e = parse("0000 ffffffff 0 EXIT 0", false).err().unwrap();
        assert!(e.message.contains("memory width"), "{e}");
        let e = parse("0000 ffffffff 0 EXIT 0 0 0 7", false).err().unwrap();
        assert_eq!(e.at.col, 28);
        let e = parse("0000 0000000f 1 R2 LDG.E 1 R2 4 0 0x10 0x14 0x18", false).err().unwrap();
        assert!(e.message.contains("address 4 of 4"), "{e}");
        let e = parse("0000 ffffffff 1 R2 LDG.E 1 R2 4 3 1", false).err().unwrap();
        assert_eq!(e.kind, TraceErrorKind::Unsupported);
        let e = parse("0000 ffffffff 1 R2 LDG.E 1 R2 4 9 1", false).err().unwrap();
        assert_eq!(e.kind, TraceErrorKind::Syntax);
        let e = parse("0000 ffffffff 2 R2 R3 R4 FOO 0 0", false).err().unwrap();
        assert_eq!((e.kind, e.at.col), (TraceErrorKind::Syntax, 23));
        let e = parse("0000 ffffffff 3 R2 R3 R4 FOO 0 0", false).err().unwrap();
        assert_eq!(e.kind, TraceErrorKind::Unsupported);
        let e = parse("0000 ffffffff 1 X2 FOO 0 0", false).err().unwrap();
        assert_eq!(e.at.col, 17);
    }

    #[test]
    fn compression_detects_progressions() {
        let mut offs = [0i64; 32];
        let mut a = [0u64; 32];
        for (l, x) in a.iter_mut().enumerate() {
            *x = 1000 + 8 * l as u64;
        }
        assert_eq!(compress(0x5555_5555, &a, &mut offs), (1000, LanePat::Stride(8)));
        assert_eq!(compress(0xffff_0000, &a, &mut offs), (1000, LanePat::Stride(8)));
        assert_eq!(compress(0x0000_0100, &a, &mut offs), (1064, LanePat::Stride(0)));
        a[5] = 7;
        assert_eq!(compress(0x0000_0130, &a, &mut offs), (1032, LanePat::Offsets(3)));
        assert_eq!(&offs[..3], &[0, 7 - 1032, 1064 - 1032]);
        // Stride too large for i32.
        let mut b = [0u64; 32];
        b[1] = 1 << 40;
        assert_eq!(compress(0b11, &b, &mut offs), (0, LanePat::Offsets(2)));
        // Lanes 0 and 2 at 0 and 3: not a whole stride per lane.
        let mut c = [0u64; 32];
        c[2] = 3;
        assert_eq!(compress(0b101, &c, &mut offs), (0, LanePat::Offsets(2)));
    }
}
