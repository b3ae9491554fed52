//! The binary reader: error cases with their kinds and byte offsets, truncation anywhere,
//! streaming.

use gpusim_isa::binary::{self, BinaryReader, MAGIC};
use gpusim_isa::{TraceError, TraceErrorKind, TraceSource, text};

use TraceErrorKind::{Invalid, Syntax, Truncated, Unsupported};

const FIXTURE: &str = include_str!("fixtures/stream_copy_small.trace");

fn fixture_bytes() -> Vec<u8> {
    binary::to_bytes(&text::read_trace("f", FIXTURE).unwrap()).unwrap()
}

/// Reads everything through the streaming reader.
fn stream_all(bytes: &[u8]) -> Result<u64, TraceError> {
    let mut r = BinaryReader::from_reader("t.bin", bytes);
    let mut ctas = 0;
    while let Some(mut k) = r.next_kernel()? {
        while k.next_cta()?.is_some() {
            ctas += 1;
        }
    }
    Ok(ctas)
}

#[track_caller]
fn check(bytes: &[u8], kind: TraceErrorKind, offset: u64, msg_part: &str) {
    let e = binary::read_trace("t.bin", bytes).expect_err("expected an error");
    assert_eq!((e.kind, e.at.line, e.at.col), (kind, 0, offset), "{e}");
    assert!(e.message.contains(msg_part), "`{}` does not contain `{msg_part}`", e.message);
    assert_eq!(stream_all(bytes).expect_err("streaming should fail too"), e);
}

fn header() -> Vec<u8> {
    let mut b = MAGIC.to_vec();
    b.extend_from_slice(&1u32.to_le_bytes());
    b
}

/// One kernel `k` (grid 2 1 1, block 32 1 1), opcodes EXIT and LDG.E, one program `p` whose
/// exprs/offsets/steps bytes are given, default layout all `p`, then `rest` (sections, the end
/// of the kernel and of the trace). Returns the bytes and the offset where the steps start.
fn kernel(deps: &[u8], exprs_offs: &[u8], steps: &[u8], rest: &[u8]) -> (Vec<u8>, u64) {
    let mut b = header();
    b.extend_from_slice(&[0x01, 1, b'k', 2, 1, 1, 32, 1, 1, 1, 1, 1, 32, 0, 0, 0]);
    b.extend_from_slice(deps);
    b.extend_from_slice(&[2, 4, b'E', b'X', b'I', b'T', 5, b'L', b'D', b'G', b'.', b'E']);
    b.extend_from_slice(&[1, 1, b'p']);
    b.extend_from_slice(exprs_offs);
    let at = b.len() as u64;
    b.extend_from_slice(steps);
    b.extend_from_slice(&[1, 0, 1]);
    b.extend_from_slice(rest);
    (b, at)
}

const END: &[u8] = &[0x03, 0x00];

#[test]
fn hand_made_kernel_reads() {
    let (b, _) = kernel(&[0], &[0, 0], &[1, 0x00, 0], END);
    let t = binary::read_trace("t", &b).unwrap();
    let k = &t.kernels[0];
    assert_eq!((k.info.name.as_str(), k.info.grid.x, k.ops.len()), ("k", 2, 2));
    assert_eq!(k.programs[0].steps.len(), 1);
    assert_eq!(stream_all(&b).unwrap(), 2);
}

#[test]
fn magic_and_version() {
    check(b"", Truncated, 0, "empty");
    check(b"GPUS", Truncated, 4, "magic");
    check(b"GPUSIMTX\x01\0\0\0", Syntax, 0, "not a gpusim binary trace");
    check(b"gpusim-trace 1\n", Syntax, 0, "not a gpusim binary trace");
    check(b"GPUSIMTB\x04\0\0\0\0", Unsupported, 8, "version 4");
    check(b"GPUSIMTB\x01\0", Truncated, 10, "version");
    check(b"GPUSIMTB\x01\0\0\0", Truncated, 12, "end-of-trace");
    assert_eq!(binary::read_trace("t", b"GPUSIMTB\x01\0\0\0\0").unwrap().kernels.len(), 0);
    check(b"GPUSIMTB\x01\0\0\0\0\0", Syntax, 13, "trailing bytes");
    check(b"GPUSIMTB\x01\0\0\0\x07", Syntax, 12, "unknown record tag 0x07");
}

#[test]
fn every_prefix_is_truncated() {
    let b = fixture_bytes();
    for n in 1..b.len() {
        let e = binary::read_trace("t.bin", &b[..n]).expect_err("a strict prefix must fail");
        assert_eq!(e.kind, Truncated, "prefix of {n} bytes: {e}");
        assert_eq!(e.at.col, n as u64, "prefix of {n} bytes: {e}");
        assert_eq!(stream_all(&b[..n]).unwrap_err(), e);
    }
    assert_eq!(stream_all(&b).unwrap(), 8 + 3);
}

#[test]
fn bad_steps() {
    // Step tag 0xF0: 15 register slots is not a valid count.
    let (b, at) = kernel(&[0], &[0, 0], &[1, 0xF0, 0], END);
    check(&b, Syntax, at + 1, "bad step tag 0xf0");
    // Opcode id 2 with a table of 2.
    let (b, at) = kernel(&[0], &[0, 0], &[1, 0x00, 2], END);
    check(&b, Invalid, at + 2, "opcode id 2 is not in the kernel's table");
    // Loops nested 5 deep.
    let (b, at) =
        kernel(&[0], &[0, 0], &[10, 0xFE, 1, 0xFE, 1, 0xFE, 1, 0xFE, 1, 0xFE, 1, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF], END);
    check(&b, Unsupported, at + 9, "nest deeper than 4");
    // End of loop without a loop.
    let (b, at) = kernel(&[0], &[0, 0], &[1, 0xFF], END);
    check(&b, Syntax, at + 1, "without a loop");
    // A loop never closed.
    let (b, at) = kernel(&[0], &[0, 0], &[1, 0xFE, 1], END);
    check(&b, Syntax, at + 3, "ends inside 1 loop");
    // Register code for R254 + 1 = R255 (a constant, not a register).
    let (b, at) = kernel(&[0], &[0, 0], &[1, 0x10, 0, 0x80, 0x04], END);
    check(&b, Invalid, at + 3, "does not exist");
    // R250x8 runs past R254.
    let (b, at) = kernel(&[0], &[0, 0], &[1, 0x10, 0, 0xF7, 0x03, 8], END);
    check(&b, Invalid, at + 3, "runs past");
    // A varint longer than 64 bits.
    let (b, at) = kernel(&[0], &[0, 0], &[1, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F], END);
    check(&b, Syntax, at + 2, "longer than 64 bits");
    // A memory operand on expression 0 of an empty expression table.
    let (b, at) = kernel(&[0], &[0, 0], &[1, 0x02, 1, 0, 0], END);
    check(&b, Invalid, at + 4, "expression 0 does not exist");
    // Expression with `i0` outside any loop.
    let (b, at) = kernel(&[0], &[1, 0, 0x10, 2, 0], &[1, 0x02, 1, 0, 0], END);
    check(&b, Invalid, at + 4, "`i0` used at loop depth 0");
    // Explicit lane offsets past the offset table (2 offsets, 32 active lanes).
    let (b, at) = kernel(&[0], &[1, 0, 0, 2, 0, 0], &[1, 0x02, 1, 2, 0, 0], END);
    check(&b, Invalid, at + 5, "lane offsets 0.. out of range");
}

#[test]
fn bad_kernels() {
    // Kernel 0 depending on kernel 0.
    let (b, _) = kernel(&[1, 0], &[0, 0], &[1, 0x00, 0], END);
    check(&b, Invalid, 29, "dependencies must come earlier");
    // A section for CTA 2 in a grid of 2 (delta 2 from the start).
    let (b, _) = kernel(&[0], &[0, 0], &[1, 0x00, 0], &[0x02, 2, 0, 0, 1, 0, 1, 0x03, 0x00]);
    let sec = b.len() as u64 - 9;
    check(&b, Invalid, sec + 1, "outside the grid of 2 CTAs");
    // A section whose layout names program 1 of 1.
    let (b, _) = kernel(&[0], &[0, 0], &[1, 0x00, 0], &[0x02, 1, 0, 0, 1, 1, 1, 0x03, 0x00]);
    check(&b, Invalid, b.len() as u64 - 4, "program 1 does not exist");
    // A kernel record ended by an unknown tag.
    let (b, _) = kernel(&[0], &[0, 0], &[1, 0x00, 0], &[0x09]);
    check(&b, Syntax, b.len() as u64 - 1, "unknown record tag 0x09");
    // The same opcode listed twice.
    let mut b = header();
    b.extend_from_slice(&[0x01, 1, b'k', 1, 1, 1, 32, 1, 1, 1, 1, 1, 32, 0, 0, 0, 0, 2, 1, b'A', 1, b'A']);
    check(&b, Invalid, 32, "listed twice");
    // A block of 2048 threads.
    let mut b = header();
    b.extend_from_slice(&[0x01, 1, b'k', 1, 1, 1, 0x80, 0x10, 1, 1]);
    check(&b, Invalid, 18, "more than 1024");
    // Default layout that covers 0 of 1 warps is fine only when every CTA has a section.
    let (b, _) = kernel(&[0], &[0, 0], &[1, 0x00, 0], END);
    let mut b2 = b.clone();
    let lay = b2.len() - END.len() - 3;
    b2.splice(lay..lay + 3, [0]);
    let e = binary::read_trace("t", &b2).unwrap_err();
    assert_eq!(e.kind, Invalid);
    assert!(e.message.contains("no default layout"), "{e}");
}

#[test]
fn streams_and_skips() {
    let b = fixture_bytes();
    let mut r = BinaryReader::from_reader("f", &b[..]);
    let mut k = r.next_kernel().unwrap().unwrap();
    assert_eq!(k.info().name, "stream_copy");
    assert!(k.next_cta().unwrap().is_some());
    drop(k);
    let mut k = r.next_kernel().unwrap().unwrap();
    assert_eq!(k.info().name, "phase 2");
    let ctas: Vec<_> = std::iter::from_fn(|| k.next_cta().unwrap()).collect();
    assert_eq!(ctas.len(), 3);
    assert_eq!(ctas[1].warps[0].steps.len(), 2);
    assert_eq!(ctas[2].warps[0].name, "b");
    drop(k);
    assert!(r.next_kernel().unwrap().is_none());
    assert_eq!(r.offset(), b.len() as u64);
}
