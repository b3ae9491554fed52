//! The native readers never panic on damaged input, and whatever they accept is well formed and
//! round-trips (a stand-in for the cargo-fuzz targets in fuzz/, which CI does not run).

mod common;

use gpusim_isa::{TraceSource, binary, text};
use proptest::prelude::*;

const FIXTURE: &str = include_str!("fixtures/stream_copy_small.trace");

/// Tokens that stress the text grammar.
const NASTY: &[&str] = &[
    "end",
    "loop",
    "program",
    "warps",
    "cta",
    "kernel",
    "\"",
    "#",
    "[",
    "]",
    "0..",
    "..",
    "%",
    "%9",
    "@",
    "<-",
    "=",
    "addr=",
    "lanes=[]",
    "0x",
    "-",
    "4294967296",
    "99999999999999999999",
    "i3",
    "RZx9",
    "R254x2",
    "\\u{",
    "\n",
    " ",
    "loop 5\n",
    "end\n",
    "cta 0 0 0\n",
    "warps 0..7 copy\n",
    "gpusim-trace 2\n",
    "after 0\n",
    "grid 0 0 0\n",
];

fn consume(src: &mut dyn TraceSource) {
    let mut n = 0;
    while let Ok(Some(mut k)) = src.next_kernel() {
        let all = n % 2 == 0;
        while let Ok(Some(c)) = k.next_cta() {
            assert_eq!(c.warps.len() as u32, k.info().warps_per_cta());
            if !all {
                break;
            }
        }
        n += 1;
    }
}

fn mutate(mut b: Vec<u8>, edits: &[(u8, u32, u32)]) -> Vec<u8> {
    for &(kind, pos, val) in edits {
        let at = if b.is_empty() { 0 } else { pos as usize % (b.len() + 1) };
        match kind % 5 {
            0 => {
                if at < b.len() {
                    b[at] = val as u8;
                }
            }
            1 => b.insert(at, val as u8),
            2 => {
                if at < b.len() {
                    b.remove(at);
                }
            }
            3 => b.truncate(at),
            _ => {
                let tok = NASTY[val as usize % NASTY.len()].as_bytes();
                b.splice(at..at, tok.iter().copied());
            }
        }
    }
    b
}

fn edits() -> impl Strategy<Value = Vec<(u8, u32, u32)>> {
    prop::collection::vec((any::<u8>(), any::<u32>(), any::<u32>()), 1..6)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn damaged_text(e in edits()) {
        let data = mutate(FIXTURE.as_bytes().to_vec(), &e);
        consume(&mut text::TextReader::from_reader("m", &data[..]));
        if let Ok(s) = std::str::from_utf8(&data)
            && let Ok(t) = text::read_trace("m", s)
        {
            for k in &t.kernels {
                k.check().unwrap();
            }
            prop_assert_eq!(text::read_trace("again", &text::to_string(&t).unwrap()).unwrap(), t);
        }
    }

    #[test]
    fn damaged_binary(e in edits(), tape in prop::collection::vec(any::<u32>(), 0..400)) {
        let t = if tape.is_empty() {
            text::read_trace("f", FIXTURE).unwrap()
        } else {
            common::trace(&mut common::Tape::new(&tape))
        };
        let data = mutate(binary::to_bytes(&t).unwrap(), &e);
        consume(&mut binary::BinaryReader::from_reader("m", &data[..]));
        if let Ok(t) = binary::read_trace("m", &data) {
            for k in &t.kernels {
                k.check().unwrap();
            }
            prop_assert_eq!(binary::read_trace("again", &binary::to_bytes(&t).unwrap()).unwrap(), t);
        }
    }
}

/// Found by fuzzing the text reader: loops whose bodies hold no instruction (here three nested
/// loops of 2^32 − 1 trips around a commented-out FFMA) execute nothing, but a cursor used to
/// walk each of their 2^96 iterations, and the reader's checks and `gpusim run` hung. Every
/// reader now drops them, in text and in binary form, and a warp's walk ends at once.
#[test]
fn empty_loops_are_dropped_and_do_not_hang() {
    let src = "gpusim-trace 1\nkernel k\n  grid 2 1 1\n  block 32 1 1\n  program p\n    loop 4294967295\n      \
               loop 4294967295\n        loop 4294967295\n       #  FFMA R1 <- R2 R3 R1\n        end\n  end\n    \
               end\n    loop 3\n      FFMA R1 <- R2 R3 R1\n      loop 7\n      end\n    end\n    EXIT\n  end\n  \
               warps 0 p\nend\n";
    let t = text::read_trace("empty-loops.trace", src).unwrap();
    let p = &t.kernels[0].cta(0).warps[0];
    // The loop of 3 FFMAs stays (its empty inner loop goes), then EXIT.
    assert_eq!(p.dynamic_len_for([0, 0, 0], 0), 4);
    let mut cur = gpusim_isa::Cursor::new(p, [0, 0, 0], 0);
    let mut walked = 0;
    while cur.peek(p).is_some() {
        cur.advance();
        walked += 1;
    }
    assert_eq!(walked, 4);
    // The binary form reads back equal.
    let again = binary::read_trace("again.gtb", &binary::to_bytes(&t).unwrap()).unwrap();
    assert_eq!(again, t);
}
