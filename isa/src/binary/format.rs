//! Constants and varint helpers of the binary form (docs/trace-format.md, "Binary form").

/// The first 8 bytes of every binary trace.
pub const MAGIC: &[u8; 8] = b"GPUSIMTB";
/// The format version this module writes (a little-endian u32 after the magic). Version 2 adds
/// per-CTA parameters, tables and parameter loop counts; version 3 a kernel's CTA grouping (a
/// flag byte after the sm version, then the group's name and parameter index). Readers also
/// read versions 1 and 2.
pub const VERSION: u32 = 3;
/// The oldest version readers accept.
pub const MIN_VERSION: u32 = 1;

pub(crate) const TAG_END_TRACE: u8 = 0x00;
pub(crate) const TAG_KERNEL: u8 = 0x01;
pub(crate) const TAG_CTA: u8 = 0x02;
pub(crate) const TAG_END_KERNEL: u8 = 0x03;

pub(crate) const STEP_LOOP_PARAM: u8 = 0xFD;
pub(crate) const STEP_LOOP: u8 = 0xFE;
pub(crate) const STEP_END_LOOP: u8 = 0xFF;

pub(crate) const INST_MASK: u8 = 0x01;
pub(crate) const INST_MEM: u8 = 0x02;
pub(crate) const INST_IMM: u8 = 0x04;
pub(crate) const INST_PC: u8 = 0x08;

pub(crate) const LANES_DEFAULT: u64 = 0;
pub(crate) const LANES_STRIDE: u64 = 1;
pub(crate) const LANES_OFFSETS: u64 = 2;
pub(crate) const MEM_BULK: u64 = 4;

/// Longest string (names, mnemonics) a reader accepts, in bytes.
pub(crate) const MAX_STRING: u64 = 1 << 20;

/// Most elements a reader reserves room for before it has read them.
pub(crate) const MAX_PREALLOC: usize = 1024;

pub(crate) fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

pub(crate) fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

pub(crate) fn put_uv(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub(crate) fn put_zz(out: &mut Vec<u8>, v: i64) {
    put_uv(out, zigzag(v));
}

pub(crate) fn put_str(out: &mut Vec<u8>, s: &str) {
    put_uv(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zigzag_round_trips() {
        for v in [0, 1, -1, 63, -64, i64::MAX, i64::MIN] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
        assert_eq!(zigzag(-1), 1);
        assert_eq!(zigzag(1), 2);
        let mut b = Vec::new();
        put_uv(&mut b, 300);
        assert_eq!(b, [0xAC, 0x02]);
    }
}
