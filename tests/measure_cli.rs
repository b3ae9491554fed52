//! `gpusim measure` on a machine without a GPU: exit code 2 and a clear message, no panic, in
//! both builds. The default build says it was built without the harness; a `--features cuda`
//! build (`cargo test -p gpusim --features cuda --test measure_cli`, which CI runs) says the
//! driver is missing. On a machine with an NVIDIA driver the cuda build instead measures one small
//! group and the file it writes must load as reference cases.

mod common;

use std::path::PathBuf;
use std::process::Output;

use common::gpusim;

/// stdout and stderr together.
fn text(o: &Output) -> String {
    let (out, err) = common::text(o);
    out + &err
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gpusim-measure-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Whether this machine has an NVIDIA driver with a device node.
#[cfg(feature = "cuda")]
fn has_driver() -> bool {
    std::path::Path::new("/dev/nvidiactl").exists()
}

#[test]
fn bad_arguments_exit_2() {
    let o = gpusim(&["measure", "--suite", "fast"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("quick or full"), "{}", text(&o));
    assert!(!text(&o).contains("panicked"), "{}", text(&o));
}

#[cfg(not(feature = "cuda"))]
#[test]
fn default_build_says_it_has_no_harness() {
    let out = tmp("none.toml");
    let o = gpusim(&["measure", "--suite", "quick", "-o", out.to_str().unwrap()]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(t.contains("built without") && t.contains("--features cuda"), "{t}");
    assert!(!t.contains("panicked"), "{t}");
    assert!(!out.exists());
}

#[cfg(feature = "cuda")]
#[test]
fn cuda_build_without_a_driver_exits_2_with_a_clear_message() {
    if has_driver() {
        eprintln!("an NVIDIA driver is present: see measures_a_small_group_where_there_is_a_gpu");
        return;
    }
    let out = tmp("nodriver.toml");
    let o = gpusim(&["measure", "--suite", "quick", "-o", out.to_str().unwrap()]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(t.contains("NVIDIA driver") && t.contains("libcuda"), "{t}");
    assert!(!t.contains("panicked"), "{t}");
    assert!(!out.exists());
    // An unknown group is a usage error (exit 2) whatever the machine.
    let o = gpusim(&["measure", "--only", "gemms"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("unknown group `gemms`"), "{}", text(&o));
}

#[cfg(feature = "cuda")]
#[test]
#[ignore = "needs an NVIDIA GPU and driver: cargo test -p gpusim --features cuda --test measure_cli -- --ignored"]
fn measures_a_small_group_where_there_is_a_gpu() {
    assert!(has_driver(), "this test needs an NVIDIA driver (libcuda); it is ignored unless asked for");
    let out = tmp("smem.toml");
    let o = gpusim(&["measure", "--only", "smem", "-o", out.to_str().unwrap()]);
    let t = text(&o);
    assert!(!t.contains("panicked"), "{t}");
    match o.status.code() {
        Some(0) => {
            let cases = gpusim_validation::load_cases(&out).unwrap_or_else(|e| panic!("{e}"));
            assert!(!cases.is_empty());
            assert!(cases.iter().all(|c| c.device.is_some() && c.clock_mhz.is_some()));
        }
        // NVRTC not on LD_LIBRARY_PATH: a setup error, exit 2, saying which library.
        Some(2) => assert!(t.contains("could not be loaded"), "{t}"),
        c => panic!("exit {c:?}: {t}"),
    }
}
