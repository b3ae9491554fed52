//! Writes a kernel as a flat Accel-Sim `.traceg` (tracer version 5, no line numbers): every
//! warp's program walked instruction by instruction, loops unrolled, addresses evaluated.
//!
//! What the reader gets back is the same dynamic instruction stream (opcodes, masks, the first
//! register of each operand, immediates, every active lane's address); register ranges are
//! widened again by the reader's own rules. An instruction without a PC of its own gets its
//! static position (step index × 16), the same in every iteration, as a real tracer's PCs are;
//! so the reader folds the unrolled loops back ([`super::fold`]). `gpusim bench` uses it to
//! make its large flat trace from a generated kernel, so that parsing is part of a figure.

use std::io::Write;

use crate::cursor::Cursor;
use crate::error::{Location, TraceError, TraceErrorKind};
use crate::program::Lanes;
use crate::reg::RegRange;
use crate::source::KernelSource;

fn io_error(what: &str, e: std::io::Error) -> TraceError {
    TraceError::new(
        TraceErrorKind::Io,
        Location { file: what.to_string(), line: 0, col: 0 },
        format!("write error: {e}"),
    )
}

/// Writes every CTA of `ks` as one `.traceg` to `out` (`name` names the output in errors).
/// Returns the number of warp instructions written.
pub fn write_traceg(ks: &mut dyn KernelSource, out: &mut dyn Write, name: &str) -> Result<u64, TraceError> {
    let io = |e| io_error(name, e);
    let info = ks.info().clone();
    let (g, b, c) = (info.grid, info.block, info.cluster);
    write!(
        out,
        "-kernel name = {}\n-kernel id = {}\n-grid dim = ({},{},{})\n-block dim = ({},{},{})\n",
        info.name,
        info.id + 1,
        g.x,
        g.y,
        g.z,
        b.x,
        b.y,
        b.z
    )
    .map_err(io)?;
    if c.count() > 1 {
        writeln!(out, "-cluster dim = ({},{},{})", c.x, c.y, c.z).map_err(io)?;
    }
    write!(
        out,
        "-shmem = {}\n-nregs = {}\n-binary version = {}\n-cuda stream id = {}\n\
         -shmem base_addr = 0x0\n-local mem base_addr = 0x0\n-nvbit version = 1.5.5\n\
         -accelsim tracer version = 5\n-enable lineinfo = 0\n\n\
         #traces format = PC mask dest_num [reg_dests] opcode src_num [reg_srcs] mem_width [adrrescompress?] [mem_addresses] immediate\n\n",
        info.smem_bytes, info.regs_per_thread, info.sm_version, info.stream
    )
    .map_err(io)?;
    let mut lines = 0u64;
    let mut line = String::with_capacity(1024);
    let mut addrs = [0u64; 32];
    while let Some(cta) = ks.next_cta()? {
        let k = cta.coord;
        write!(out, "#BEGIN_TB\n\nthread block = {},{},{}\n\n", k.x, k.y, k.z).map_err(io)?;
        for (w, prog) in cta.warps.iter().enumerate() {
            let n = prog.dynamic_len_for([k.x, k.y, k.z], w as u32);
            write!(out, "warp = {w}\ninsts = {n}\n").map_err(io)?;
            let mut cur = Cursor::new(prog, [k.x, k.y, k.z], w as u32);
            while let Some(inst) = cur.peek(prog) {
                use std::fmt::Write as _;
                line.clear();
                let desc = ks.ops().get(inst.op);
                // A static PC, as a real tracer writes: the same in every iteration of a loop.
                let pc = if inst.pc != 0 { inst.pc } else { cur.step().wrapping_mul(16) };
                let regs = |rs: &[RegRange]| rs.iter().filter(|r| !r.is_none()).count();
                let _ = write!(line, "{pc:04x} {:08x} {}", inst.mask, regs(&inst.dst));
                for r in inst.dst.iter().filter(|r| !r.is_none()) {
                    let _ = write!(line, " {}", r.first);
                }
                let _ = write!(line, " {} {}", desc.mnemonic, regs(&inst.src));
                for r in inst.src.iter().filter(|r| !r.is_none()) {
                    let _ = write!(line, " {}", r.first);
                }
                match inst.mem {
                    Some(m) if inst.mask != 0 => {
                        let _ = write!(line, " {}", desc.width.max(1));
                        cur.lane_addresses(prog, inst, &mut addrs);
                        let first = inst.mask.trailing_zeros() as usize;
                        match m.lanes {
                            Lanes::Stride(s) => {
                                let _ = write!(line, " 1 0x{:x} {s}", addrs[first]);
                            }
                            Lanes::Offsets { .. } => {
                                line.push_str(" 0");
                                let mut mask = inst.mask;
                                while mask != 0 {
                                    let l = mask.trailing_zeros() as usize;
                                    let _ = write!(line, " 0x{:x}", addrs[l]);
                                    mask &= mask - 1;
                                }
                            }
                        }
                    }
                    _ => line.push_str(" 0"),
                }
                let _ = writeln!(line, " {}", inst.imm);
                out.write_all(line.as_bytes()).map_err(io)?;
                cur.advance();
                lines += 1;
            }
        }
        out.write_all(b"#END_TB\n\n").map_err(io)?;
    }
    Ok(lines)
}
