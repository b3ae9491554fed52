//! Every latency and bandwidth case of the reference data (`shared/reference`) against the
//! simulation of its microbenchmark on the matching preset.
//!
//! One test runs all of them (on as many threads as there are cores) and prints one table, so a
//! failure shows every case: published, simulated, error, tolerance. Tolerances are 10%, 5% for
//! high-trust latencies (`gpusim_validation::memory_cases::tolerance_for`). Cases without a
//! matching preset or microbenchmark are listed with the reason.
//!
//! ```sh
//! cargo test -p gpusim-validation --test memory_cases -- --nocapture
//! ```

use gpusim_validation::memory_cases::{DISPUTED, Plan, memory_plans, not_applicable_table, results_table, run_cases};
use gpusim_validation::reference::{Kind, load_default};

#[test]
fn every_latency_and_bandwidth_case_has_a_plan() {
    let cases = load_default().unwrap_or_else(|e| panic!("{e}"));
    let plans = memory_plans(&cases);
    let ids: Vec<&str> =
        cases.iter().filter(|c| matches!(c.kind, Kind::Latency | Kind::Bandwidth)).map(|c| c.id.as_str()).collect();
    let planned: Vec<&str> = plans.iter().map(|(c, _)| c.id.as_str()).collect();
    assert_eq!(ids, planned, "every latency/bandwidth case gets a plan, in file order");
    let runs = plans.iter().filter(|(_, p)| matches!(p, Plan::Run { .. })).count();
    println!("{} latency/bandwidth cases: {runs} simulated, {} not applicable:\n", plans.len(), plans.len() - runs);
    println!("{}", not_applicable_table(&plans));
    assert!(runs >= 25, "only {runs} cases are simulated");
}

#[test]
fn simulated_latencies_and_bandwidths_match_the_reference_cases() {
    let cases = load_default().unwrap_or_else(|e| panic!("{e}"));
    let plans = memory_plans(&cases);
    let run: Vec<_> = plans.iter().filter(|(_, p)| matches!(p, Plan::Run { .. })).map(|(c, _)| *c).collect();
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let t0 = std::time::Instant::now();
    let results = run_cases(&run, threads);
    println!("{}", results_table(&results));
    println!("{} cases in {:.1} s on {threads} threads", results.len(), t0.elapsed().as_secs_f64());
    for (id, with, why) in DISPUTED {
        let r = results.iter().find(|r| r.id == *id).expect("disputed cases are simulated");
        let other = results.iter().find(|r| r.id == *with).expect("the case it contradicts is simulated");
        println!(
            "disputed: {id} ({}) contradicts {with}: {why}",
            if r.pass { "within tolerance" } else { "outside tolerance" }
        );
        assert!(other.pass, "{with}, which {id} contradicts, must match");
    }
    let disputed = |id: &str| DISPUTED.iter().any(|d| d.0 == id);
    let failed: Vec<&str> = results.iter().filter(|r| !r.pass && !disputed(&r.id)).map(|r| r.id.as_str()).collect();
    assert!(failed.is_empty(), "{} of {} cases outside tolerance: {failed:?}", failed.len(), results.len());
}
