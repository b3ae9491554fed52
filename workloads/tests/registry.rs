//! The registry, the parameter tables and the lazy trace sources: every generator is listed
//! with its parameters, builds from `key=value` pairs, rejects bad values with an error that
//! names the parameter (never a panic), and its lazy source yields exactly the CTAs of its
//! materialised trace.

use gpusim_configs::{Arch, load_preset};
use gpusim_isa::{KernelSource, TraceSource};
use gpusim_workloads::registry::{self, Generator};
use gpusim_workloads::{find, registry as all};

fn h100() -> Arch {
    load_preset("h100-sxm5-80gb").unwrap()
}

fn kv(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// Small parameters for each generator, so the test stays fast.
fn small(name: &str) -> Vec<(String, String)> {
    match name {
        "pointer-chase" => kv(&[("footprint_bytes", "64 KiB")]),
        n if n.starts_with("stream-") => kv(&[("bytes_per_array", "4 MiB")]),
        "l2-read" => kv(&[("footprint_bytes", "1 MiB"), ("total_bytes_read", "8 MiB")]),
        "gemm" => kv(&[("m", "512"), ("n", "512"), ("k", "256")]),
        "attention" => kv(&[("recipe", "fa2"), ("seqlen", "256"), ("heads", "2"), ("causal", "true")]),
        "moe" => kv(&[
            ("tokens", "64"),
            ("experts", "8"),
            ("topk", "2"),
            ("hidden", "512"),
            ("intermediate", "256"),
            ("routing", "zipf:1.2"),
        ]),
        _ => Vec::new(),
    }
}

#[test]
fn every_generator_is_listed_with_its_parameters() {
    let names: Vec<&str> = all().iter().map(|g| g.name).collect();
    for n in gpusim_workloads::ubench::NAMES {
        assert!(names.contains(n), "{n} missing from the registry");
    }
    assert!(names.contains(&"gemm") && names.contains(&"attention") && names.contains(&"moe"));
    for g in all() {
        let groups = g.params();
        assert!(!groups.is_empty() && groups.iter().all(|gr| !gr.params.is_empty()), "{}", g.name);
        for p in groups.iter().flat_map(|gr| &gr.params) {
            assert!(!p.description.is_empty() && !p.unit.is_empty() && !p.range.is_empty(), "{}.{}", g.name, p.name);
        }
        let help = g.help();
        assert!(help.contains(g.summary), "{help}");
    }
    assert!(find("pointer-chase").unwrap().help().contains("footprint_bytes"));
    let e = find("no-such").unwrap_err().0;
    assert!(e.contains("no-such") && e.contains("gemm"), "{e}");
}

/// Each CTA's coordinates and warp programs.
type Ctas = Vec<(gpusim_isa::Dim3, Vec<gpusim_isa::Program>)>;

/// Drains a trace source into each kernel's information and CTAs.
fn drain(src: &mut dyn TraceSource) -> Vec<(gpusim_isa::KernelInfo, Ctas)> {
    let mut out = Vec::new();
    while let Some(mut k) = src.next_kernel().unwrap() {
        let info = k.info().clone();
        let mut ctas = Vec::new();
        while let Some(c) = k.next_cta().unwrap() {
            ctas.push((c.coord, c.warps.iter().map(|p| (**p).clone()).collect()));
        }
        out.push((info, ctas));
    }
    out
}

#[test]
fn lazy_sources_yield_exactly_the_ctas_of_the_materialised_traces() {
    let arch = h100();
    for g in all() {
        let params = small(g.name);
        let trace = g.generate(&params, &arch).unwrap_or_else(|e| panic!("{}: {e}", g.name)).trace;
        let mut lazy = g.source(&params, &arch).unwrap();
        let got = drain(&mut *lazy);
        let mut mem = gpusim_isa::MemTraceSource::new(trace.clone());
        let want = drain(&mut mem);
        assert_eq!(got.len(), trace.kernels.len(), "{}", g.name);
        assert!(got == want, "{}: the lazy source differs from the trace", g.name);
    }
}

/// A kernel source that owns its data outlives the trace source it came from (so the sources
/// satisfy a `next_kernel` that returns an owned `Box<dyn KernelSource>`).
#[test]
fn lazy_kernels_own_their_data() {
    let arch = h100();
    let t = find("shared-banks").unwrap().generate(&[], &arch).unwrap().trace;
    let k = registry::LazyKernel::from_kernel(t.kernels[0].clone());
    let mut boxed: Box<dyn KernelSource + 'static> = Box::new(k);
    let mut n = 0;
    while boxed.next_cta().unwrap().is_some() {
        n += 1;
    }
    assert_eq!(n, t.kernels[0].info.num_ctas());
}

fn err(g: &Generator, pairs: &[(&str, &str)]) -> String {
    let arch = h100();
    match g.generate(&kv(pairs), &arch) {
        Ok(_) => panic!("{} accepted {pairs:?}", g.name),
        Err(e) => e.0,
    }
}

#[test]
fn bad_parameters_are_errors_that_name_the_parameter() {
    let chase = find("pointer-chase").unwrap();
    // Zero, huge, wrong unit, not a number, unknown key.
    let e = err(chase, &[("stride_bytes", "0")]);
    assert!(e.contains("stride_bytes") && e.contains("8 B to"), "{e}");
    let e = err(chase, &[("footprint_bytes", "1 PiB")]);
    assert!(e.contains("footprint_bytes"), "{e}");
    let e = err(chase, &[("footprint_bytes", "99999999999999999999")]);
    assert!(e.contains("footprint_bytes"), "{e}");
    let e = err(chase, &[("footprint_bytes", "4 parsecs")]);
    assert!(e.contains("footprint_bytes") && e.contains("unit"), "{e}");
    let e = err(chase, &[("passes", "0")]);
    assert!(e.contains("passes") && e.contains("1 to"), "{e}");
    let e = err(chase, &[("passes", "lots")]);
    assert!(e.contains("passes") && e.contains("integer"), "{e}");
    let moe = find("moe").unwrap();
    let e = err(moe, &[("routing", "zipf")]);
    assert!(e.contains("routing"), "{e}");
    let e = err(moe, &[("topk", "0")]);
    assert!(e.contains("topk"), "{e}");
    let e = err(chase, &[("footprint", "1 MiB")]);
    assert!(e.contains("unknown parameter `footprint`") && e.contains("footprint_bytes"), "{e}");
    // Fields that fit alone but not together are the parameter struct's `validate`.
    let e = err(chase, &[("footprint_bytes", "8"), ("stride_bytes", "64")]);
    assert!(e.contains("footprint_bytes"), "{e}");

    let e = err(find("stream-triad").unwrap(), &[("threads_per_cta", "4096")]);
    assert!(e.contains("threads_per_cta") && e.contains("32 to 1024"), "{e}");
    let e = err(find("stream-copy").unwrap(), &[("active_sms", "0")]);
    assert!(e.contains("active_sms"), "{e}");
    let e = err(find("l2-read").unwrap(), &[("width_bytes", "32")]);
    assert!(e.contains("width_bytes"), "{e}");
    let e = err(find("shared-banks").unwrap(), &[("ways", "0")]);
    assert!(e.contains("ways"), "{e}");
    let e = err(find("tma-pipeline").unwrap(), &[("stages", "100")]);
    assert!(e.contains("stages") && e.contains("1 to 8"), "{e}");
    let e = err(find("dsmem-latency").unwrap(), &[("cluster_size", "1")]);
    assert!(e.contains("cluster_size"), "{e}");

    let gemm = find("gemm").unwrap();
    let e = err(gemm, &[("m", "0")]);
    assert!(e.contains("`m`") && e.contains("1 to"), "{e}");
    let e = err(gemm, &[("dtype", "int4")]);
    assert!(e.contains("dtype") && e.contains("bf16"), "{e}");
    let e = err(gemm, &[("m", "256"), ("n", "256"), ("k", "256"), ("split_k", "0")]);
    assert!(e.contains("split_k"), "{e}");
    let e = err(gemm, &[("m", "256"), ("n", "256"), ("k", "256"), ("stages", "many")]);
    assert!(e.contains("stages"), "{e}");
    let e = err(gemm, &[("m", "256"), ("n", "256"), ("k", "256"), ("tile", "1")]);
    assert!(e.contains("tile") && e.contains("cta_m"), "{e}");
}

#[test]
fn gemm_through_the_registry_is_the_recipe_api() {
    use gpusim_workloads::gemm::{Dtype, GemmProblem, default_recipe, generate};
    let arch = h100();
    let p = GemmProblem::new(1024, 512, 256, Dtype::Bf16);
    let want = generate(&arch, &p, &default_recipe(&arch, &p)).unwrap();
    let got = find("gemm").unwrap().generate(&kv(&[("m", "1024"), ("n", "512"), ("k", "256")]), &arch).unwrap();
    assert!(got.trace == want);
}
