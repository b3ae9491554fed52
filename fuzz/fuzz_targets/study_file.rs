//! Arbitrary text as a `gpusim sweep` study file: parsing, the design's expansion, every point's
//! chip and every generated workload are checked as `gpusim sweep --dry-run` does. Whatever the
//! text, that ends in a result or an error, never a panic, a hang or an abort (libFuzzer's
//! -timeout and -rss_limit_mb watch the last two). Trace-file workloads are refused unread: a
//! mutated study must not make the fuzzer read arbitrary files.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(t) = std::str::from_utf8(data) else { return };
    let _ = gpusim::check_study("fuzz.toml", t, false);
});
