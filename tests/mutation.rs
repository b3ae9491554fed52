//! A mutation campaign in the test suite (issue 15): the seed corpus (fuzz/seeds: examples, bad inputs, GEMM and ubench traces) and the presets,
//! mutated at random with a fixed seed, go through every entry point a user's file reaches —
//! the text, binary and Accel-Sim trace readers, and chip loading with validation followed by a
//! short simulation. None may panic; a chip that loads must simulate (or fail with an error).
//!
//! CI runs a few hundred mutations per entry point. `GPUSIM_MUTATIONS=10000 cargo test --release
//! --test mutation` is the long campaign of docs/testing.md; cargo-fuzz (fuzz/) runs the readers
//! and the chip loader coverage-guided.

use std::path::Path;

use gpusim_isa::{TraceSource, binary, text};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Mutations per entry point: `GPUSIM_MUTATIONS`, else 300.
fn cases() -> u32 {
    std::env::var("GPUSIM_MUTATIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(300)
}

/// A runner with a fixed seed: every run mutates the same way.
fn runner(salt: u8) -> TestRunner {
    runner_of(salt, cases())
}

/// [`runner`] for `cases` mutations.
fn runner_of(salt: u8, cases: u32) -> TestRunner {
    let config = Config { cases, failure_persistence: None, ..Config::default() };
    TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &[salt; 32]))
}

/// Values that sit at or past the edges of what parameters and trace fields accept.
const EXTREMES: &[&str] = &[
    "0",
    "1",
    "-1",
    "4294967295",
    "4294967296",
    "18446744073709551615",
    "99999999999999999999999",
    "1e308",
    "nan",
    "\"16777216 TiB\"",
    "\"1 Hz\"",
    "\"0 B\"",
    "\"-5 GiB\"",
    "\"\"",
];

#[derive(Clone, Debug)]
enum Mutation {
    FlipByte { at: usize, bit: u8 },
    Delete { at: usize, len: usize },
    Insert { at: usize, bytes: Vec<u8> },
    DuplicateLine { line: usize },
    DropLine { line: usize },
    Extreme { number: usize, value: usize },
    Truncate { at: usize },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        1 => (any::<usize>(), 0u8..8).prop_map(|(at, bit)| Mutation::FlipByte { at, bit }),
        1 => (any::<usize>(), 1usize..64).prop_map(|(at, len)| Mutation::Delete { at, len }),
        1 => (any::<usize>(), proptest::collection::vec(any::<u8>(), 1..16)).prop_map(|(at, bytes)| Mutation::Insert { at, bytes }),
        1 => any::<usize>().prop_map(|line| Mutation::DuplicateLine { line }),
        1 => any::<usize>().prop_map(|line| Mutation::DropLine { line }),
        3 => (any::<usize>(), 0..EXTREMES.len()).prop_map(|(number, value)| Mutation::Extreme { number, value }),
        1 => any::<usize>().prop_map(|at| Mutation::Truncate { at }),
    ]
}

fn apply(input: &[u8], muts: &[Mutation]) -> Vec<u8> {
    let mut b = input.to_vec();
    for m in muts {
        let n = b.len().max(1);
        match m {
            Mutation::FlipByte { at, bit } => {
                if !b.is_empty() {
                    b[at % n] ^= 1 << bit;
                }
            }
            Mutation::Delete { at, len } => {
                let at = at % n;
                let end = (at + len).min(b.len());
                if at < end {
                    b.drain(at..end);
                }
            }
            Mutation::Insert { at, bytes } => {
                let at = at % (b.len() + 1);
                b.splice(at..at, bytes.iter().copied());
            }
            Mutation::DuplicateLine { line } | Mutation::DropLine { line } => {
                let mut lines: Vec<Vec<u8>> = b.split(|&c| c == b'\n').map(<[u8]>::to_vec).collect();
                let i = line % lines.len();
                if matches!(m, Mutation::DuplicateLine { .. }) {
                    let l = lines[i].clone();
                    lines.insert(i, l);
                } else {
                    lines.remove(i);
                }
                b = lines.join(&b'\n');
            }
            Mutation::Extreme { number, value } => {
                // Replace the number-th run of digits (or quoted value) with an extreme value.
                let runs: Vec<(usize, usize)> = digit_runs(&b);
                if !runs.is_empty() {
                    let (s, e) = runs[number % runs.len()];
                    b.splice(s..e, EXTREMES[*value].bytes());
                }
            }
            Mutation::Truncate { at } => b.truncate(at % n),
        }
    }
    b
}

/// Byte ranges of digit runs and of quoted strings.
fn digit_runs(b: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_digit() {
            let s = i;
            while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
                i += 1;
            }
            out.push((s, i));
        } else if b[i] == b'"' {
            let s = i;
            i += 1;
            while i < b.len() && b[i] != b'"' && b[i] != b'\n' {
                i += 1;
            }
            if i < b.len() && b[i] == b'"' {
                i += 1;
                out.push((s, i));
            }
        } else {
            i += 1;
        }
    }
    out
}

/// Pulls every kernel and up to `cap` CTAs of each; errors are fine, panics are not.
fn drain(src: &mut dyn TraceSource, cap: u64) {
    while let Ok(Some(mut k)) = src.next_kernel() {
        let mut n = 0;
        while let Ok(Some(c)) = k.next_cta() {
            assert_eq!(c.warps.len() as u32, k.info().warps_per_cta());
            n += 1;
            if n >= cap {
                break;
            }
        }
    }
}

fn seeds(ext: &str) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    // The committed seed corpus of the fuzz targets: the examples, the bad inputs, GEMM and
    // microbenchmark traces.
    for dir in ["fuzz/seeds/text_reader"] {
        for e in std::fs::read_dir(root().join(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == ext) {
                out.push(std::fs::read(&p).unwrap());
            }
        }
    }
    assert!(!out.is_empty(), "no .{ext} seeds");
    out
}

/// Every chip file: the presets, the example chips and the bad inputs.
fn chip_seeds() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for dir in ["configs/presets", "configs/arch", "tests/bad-inputs"] {
        for e in std::fs::read_dir(root().join(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "toml") && p.file_name().is_some_and(|n| n != "cases.toml") {
                out.push(std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// The text seeds that read, in binary form.
fn binary_seeds() -> Vec<Vec<u8>> {
    let bins: Vec<Vec<u8>> = seeds("trace")
        .iter()
        .filter_map(|t| text::read_trace("seed", std::str::from_utf8(t).ok()?).ok())
        .map(|t| binary::to_bytes(&t).unwrap())
        .collect();
    assert!(bins.len() >= 3);
    bins
}

/// The Accel-Sim example's kernel files.
fn accelsim_seeds() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(root().join("examples/accelsim")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "traceg") {
            out.push(std::fs::read(&p).unwrap());
        }
    }
    assert!(!out.is_empty());
    out
}

fn campaign(salt: u8, seeds: &[Vec<u8>], check: impl FnMut(&[u8])) {
    let strategy = (0..seeds.len(), proptest::collection::vec(mutation(), 1..6));
    let check = std::cell::RefCell::new(check);
    runner(salt)
        .run(&strategy, |(i, muts)| {
            (check.borrow_mut())(&apply(&seeds[i], &muts));
            Ok(())
        })
        .unwrap();
}

#[test]
fn mutated_text_traces_never_panic_the_reader() {
    campaign(1, &seeds("trace"), |b| {
        let mut r = text::TextReader::from_reader("mutated.trace", b);
        drain(&mut r, 10_000);
    });
}

#[test]
fn mutated_binary_traces_never_panic_the_reader() {
    let bins = binary_seeds();
    campaign(2, &bins, |b| {
        let mut r = binary::BinaryReader::from_reader("mutated.gtb", b);
        drain(&mut r, 10_000);
    });
}

#[test]
fn mutated_accelsim_traces_never_panic_the_importer() {
    let seeds = accelsim_seeds();
    campaign(3, &seeds, |b| {
        if let Ok(t) = std::str::from_utf8(b)
            && let Ok(k) = gpusim_isa::accelsim::parse_traceg_str("mutated.traceg", t)
        {
            k.check().expect("accepted kernels are well formed");
        }
    });
}

/// One CTA touching every part of the model: FMAs, a global load and store, shared memory, a
/// barrier.
const PROBE: &str = include_str!("../fuzz/probe.trace");

#[test]
fn mutated_chips_either_fail_to_load_or_simulate() {
    let seeds = chip_seeds();
    let probe = text::read_trace("probe", PROBE).unwrap();
    let (mut loaded, mut ran) = (0u32, 0u32);
    campaign(4, &seeds, |b| {
        let Ok(t) = std::str::from_utf8(b) else { return };
        // Files that inherit by relative path resolve from the presets' folder.
        let Ok(arch) = gpusim_configs::load_str("mutated.toml", t) else { return };
        loaded += 1;
        // What `gpusim run` refuses up front (--max-memory's default) is not simulated.
        if gpusim_sim_core::footprint(&arch).total() > 4 << 30 {
            return;
        }
        let mut src = gpusim_isa::MemTraceSource::new(probe.clone());
        if gpusim_sim_core::simulate(&arch, &mut src, &gpusim_sim_core::SimOptions::default()).is_ok() {
            ran += 1;
        }
    });
    eprintln!("{loaded} mutated chips loaded, {ran} simulated");
    // The campaign must reach the simulator, not only the parser.
    assert!(ran > cases() / 20, "{loaded} chips loaded, {ran} simulated");
}

/// How one run of the `gpusim` binary ended.
struct Ended {
    /// The exit code, or `None` when a signal ended it (an abort, or our SIGKILL).
    code: Option<i32>,
    /// Peak resident memory, bytes.
    max_rss: u64,
    /// It had to be interrupted (SIGINT at `limit`).
    interrupted: bool,
}

/// Runs `gpusim args…` (stdout and stderr discarded) and waits for it; past `limit` it gets a
/// SIGINT (a long but legitimate simulation, say a mutated loop count of 2^32: gpusim must then
/// stop at a safe point and exit 130), and a SIGKILL 10 s later if it has not ended by then.
fn run_binary(args: &[&std::ffi::OsStr], limit: std::time::Duration) -> Ended {
    use std::process::{Command, Stdio};
    // Reaped below by wait4 (for its rusage), which std's Child does not offer.
    #[allow(clippy::zombie_processes)]
    let child = Command::new(env!("CARGO_BIN_EXE_gpusim"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("gpusim starts");
    let pid = child.id() as libc::pid_t;
    let t0 = std::time::Instant::now();
    let mut interrupted = false;
    loop {
        let mut status = 0;
        // SAFETY: `rusage` is plain data; wait4 on our own child.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if r == pid {
            let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
            return Ended { code, max_rss: usage.ru_maxrss as u64 * 1024, interrupted };
        }
        assert_eq!(r, 0, "wait4 failed");
        let waited = t0.elapsed();
        if !interrupted && waited > limit {
            interrupted = true;
            unsafe { libc::kill(pid, libc::SIGINT) };
        } else if waited > limit + std::time::Duration::from_secs(10) {
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// The campaign against the `gpusim` binary itself (issue 15): mutated chips (`gpusim run --arch
/// mutated.toml probe`) and mutated traces in text, binary and Accel-Sim form (`gpusim run --arch
/// h100-sxm5-80gb mutated`), each a process of its own, so that an abort or a runaway allocation
/// is seen as the process dying or growing. Each must exit 0 (it ran) or 2 (bad input), or 130
/// when it simulated so long it had to be interrupted; none may panic (101), die of a signal or
/// pass 4 GiB of RSS. CI runs a few per kind on the debug binary; the long campaign of
/// docs/testing.md is `GPUSIM_BINARY_MUTATIONS=10000 cargo test --release --test mutation
/// process -- --nocapture` (each count is per input kind: chips, then traces split over the three
/// readers).
#[test]
fn mutated_inputs_never_crash_the_gpusim_process() {
    let n: u32 = std::env::var("GPUSIM_BINARY_MUTATIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(12);
    let dir = std::env::temp_dir().join(format!("gpusim-binary-mutation-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let probe = root().join("fuzz/probe.trace");
    let limit = std::time::Duration::from_secs(20);
    #[derive(Default, Debug)]
    struct Tally {
        ran: u32,
        rejected: u32,
        interrupted: u32,
        max_rss: u64,
        failures: Vec<String>,
    }
    let mut tally = Tally::default();
    let mut judge = |what: &str, input: &[u8], e: Ended| {
        tally.max_rss = tally.max_rss.max(e.max_rss);
        let ok = match e.code {
            Some(0) => {
                tally.ran += 1;
                true
            }
            Some(2) => {
                tally.rejected += 1;
                true
            }
            Some(130) if e.interrupted => {
                tally.interrupted += 1;
                true
            }
            _ => false,
        };
        if !ok || e.max_rss > 4 << 30 {
            let keep = dir.join(format!("failure-{}", tally.failures.len()));
            std::fs::write(&keep, input).unwrap();
            tally.failures.push(format!(
                "{what}: exit {:?}, {} MiB RSS, input kept in {}",
                e.code,
                e.max_rss >> 20,
                keep.display()
            ));
        }
    };

    // Chips.
    let chips = chip_seeds();
    let file = dir.join("mutated.toml");
    let strategy = (0..chips.len(), proptest::collection::vec(mutation(), 1..6));
    let judge = std::cell::RefCell::new(&mut judge);
    runner_of(5, n)
        .run(&strategy, |(i, muts)| {
            let b = apply(&chips[i], &muts);
            std::fs::write(&file, &b).unwrap();
            let e = run_binary(
                &["run".as_ref(), "-q".as_ref(), "--arch".as_ref(), file.as_os_str(), probe.as_os_str()],
                limit,
            );
            (judge.borrow_mut())("chip", &b, e);
            Ok(())
        })
        .unwrap();

    // Traces: text, binary and Accel-Sim seeds, each mutated in its own form.
    let mut traces: Vec<(&str, Vec<u8>)> = seeds("trace").into_iter().map(|t| ("trace", t)).collect();
    traces.extend(binary_seeds().into_iter().map(|b| ("gtb", b)));
    traces.extend(accelsim_seeds().into_iter().map(|t| ("traceg", t)));
    let strategy = (0..traces.len(), proptest::collection::vec(mutation(), 1..6));
    runner_of(6, n)
        .run(&strategy, |(i, muts)| {
            let (ext, seed) = &traces[i];
            let b = apply(seed, &muts);
            let file = dir.join(format!("mutated.{ext}"));
            std::fs::write(&file, &b).unwrap();
            let e = run_binary(
                &["run".as_ref(), "-q".as_ref(), "--arch".as_ref(), "h100-sxm5-80gb".as_ref(), file.as_os_str()],
                limit,
            );
            (judge.borrow_mut())(ext, &b, e);
            Ok(())
        })
        .unwrap();

    eprintln!(
        "{} chips and {} traces: {} ran, {} rejected (exit 2), {} interrupted after {} s (exit 130), \
         peak RSS {} MiB, {} failures",
        n,
        n,
        tally.ran,
        tally.rejected,
        tally.interrupted,
        limit.as_secs(),
        tally.max_rss >> 20,
        tally.failures.len()
    );
    assert!(tally.failures.is_empty(), "{:#?}", tally.failures);
    std::fs::remove_dir_all(&dir).ok();
}
