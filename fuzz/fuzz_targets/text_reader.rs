//! Arbitrary bytes through the streaming text reader: every kernel and CTA is consumed, and
//! partially read kernels are skipped. It must never panic; what it accepts must be well formed
//! and must write back to text that reads back equal.
#![no_main]

use gpusim_isa::{TraceSource, text};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Streaming: consume all CTAs of even kernels, only the first CTA of odd ones.
    let mut r = text::TextReader::from_reader("fuzz.trace", data);
    let mut n = 0u32;
    loop {
        match r.next_kernel() {
            Ok(Some(mut k)) => {
                let all = n % 2 == 0;
                let mut ctas = 0u64;
                while let Ok(Some(c)) = k.next_cta() {
                    assert_eq!(c.warps.len() as u32, k.info().warps_per_cta());
                    ctas += 1;
                    if !all || ctas > 100_000 {
                        break;
                    }
                }
                n += 1;
            }
            Ok(None) | Err(_) => break,
        }
    }
    // Collecting: what is accepted is well formed and round-trips.
    let Ok(s) = std::str::from_utf8(data) else { return };
    if let Ok(t) = text::read_trace("fuzz.trace", s) {
        for k in &t.kernels {
            k.check().expect("accepted kernels are well formed");
            // Per-CTA parameters evaluate without panicking, and a cursor issues what
            // `dynamic_len_for` counts (bounded walks).
            for c in 0..k.info.num_ctas().min(4) {
                let cta = k.cta(c);
                for (w, p) in cta.warps.iter().enumerate().take(4) {
                    let n = p.dynamic_len_for(cta.coord.as_array(), w as u32);
                    let mut cur = gpusim_isa::Cursor::new(p, cta.coord.as_array(), w as u32);
                    let mut walked = 0u64;
                    while walked <= 10_000 && cur.peek(p).is_some() {
                        cur.advance();
                        walked += 1;
                    }
                    assert!(walked == n || (walked > 10_000 && n > 10_000));
                }
            }
        }
        let again = text::to_string(&t).expect("accepted traces can be written");
        assert_eq!(text::read_trace("again", &again).expect("written traces read back"), t);
    }
});
