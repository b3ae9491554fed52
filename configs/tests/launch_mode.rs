//! `sim.launch` (eager or graph) picks the gap between dependent kernels: the default is eager,
//! a file or an override sets graph, anything else fails naming the file, the field and the
//! modes; `explain` describes both gaps with their unit.

use gpusim_configs::{ConfigError, Cycles, explain, load_preset, load_str};

#[test]
fn eager_by_default_and_each_mode_gives_its_own_gap() {
    let a = load_preset("h800-sxm5").unwrap();
    assert_eq!(a.sim.launch, "eager");
    assert_ne!(a.sim.kernel_launch_overhead, a.sim.graph_launch_overhead, "the test needs two gaps");
    assert_eq!(a.sim.launch_gap(), a.sim.kernel_launch_overhead);
    let g = a.with_override_str("sim.launch", "graph").unwrap();
    assert_eq!(g.sim.launch, "graph");
    assert_eq!(g.sim.launch_gap(), g.sim.graph_launch_overhead);
    assert_eq!(g.sim.graph_launch_overhead, a.sim.graph_launch_overhead, "only the mode changed");
    let f = load_str(
        "g.toml",
        "inherits = \"h800-sxm5\"\n[sim]\nlaunch = \"graph\"\ngraph_launch_overhead = \"321 cycles\"\n",
    )
    .unwrap();
    assert_eq!(f.sim.launch_gap(), Cycles(321));
}

#[test]
fn an_unknown_launch_mode_names_the_file_the_field_and_the_modes() {
    let e = load_str("bad.toml", "inherits = \"h800-sxm5\"\n[sim]\nlaunch = \"lazy\"\n").unwrap_err();
    let ConfigError::Invalid { keys, at, .. } = &e else { panic!("{e}") };
    assert_eq!(keys, &["sim.launch"]);
    assert_eq!(at.as_ref().map(|l| l.to_string()).as_deref(), Some("bad.toml:3:10"));
    let text = e.to_string();
    assert!(text.contains("`lazy`") && text.contains("eager, graph"), "{text}");
    let e = load_preset("h800-sxm5").unwrap().with_override_str("sim.launch", "graphs").unwrap_err();
    assert_eq!(e.key(), Some("sim.launch"), "{e}");
}

#[test]
fn explain_gives_both_gaps_and_the_mode_with_units() {
    for (key, unit) in
        [("sim.launch", "mode name"), ("sim.graph_launch_overhead", "cycles"), ("sim.kernel_launch_overhead", "cycles")]
    {
        let p = explain(key).unwrap_or_else(|e| panic!("{key}: {e}"));
        assert_eq!(p.unit, unit, "{key}");
        assert!(p.description.contains("graph"), "{key} says how it relates to graph launch: {}", p.description);
    }
}
