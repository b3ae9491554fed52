// Temporary: hashes of generated traces, to compare before/after a refactor.
use gpusim_configs::load_preset;
use gpusim_isa::text;
use gpusim_validation::memory_cases::{inst_chain, l1_read, tma_chase};
use gpusim_workloads::gemm::{Dtype, GemmProblem, Style, default_recipe, generate, tuned_recipe};
use gpusim_workloads::ubench::{NAMES, PointerChase, by_name};

fn h(s: &str) -> u64 {
    let mut x: u64 = 0xcbf29ce484222325;
    for b in s.bytes() {
        x ^= b as u64;
        x = x.wrapping_mul(0x100000001b3);
    }
    x
}

fn main() {
    for preset in ["h100-sxm5-80gb", "a100-sxm4-80gb", "h800-pcie"] {
        let arch = load_preset(preset).unwrap();
        for n in NAMES {
            for params in [vec![], vec![("footprint_bytes".to_string(), "256 MiB".to_string())]] {
                if let Ok(u) = by_name(n, &params, &arch) {
                    println!("{preset} {n} {:?} {:x}", params.len(), h(&text::to_string(&u.trace).unwrap()));
                }
            }
        }
        for (m, nn, k) in [(8192, 8192, 8192), (1024, 512, 256), (4096, 128, 16384), (333, 777, 1111)] {
            for d in Dtype::ALL {
                let p = GemmProblem::new(m, nn, k, d);
                for r in [
                    Some(default_recipe(&arch, &p)),
                    Some(tuned_recipe(&arch, &p, Style::Ampere)),
                    Some(tuned_recipe(&arch, &p, Style::Hopper)),
                ]
                .into_iter()
                .flatten()
                {
                    match generate(&arch, &p, &r) {
                        Ok(t) => println!("{preset} gemm {p} {r} {:x}", h(&text::to_string(&t).unwrap())),
                        Err(e) => println!("{preset} gemm {p} {r} err {e}"),
                    }
                }
            }
        }
        let pc = PointerChase { footprint_bytes: 1 << 20, ..PointerChase::default() };
        if arch.compute_capability >= 90 {
            println!("{preset} tma {:x}", h(&text::to_string(&tma_chase(&pc, &arch)).unwrap()));
        }
        println!("{preset} chain {:x}", h(&text::to_string(&inst_chain("IADD3", 64, &arch)).unwrap()));
        println!("{preset} l1 {:x}", h(&text::to_string(&l1_read(64 << 10, 4, 2, &arch).0).unwrap()));
    }
}
