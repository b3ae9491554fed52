//! The parameters the model does not read are exactly the listed descriptive ones, and changing
//! one changes no result.

use gpusim_configs::{Bytes, DESCRIPTIVE, Hertz, all_params, load_preset};
use gpusim_isa::text::TextReader;
use gpusim_sim_core::{SimOptions, simulate};

#[test]
fn the_descriptive_parameters_are_listed_and_exist() {
    let keys: Vec<&str> = DESCRIPTIVE.iter().map(|(k, _)| *k).collect();
    assert_eq!(keys, ["hbm.size", "clocks.memory"], "a parameter became descriptive or modelled: update this test");
    let all = all_params();
    for k in keys {
        assert!(all.iter().any(|p| p.name == k), "{k} is not a parameter");
    }
}

#[test]
fn changing_a_descriptive_parameter_changes_no_result() {
    let trace = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/stream_copy.trace");
    let run = |arch: &gpusim_configs::Arch| {
        let mut src = TextReader::open(trace).unwrap();
        simulate(arch, &mut src, &SimOptions::default()).unwrap()
    };
    let base = load_preset("a100-sxm4-80gb").unwrap();
    let reference = run(&base);
    let mut a = base.clone();
    a.hbm.size = Bytes(a.hbm.size.0 * 4);
    gpusim_configs::validate(&a).unwrap();
    assert_eq!(run(&a), reference, "hbm.size");
    let mut a = base.clone();
    a.clocks.memory = Hertz(a.clocks.memory.0 / 2);
    gpusim_configs::validate(&a).unwrap();
    assert_eq!(run(&a), reference, "clocks.memory");
}
