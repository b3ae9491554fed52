//! Nsight Compute CSV import (`gpusim_validation::nsight`) and kernel cases simulated from
//! traces (`gpusim_validation::kernel_cases`).

use std::path::{Path, PathBuf};

use gpusim_validation::kernel_cases::{
    self, EXTRA_TRACE, EXTRA_TRACE_KERNEL, KernelMetric, KernelSelect, NameMatch, attach_traces, plan_kernel_case,
    run_kernel_job,
};
use gpusim_validation::nsight::{ClockSource, NcuError, NcuKernel, NcuLayout, load_ncu_csv, parse_ncu_csv, to_cases};
use gpusim_validation::reference::{Case, Kind, Metric, Trust};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ncu").join(name)
}

fn load(name: &str) -> Vec<NcuKernel> {
    load_ncu_csv(&fixture(name)).unwrap_or_else(|e| panic!("{e}"))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

fn close_opt(a: Option<f64>, b: Option<f64>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => close(a, b),
        (None, None) => true,
        _ => false,
    }
}

const CUTLASS: &str = "void cutlass::Kernel2<cutlass_80_tensorop_s16816gemm_bf16_128x256_32x3_nn_align8>(Params)";
const AMPERE: &str = "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_nn";

#[test]
fn both_layouts_with_and_without_units_give_the_same_kernels() {
    let reference = load("raw_units.csv");
    assert_eq!(reference.len(), 3);
    let k = &reference[0];
    assert_eq!((k.id, k.name.as_str()), (0, CUTLASS));
    assert_eq!((k.grid, k.block), (Some([32, 16, 1]), Some([256, 1, 1])));
    assert_eq!(k.device_name.as_deref(), Some("NVIDIA H100 80GB HBM3"));
    assert_eq!((k.device.as_deref(), k.cc.as_deref()), (Some("0"), Some("9.0")));
    assert_eq!((k.process_name.as_deref(), k.stream.as_deref()), (Some("python3.10"), Some("7")));
    assert_eq!(k.duration_us, 1234.5);
    assert_eq!(k.sm_cycles, Some(2_166_548.0));
    assert_eq!(k.sm_clock_mhz, Some(1755.0));
    assert_eq!(k.sm_clock_from, Some(ClockSource::Metric("smsp__cycles_elapsed.avg.per_second".into())));
    assert_eq!(k.dram_clock_mhz, Some(2620.0));
    assert_eq!(k.layout, NcuLayout::Raw { units_row: true });
    assert_eq!(k.line, 8, "the record after the ==PROF== lines, the header and the units row");
    assert_eq!(reference[1].name, AMPERE);
    assert_eq!(reference[1].grid, Some([64, 8, 3]));
    assert_eq!(reference[1].duration_us, 87.36);
    assert!(reference[2].name.contains("FillFunctor<c10::BFloat16>, at::detail::Array<char *, 1>>(int, T2, T3)"));

    for (file, layout) in [
        ("raw_nounits.csv", NcuLayout::Raw { units_row: false }),
        ("details.csv", NcuLayout::Details),
        ("details_rules.csv", NcuLayout::Details),
    ] {
        let other = load(file);
        assert_eq!(other.len(), reference.len(), "{file}");
        for (a, b) in reference.iter().zip(&other) {
            assert_eq!((a.id, &a.name, a.grid, a.block), (b.id, &b.name, b.grid, b.block), "{file}");
            assert_eq!((&a.device_name, &a.cc, &a.device), (&b.device_name, &b.cc, &b.device), "{file}");
            assert!(close(a.duration_us, b.duration_us), "{file} ID {}: {} vs {}", a.id, a.duration_us, b.duration_us);
            assert!(close_opt(a.sm_cycles, b.sm_cycles), "{file} ID {}", a.id);
            assert!(close_opt(a.sm_clock_mhz, b.sm_clock_mhz), "{file} ID {}: {:?}", a.id, b.sm_clock_mhz);
            assert!(close_opt(a.dram_clock_mhz, b.dram_clock_mhz), "{file} ID {}", a.id);
            assert_eq!(b.layout, layout, "{file}");
        }
    }
    // The details page keeps every metric, rule rows aside.
    let d = load("details_rules.csv");
    assert_eq!(d[0].metrics["Registers Per Thread"].value, "230");
    assert_eq!(d[0].metrics["Registers Per Thread"].unit.as_deref(), Some("register/thread"));
    assert_eq!(d[0].duration_metric, "Duration");
    assert_eq!(d[0].sm_clock_from, Some(ClockSource::Metric("SM Frequency".into())));
    assert_eq!(d[0].line, 4);
    assert!(!d[0].metrics.contains_key(""));
}

#[test]
fn byte_order_mark_crlf_and_indentation_are_tolerated() {
    let reference = load("raw_units.csv");
    let text = std::fs::read_to_string(fixture("raw_units.csv")).unwrap();
    for variant in [
        format!("\u{feff}{text}"),
        text.replace('\n', "\r\n"),
        text.replace("\"ID\",\"Process ID\"", "  \"ID\",\"Process ID\""),
        format!("{text}\n==PROF== Report: /tmp/run.ncu-rep\n\n"),
    ] {
        let k = parse_ncu_csv(Path::new("v.csv"), &variant).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(k, reference, "{variant:?}");
    }
    let crlf_bad = text.replace('\n', "\r\n").replacen("\"87.36\"", "\"fast\"", 1);
    let e = parse_ncu_csv(Path::new("v.csv"), &crlf_bad).unwrap_err();
    assert_eq!((e.line(), e.field()), (9, Some("gpu__time_duration.sum")), "{e}");
}

/// The details layout with one kernel whose Duration and SM Frequency are in the given units.
fn details_with(duration: (&str, &str), clock: (&str, &str)) -> String {
    let p = format!(
        r#""0","1","app","h","{AMPERE}","1","7","(128, 1, 1)","(64, 8, 3)","0","9.0","GPU Speed Of Light Throughput""#
    );
    format!(
        "\"ID\",\"Process ID\",\"Process Name\",\"Host Name\",\"Kernel Name\",\"Context\",\"Stream\",\"Block Size\",\"Grid Size\",\"Device\",\"CC\",\"Section Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n\
         {p},\"Duration\",\"{}\",\"{}\"\n{p},\"SM Frequency\",\"{}\",\"{}\"\n",
        duration.0, duration.1, clock.0, clock.1
    )
}

#[test]
fn units_convert() {
    let one = |d: (&str, &str), c: (&str, &str)| {
        let k = parse_ncu_csv(Path::new("u.csv"), &details_with(d, c)).unwrap_or_else(|e| panic!("{e}"));
        (k[0].duration_us, k[0].sm_clock_mhz.unwrap())
    };
    for (d, us) in [
        (("nsecond", "1,500"), 1.5),
        (("usecond", "1.5"), 1.5),
        (("msecond", "1.5"), 1500.0),
        (("second", "1.5e-06"), 1.5),
        (("ns", "1500"), 1.5),
        (("us", "1.5"), 1.5),
        (("ms", "0.0015"), 1.5),
    ] {
        assert!(close(one(d, ("Mhz", "1,980")).0, us), "{d:?}");
    }
    for (c, mhz) in [
        (("Mhz", "1,980"), 1980.0),
        (("Ghz", "1.98"), 1980.0),
        (("cycle/nsecond", "1.98"), 1980.0),
        (("cycle/usecond", "1,980"), 1980.0),
        (("hz", "1,980,000,000"), 1980.0),
        (("cycle/second", "1.98e9"), 1980.0),
    ] {
        assert!(close(one(("us", "1"), c).1, mhz), "{c:?}");
    }
}

#[test]
fn locale_numbers_and_derived_clock() {
    let text = "\"ID\",\"Kernel Name\",\"gpu__time_duration.sum\",\"sm__cycles_elapsed.avg\"\n\
                \"\",\"\",\"msecond\",\"cycle\"\n\
                \"0\",\"k\",\"1,234.5\",\"2,469,000,000\"\n";
    let k = &parse_ncu_csv(Path::new("l.csv"), text).unwrap()[0];
    assert_eq!(k.duration_us, 1_234_500.0);
    assert_eq!(k.sm_cycles, Some(2_469_000_000.0));
    assert_eq!(k.sm_clock_mhz, Some(2000.0));
    assert_eq!(k.sm_clock_from, Some(ClockSource::Derived));
    assert_eq!((k.grid, k.block, k.device_name.as_ref()), (None, None, None));
    // A decimal comma is refused, not read as thousands.
    let e = parse_ncu_csv(Path::new("l.csv"), &text.replace("1,234.5", "1234,5")).unwrap_err();
    assert!(
        e.to_string().starts_with("l.csv:3: `gpu__time_duration.sum`:") && e.to_string().contains("decimal comma"),
        "{e}"
    );
    // `n/a` is "not collected": an optional metric is absent, the duration falls back to the next metric.
    let na = "\"ID\",\"Kernel Name\",\"gpu__time_duration.sum\",\"gpu__time_duration.avg\",\"sm__cycles_elapsed.avg\"\n\
              \"0\",\"k\",\"n/a\",\"2,000\",\"n/a\"\n";
    let k = &parse_ncu_csv(Path::new("na.csv"), na).unwrap()[0];
    assert_eq!(
        (k.duration_us, k.duration_metric.as_str(), k.sm_cycles, k.sm_clock_mhz),
        (2.0, "gpu__time_duration.avg", None, None)
    );
}

/// Asserts `text` fails with an error at `file:line` naming `field`.
fn fails(text: &str, line: usize, field: &str) -> String {
    let e = parse_ncu_csv(Path::new("bad.csv"), text).map(|k| format!("{k:?}")).unwrap_err();
    let msg = e.to_string();
    assert_eq!((e.line(), e.field()), (line, Some(field)), "{msg}");
    assert!(msg.starts_with(&format!("bad.csv:{line}: `{field}`: ")), "{msg}");
    msg
}

#[test]
fn malformed_input_names_file_line_and_field() {
    let raw = std::fs::read_to_string(fixture("raw_units.csv")).unwrap();
    let details = std::fs::read_to_string(fixture("details.csv")).unwrap();

    // Wrong number of fields.
    let m = fails(&raw.replacen("\"1.755\"\n", "\"1.755\",\"extra\"\n", 1), 8, "field 17");
    assert!(m.contains("17 fields") && m.contains("line 6"), "{m}");
    fails(&raw.replacen(",\"1.755\"\n", "\n", 1), 8, "smsp__cycles_elapsed.avg.per_second");
    let cut = details.lines().nth(5).unwrap();
    let short = cut.rsplit_once(',').unwrap().0;
    fails(&details.replacen(cut, short, 1), 6, "Metric Value");

    // Missing required columns or values.
    fails(&raw.replacen("\"Kernel Name\"", "\"Kernel\"", 1), 6, "Kernel Name");
    fails("\"Process ID\",\"Kernel Name\"\n\"1\",\"k\"\n", 1, "ID");
    fails("", 1, "ID");
    let m = fails(&raw.replace("gpu__time_duration.sum", "gpu__time_active.sum"), 6, "gpu__time_duration.sum");
    assert!(m.contains("no duration column"), "{m}");
    let no_duration: String = details
        .lines()
        .filter(|l| !(l.starts_with("\"1\"") && l.contains("\"Duration\"")))
        .map(|l| format!("{l}\n"))
        .collect();
    let m = fails(&no_duration, 16, "Duration");
    assert!(m.contains("launch ID 1 has no duration"), "{m}");
    fails(&raw.replacen("\"1\",\"41234\"", "\"\",\"41234\"", 1), 9, "ID");
    fails(&raw.replacen(&format!("\"{AMPERE}\""), "\"\"", 1), 9, "Kernel Name");

    // Values that are not numbers, unknown units, impossible values.
    fails(&raw.replacen("\"1,234.50\"", "\"fast\"", 1), 8, "gpu__time_duration.sum");
    fails(&raw.replacen("\"0\",\"41234\"", "\"zero\",\"41234\"", 1), 8, "ID");
    fails(&raw.replacen("\"(32, 16, 1)\"", "\"(32; 16; 1)\"", 1), 8, "Grid Size");
    fails(&raw.replacen("\"(256, 1, 1)\"", "\"(0, 1, 1)\"", 1), 8, "Block Size");
    let m = fails(&raw.replacen("\"usecond\"", "\"fortnight\"", 1), 8, "gpu__time_duration.sum");
    assert!(m.contains("unknown time unit `fortnight`"), "{m}");
    let m = fails(&details.replacen("\"cycle/nsecond\",\"1.755\"", "\"rpm\",\"1.755\"", 1), 3, "SM Frequency");
    assert!(m.contains("unknown frequency unit"), "{m}");
    fails(&raw.replacen("\"1,234.50\"", "\"-1,234.50\"", 1), 8, "gpu__time_duration.sum");
    fails(&raw.replacen("\"1,234.50\"", "\"0\"", 1), 8, "gpu__time_duration.sum");
    fails(&details.replacen("\"2,166,548\"", "\"2,166,548 cycles\"", 1), 4, "Elapsed Cycles");

    // Contradictions between records.
    let m = fails(&raw.replacen("\"1\",\"41234\"", "\"0\",\"41234\"", 1), 9, "ID");
    assert!(m.contains("appears twice (first at line 8)"), "{m}");
    let renamed =
        details.lines().enumerate().map(|(i, l)| if i == 5 { l.replace(CUTLASS, "other") } else { l.to_string() });
    let m = fails(&renamed.map(|l| l + "\n").collect::<String>(), 6, "Kernel Name");
    assert!(m.contains("line 2"), "{m}");

    // A file that does not exist.
    let e = load_ncu_csv(Path::new("/nonexistent/run.csv")).unwrap_err();
    assert!(matches!(e, NcuError::Io { .. }) && e.to_string().contains("/nonexistent/run.csv"), "{e}");
}

#[test]
fn mangled_input_never_panics() {
    for name in ["raw_units.csv", "details_rules.csv"] {
        let text = std::fs::read_to_string(fixture(name)).unwrap();
        let bytes = text.as_bytes();
        for cut in (0..bytes.len()).step_by(13) {
            let _ = parse_ncu_csv(Path::new("t.csv"), &String::from_utf8_lossy(&bytes[..cut]));
            for b in [b'"', b',', b'\n', b'x', b'9', b'(', b'.'] {
                let mut v = bytes.to_vec();
                v[cut] = b;
                let _ = parse_ncu_csv(Path::new("t.csv"), &String::from_utf8_lossy(&v));
            }
        }
    }
}

#[test]
fn kernels_become_cases() {
    let path = fixture("raw_units.csv");
    let cases = to_cases(&path, &load("raw_units.csv"), None);
    assert_eq!(cases.len(), 3);
    let c = &cases[0];
    assert_eq!(c.id, "raw_units-0");
    assert_eq!(c.kind, Kind::Other("kernel".into()));
    assert_eq!((c.metric.clone(), c.value), (Metric::Us, 1234.5));
    assert_eq!((c.hardware.as_str(), c.clock_mhz, c.trust), ("NVIDIA H100 80GB HBM3", Some(1755.0), Trust::High));
    assert_eq!((c.source.as_str(), c.how_read.as_str()), ("raw_units.csv", "Nsight Compute CSV"));
    assert_eq!(c.locator, format!("ID 0, {CUTLASS}"));
    assert_eq!(c.location(), format!("{}:8", path.display()));
    assert_eq!(c.extra["kernel_name"].as_str(), Some(CUTLASS));
    assert_eq!(c.extra["grid"], toml::Value::Array(vec![32.into(), 16.into(), 1.into()]));
    assert_eq!(c.extra["block"], toml::Value::Array(vec![256.into(), 1.into(), 1.into()]));
    assert_eq!(c.extra["sm_cycles"].as_float(), Some(2_166_548.0));
    assert_eq!(c.extra["ncu_id"].as_integer(), Some(0));
    assert_eq!(cases[2].id, "raw_units-2");

    // Without a device name the case says so, unless the caller names the GPU.
    let accel = load("accelsim_example.csv");
    let unnamed = to_cases(Path::new("a.csv"), &accel, None);
    assert_eq!(unnamed[0].hardware, "GPU 0 (CC 8.0), name not exported");
    let named = to_cases(Path::new("a.csv"), &accel, Some("NVIDIA A100-SXM4-80GB"));
    assert_eq!(named[0].hardware, "NVIDIA A100-SXM4-80GB");
    assert_eq!(gpusim_configs::preset_for_hardware(&named[0].hardware), Some("a100-sxm4-80gb"));
}

fn one_case(file: &str, hardware: Option<&str>) -> Vec<Case> {
    to_cases(&fixture(file), &load(file), hardware)
}

#[test]
fn a_kernel_case_with_a_trace_simulates() {
    let mut case = one_case("ffma_bound.csv", None).remove(0);
    // Relative to the CSV's directory: the workspace's examples/ffma_bound.trace.
    case.extra.insert(EXTRA_TRACE.into(), "../../../../examples/ffma_bound.trace".into());
    let job = plan_kernel_case(&case).unwrap();
    assert!(job.trace.is_file(), "{}", job.trace.display());
    assert_eq!(job.select, KernelSelect::Name("ffma_bound(float *)".into()));
    assert_eq!((job.preset, job.clock_mhz, job.metric), (Some("h100-sxm5-80gb"), Some(1755.0), KernelMetric::Us));
    let arch = job.arch().unwrap();
    assert_eq!(arch.clocks.sm.0, 1_755_000_000);
    let run = run_kernel_job(&arch, &job).unwrap();
    assert!(run.value > 0.0 && run.value == run.time_us, "{run:?}");
    assert_eq!((run.kernel_index, run.kernel_name.as_str(), run.matched_by), (0, "ffma_bound", NameMatch::Signature));
    assert!(!run.detail.contains("differs"), "{}", run.detail);
    // The FP32 roofline of an H100 at 1755 MHz is ~18 µs; the simulation is in that range.
    assert!(run.value > 5.0 && run.value < 100.0, "{run:?}");

    // In cycles, the same simulation.
    let mut cycles = case.clone();
    cycles.metric = Metric::Cycles;
    let cyc = run_kernel_job(&arch, &plan_kernel_case(&cycles).unwrap()).unwrap();
    assert_eq!(cyc.value, run.cycles as f64);
}

#[test]
fn traces_attach_by_launch_order_and_name() {
    let mut cases = one_case("accelsim_example.csv", Some("NVIDIA A100-SXM4-80GB"));
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/accelsim");
    let a = attach_traces(&mut cases, &dir).unwrap();
    assert_eq!(a.trace_kernels, 2);
    // vecAdd and blockSum are in the trace; the fill kernel between them is not.
    assert_eq!(a.matched, [("accelsim_example-0".to_string(), 0), ("accelsim_example-2".to_string(), 1)]);
    assert_eq!(a.unmatched, ["accelsim_example-1"]);
    assert!(!cases[1].extra.contains_key(EXTRA_TRACE));
    // Its plan says why: no kernel of the trace matched (in launch order).
    let e = plan_kernel_case(&cases[1]).unwrap_err();
    assert!(e.contains("no kernel of the trace") && e.contains("fill_kernel") && e.contains("after kernel 0"), "{e}");
    let mut no_reason = cases[1].clone();
    no_reason.extra.remove(kernel_cases::EXTRA_TRACE_UNMATCHED);
    assert!(plan_kernel_case(&no_reason).unwrap_err().contains("no `trace`"));
    for (c, want) in [(&cases[0], "_Z6vecAddPKfS0_Pfi"), (&cases[2], "_Z8blockSumPKfPf")] {
        assert!(Path::new(c.extra[EXTRA_TRACE].as_str().unwrap()).is_absolute());
        let job = plan_kernel_case(c).unwrap();
        assert_eq!(job.preset, Some("a100-sxm4-80gb"));
        let run = run_kernel_job(&job.arch().unwrap(), &job).unwrap();
        assert_eq!((run.kernel_name.as_str(), run.matched_by), (want, NameMatch::ByIndex));
        assert!(run.value > 0.0, "{run:?}");
    }
    // Cases that already name a trace are left alone.
    let again = attach_traces(&mut cases, &dir).unwrap();
    assert!(again.matched.is_empty() && again.unmatched == ["accelsim_example-1"]);

    // Without `trace_kernel` the kernel is found by name (mangled in the trace) and grid.
    let mut by_name = cases[2].clone();
    by_name.extra.remove(EXTRA_TRACE_KERNEL);
    let job = plan_kernel_case(&by_name).unwrap();
    let run = run_kernel_job(&job.arch().unwrap(), &job).unwrap();
    assert_eq!((run.kernel_index, run.matched_by), (1, NameMatch::BaseName));
}

#[test]
fn kernel_case_errors() {
    let base = one_case("accelsim_example.csv", Some("NVIDIA A100-SXM4-80GB")).remove(0);
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/accelsim");
    let arch = gpusim_configs::load_preset("a100-sxm4-80gb").unwrap();
    let with = |f: &dyn Fn(&mut Case)| {
        let mut c = base.clone();
        c.extra.insert(EXTRA_TRACE.into(), dir.display().to_string().into());
        f(&mut c);
        c
    };
    // No kernel of that name.
    let job = plan_kernel_case(&with(&|c| {
        c.extra.insert("kernel_name".into(), "void softmax_warp_forward<float>(float*)".into());
    }))
    .unwrap();
    let e = run_kernel_job(&arch, &job).unwrap_err();
    assert!(
        e.contains("softmax_warp_forward") && e.contains("0: _Z6vecAddPKfS0_Pfi") && e.contains("trace_kernel"),
        "{e}"
    );
    // An index past the trace.
    let job = plan_kernel_case(&with(&|c| {
        c.extra.insert(EXTRA_TRACE_KERNEL.into(), 7.into());
    }))
    .unwrap();
    assert!(run_kernel_job(&arch, &job).unwrap_err().contains("2 kernel(s)"));
    // A trace that does not exist; one that is not a trace.
    let job = plan_kernel_case(&with(&|c| {
        c.extra.insert(EXTRA_TRACE.into(), "/nonexistent/kernelslist.g".into());
    }))
    .unwrap();
    assert!(run_kernel_job(&arch, &job).unwrap_err().contains("/nonexistent/kernelslist.g"));
    let job = plan_kernel_case(&with(&|c| {
        c.extra.insert(EXTRA_TRACE.into(), fixture("raw_units.csv").display().to_string().into());
    }))
    .unwrap();
    assert!(run_kernel_job(&arch, &job).unwrap_err().contains("not a trace"));
    // Plan errors: wrong kind, metric, field types.
    let e = plan_kernel_case(&with(&|c| c.kind = Kind::Gemm)).unwrap_err();
    assert!(e.contains("gemm"), "{e}");
    let e = plan_kernel_case(&with(&|c| c.metric = Metric::Tflops)).unwrap_err();
    assert!(e.contains("tflops"), "{e}");
    let e = plan_kernel_case(&with(&|c| {
        c.extra.insert(EXTRA_TRACE_KERNEL.into(), (-1).into());
    }))
    .unwrap_err();
    assert!(e.contains("trace_kernel"), "{e}");
    let e = plan_kernel_case(&with(&|c| {
        c.extra.insert("grid".into(), "(4, 1, 1)".into());
    }))
    .unwrap_err();
    assert!(e.contains("grid"), "{e}");
    let e = plan_kernel_case(&with(&|c| {
        c.extra.remove("kernel_name");
    }))
    .unwrap_err();
    assert!(e.contains("names no kernel"), "{e}");
    // A case without a known part has no preset.
    let job = plan_kernel_case(&with(&|c| c.hardware = "GPU 0 (CC 8.0), name not exported".into())).unwrap();
    assert!(job.preset.is_none() && job.arch().is_err());
}
