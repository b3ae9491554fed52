//! NVRTC: a kernel source to a cubin for one `sm_XY[a]` (the `result`/`sys` layer: the safe API
//! gives PTX only).

use std::ffi::{CString, c_char};

use cudarc::nvrtc::{result, sys};

use super::MeasureError;
use super::kernels::Source;

fn text(v: &[c_char]) -> String {
    let bytes: Vec<u8> = v.iter().map(|&c| c as u8).take_while(|&b| b != 0).collect();
    String::from_utf8_lossy(&bytes).trim().to_string()
}

/// "13.5".
pub fn nvrtc_version() -> Result<String, MeasureError> {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: writes two ints (the library was checked to be present).
    unsafe { sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .map_err(|e| MeasureError::Driver { what: "nvrtcVersion".into(), message: format!("{e:?}") })?;
    Ok(format!("{major}.{minor}"))
}

/// Compiles `src` for `arch` (`sm_90a`, `sm_80`, ...) and returns the cubin.
pub fn cubin(src: &Source, arch: &str) -> Result<Vec<u8>, MeasureError> {
    let err = |message: String, log: String| MeasureError::Compile {
        file: src.path.to_string(),
        arch: arch.to_string(),
        message,
        log,
    };
    let code = CString::new(src.text).map_err(|e| err(format!("the source holds a NUL byte: {e}"), String::new()))?;
    let name = CString::new(src.file).map_err(|e| err(e.to_string(), String::new()))?;
    let prog = result::create_program(&code, Some(&name)).map_err(|e| err(format!("{e:?}"), String::new()))?;
    let opts = [format!("--gpu-architecture={arch}"), "-std=c++17".to_string()];
    // SAFETY: `prog` was just created and is destroyed once, below; `code` and `name` outlive it.
    unsafe {
        let compiled = result::compile_program(prog, &opts);
        let log = result::get_program_log(prog).map(|l| text(&l)).unwrap_or_default();
        let out = match compiled {
            Err(e) => Err(err(format!("{e:?}"), log)),
            Ok(()) => {
                let mut size = 0usize;
                match sys::nvrtcGetCUBINSize(prog, &mut size).result() {
                    Err(e) => Err(err(format!("nvrtcGetCUBINSize: {e:?}"), log)),
                    Ok(()) if size == 0 => Err(err("NVRTC produced no cubin (a compute_XY target?)".into(), log)),
                    Ok(()) => {
                        let mut buf = vec![0 as c_char; size];
                        sys::nvrtcGetCUBIN(prog, buf.as_mut_ptr())
                            .result()
                            .map(|()| buf.iter().map(|&c| c as u8).collect::<Vec<u8>>())
                            .map_err(|e| err(format!("nvrtcGetCUBIN: {e:?}"), log))
                    }
                }
            }
        };
        let _ = result::destroy_program(prog);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::kernels::{ALL, arch_for};

    /// The run-time compile path, where NVRTC can be loaded (put the wheel's lib folder on
    /// LD_LIBRARY_PATH): every source to a cubin for sm_80 and sm_90(a). Elsewhere it says why
    /// it did nothing (tests/harness_sass.rs covers the sources through scripts/sass.py).
    #[test]
    fn every_source_compiles_to_a_cubin_where_nvrtc_is_present() {
        if let Err(e) = crate::measure::gpu::check_nvrtc() {
            eprintln!("skipped: {e}");
            return;
        }
        eprintln!("NVRTC {}", nvrtc_version().unwrap());
        for src in ALL {
            for cc in [(8, 0), (9, 0)] {
                if !src.runs_on(cc) {
                    continue;
                }
                let arch = arch_for(cc, src.arch_specific);
                let cubin = cubin(&src, &arch).unwrap_or_else(|e| panic!("{e}"));
                assert_eq!(&cubin[..4], b"\x7fELF", "{} {arch}: not an ELF cubin", src.path);
            }
        }
        // A compile error comes back with NVRTC's log.
        let bad =
            Source { text: "extern \"C\" __global__ void k() { undefined_thing(); }", ..crate::measure::kernels::UTIL };
        let e = cubin(&bad, "sm_80").unwrap_err().to_string();
        assert!(e.contains("undefined_thing"), "{e}");
    }
}
