//! Why a measurement could not be taken.

/// A failure of the harness. [`MeasureError::is_setup`] tells the ones that mean "this machine
/// or this build cannot measure" (no feature, no driver, no device, a missing library) from
/// failures on a working GPU.
#[derive(Debug, thiserror::Error)]
pub enum MeasureError {
    #[error(
        "this gpusim was built without the measurement harness: rebuild it with `cargo build --release --features cuda` \
         (scripts/measure-on-gpu.sh does that and installs the CUDA libraries it needs)"
    )]
    NotBuilt,
    #[error("{library} could not be loaded (tried {tried}): {hint}")]
    MissingLibrary { library: &'static str, tried: String, hint: String },
    #[error("no usable CUDA device: {0}")]
    NoDevice(String),
    #[error("{what}: {message}")]
    Driver { what: String, message: String },
    #[error("NVRTC could not compile {file} for {arch}: {message}{}", if log.is_empty() { String::new() } else { format!("\n{log}") })]
    Compile { file: String, arch: String, message: String, log: String },
    #[error("cuBLAS: {what}: {message}")]
    Cublas { what: String, message: String },
    #[error("{what}: the result check failed: {detail}")]
    Check { what: String, detail: String },
    #[error("{0}")]
    Unsupported(String),
    #[error("{0}")]
    Usage(String),
}

impl MeasureError {
    /// The build, the machine or the command line cannot measure at all (as opposed to a failure
    /// while measuring on a working GPU).
    pub fn is_setup(&self) -> bool {
        matches!(
            self,
            MeasureError::NotBuilt
                | MeasureError::MissingLibrary { .. }
                | MeasureError::NoDevice(_)
                | MeasureError::Usage(_)
        )
    }
}
