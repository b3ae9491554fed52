//! The Accel-Sim importer never panics, and what it accepts is well formed, whatever the input.

use gpusim_isa::accelsim::{parse_traceg_str, parse_traceg_str_with_diagnostics};
use gpusim_isa::diag;
use proptest::prelude::*;

const EXAMPLE: &str = include_str!("../../examples/accelsim/kernel-2.traceg");

/// Tokens that tend to break parsers.
const NASTY: &[&str] = &[
    "0",
    "-1",
    "1",
    "2",
    "3",
    "4",
    "5",
    "ffffffff",
    "0x",
    "0xffffffffffffffff",
    "99999999999999999999999",
    "R255",
    "R254",
    "P7",
    "=",
    "#END_TB",
    "#BEGIN_TB",
    "warp = 9",
    "warp = 1",
    "insts = 100000000000",
    "insts = 0",
    "thread block = 4294967295,0,0",
    "thread block = 1,0,0",
    "-grid dim = (4294967295,4294967295,4294967295)",
    "-block dim = (4294967295,4294967295,4294967295)",
    "-accelsim tracer version = 3",
    "-enable lineinfo = 0",
    "\n",
    "\r\n",
    "é",
    "\u{0}",
    "HMMA.16816.F32",
    "LDG.E.128",
    "LDSM.16.M88.4",
    "HGMMA.64x256x16.F32",
];

fn check(text: &str) {
    if let Ok(k) = parse_traceg_str("fuzz", text) {
        k.check().unwrap();
        for p in &k.programs {
            p.check().unwrap();
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn arbitrary_text_never_panics(s in "\\PC{0,400}") {
        check(&s);
        check(&format!("-accelsim tracer version = 5\n-grid dim = (1,1,1)\n-block dim = (32,1,1)\n#\n{s}"));
    }

    #[test]
    fn edited_example_never_panics(
        edits in prop::collection::vec((any::<prop::sample::Index>(), 0usize..3, prop::sample::select(NASTY)), 1..6),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut toks: Vec<String> = EXAMPLE.split(' ').map(str::to_string).collect();
        for (at, how, nasty) in edits {
            let i = at.index(toks.len());
            match how {
                0 => toks[i] = nasty.to_string(),
                1 => toks.insert(i, nasty.to_string()),
                _ => { toks.remove(i); }
            }
        }
        let text = toks.join(" ");
        check(&text);
        let mut end = cut.index(text.len() + 1);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        check(&text[..end]);
    }
}

#[test]
fn every_prefix_of_the_example_is_handled() {
    let mut ok = 0;
    for (i, _) in EXAMPLE.match_indices('\n') {
        if parse_traceg_str("prefix", &EXAMPLE[..=i]).is_ok() {
            ok += 1;
        }
    }
    // Only the whole file (and the whole file less its trailing blank lines) parses.
    assert!((1..=2).contains(&ok), "{ok}");
}

#[test]
fn ignored_lines_are_capped() {
    let body: String = (0..250).map(|i| format!("# note {i}\n")).collect();
    let text = format!(
        "-accelsim tracer version = 5\n-grid dim = (1,1,1)\n-block dim = (32,1,1)\n#\n{body}\
         #BEGIN_TB\nthread block = 0,0,0\nwarp = 0\ninsts = 1\n0000 ffffffff 0 EXIT 0 0 0\n#END_TB\n"
    );
    let (_, d) = parse_traceg_str_with_diagnostics("cap", &text).unwrap();
    assert_eq!(d.len(), 101);
    assert!(d.iter().all(|d| d.code == diag::IGNORED_LINE));
    assert!(d[100].message.contains("150 more"), "{}", d[100]);
}
