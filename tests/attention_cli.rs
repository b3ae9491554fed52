//! `gpusim trace attention`: flags map to the attention parameters; bad input is exit code 2
//! with a message naming the flag, file and line.

use std::process::Command;

fn gpusim(args: &[&str]) -> (i32, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_gpusim")).args(args).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    (o.status.code().unwrap_or(-1), text)
}

#[test]
fn trace_attention_writes_the_kernels_and_the_flops() {
    let dir = std::env::temp_dir().join(format!("gpusim-attn-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("a.gtb");
    let varlen = dir.join("lens.txt");
    std::fs::write(&varlen, "256\n# second request\n100\n").unwrap();
    let o = out.to_str().unwrap();
    let (code, text) = gpusim(&[
        "trace",
        "attention",
        "--batch",
        "2",
        "--heads",
        "4",
        "--kv-heads",
        "2",
        "--seqlen",
        "256",
        "--headdim",
        "64",
        "--causal",
        "--pass",
        "fwdbwd",
        "--recipe",
        "fa2",
        "--varlen",
        varlen.to_str().unwrap(),
        "--arch",
        "a100-sxm4-80gb",
        "-o",
        o,
    ]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("flash_fwd_kernel_hdim64") && text.contains("flash_bwd_convert_dq"), "{text}");
    assert!(text.contains("FLOPs:") && text.contains("warp instructions:"), "{text}");
    assert!(std::fs::metadata(&out).unwrap().len() > 0);

    std::fs::write(&varlen, "256\nten\n").unwrap();
    let (code, text) = gpusim(&["trace", "attention", "--varlen", varlen.to_str().unwrap(), "-o", o]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("lens.txt:2") && text.contains("`ten`"), "{text}");
    let (code, text) = gpusim(&["trace", "attention", "--recipe", "fa9", "-o", o]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("--recipe `fa9`"), "{text}");
    let (code, text) = gpusim(&["trace", "attention", "--heads", "6", "--kv-heads", "4", "-o", o]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("kv_heads = 4"), "{text}");
    std::fs::remove_dir_all(&dir).ok();
}
