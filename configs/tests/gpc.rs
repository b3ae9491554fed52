//! `Sm::gpc_of`: SMs spread evenly over the GPCs, `sm · gpcs / sms` with `gpcs` in `[1, sms]`.

use gpusim_configs::{load_preset, presets};

#[test]
fn gpc_of_spreads_sms_evenly_and_clamps_the_gpc_count() {
    for (name, _) in presets() {
        let a = load_preset(name).unwrap();
        let sm = &a.sm;
        let gpcs = sm.gpcs_clamped();
        assert!(gpcs >= 1 && gpcs <= sm.count.max(1));
        let mut per = vec![0u32; gpcs as usize];
        for s in 0..sm.count {
            let g = sm.gpc_of(s);
            assert_eq!(g as u64, s as u64 * gpcs as u64 / sm.count as u64);
            per[g as usize] += 1;
        }
        let (lo, hi) = (per.iter().min().unwrap(), per.iter().max().unwrap());
        assert!(hi - lo <= 1, "{name}: {per:?}");
    }
    let mut a = load_preset("h100-sxm5-80gb").unwrap();
    a.sm.gpcs = 0;
    assert_eq!((a.sm.gpcs_clamped(), a.sm.gpc_of(a.sm.count - 1)), (1, 0));
    a.sm.gpcs = 10_000;
    assert_eq!(a.sm.gpcs_clamped(), a.sm.count);
    assert_eq!(a.sm.gpc_of(7), 7);
}
