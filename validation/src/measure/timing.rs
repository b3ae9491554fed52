//! Event timing: warm-ups, then repetitions back to back, each between two CUDA events created
//! with `CU_EVENT_DEFAULT` (the default `None` of cudarc disables timing); NVML clocks sampled
//! while the repetitions run.

use cudarc::driver::sys;

use super::MeasureError;
use super::gpu::{Gpu, drv};
use super::host::median;

/// The timed repetitions of one measurement.
#[derive(Clone, Debug)]
pub struct Timed {
    /// Milliseconds per repetition.
    pub ms: Vec<f64>,
    pub median_ms: f64,
    /// NVML (SM, memory) clocks sampled while the repetitions ran, MHz.
    pub clocks: Option<(f64, f64)>,
}

/// Runs `run(i)` `warmups` times (synchronised), then `reps` times between events.
pub fn time_runs(
    gpu: &Gpu,
    warmups: u32,
    reps: u32,
    mut run: impl FnMut(usize) -> Result<(), MeasureError>,
) -> Result<Timed, MeasureError> {
    for i in 0..warmups as usize {
        run(i)?;
    }
    gpu.sync("warm-up runs")?;
    let reps = reps.max(1) as usize;
    let events = (0..=reps)
        .map(|_| gpu.ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(drv("creating timing events"))?;
    events[0].record(&gpu.stream).map_err(drv("recording an event"))?;
    let mut samples = Vec::new();
    for i in 0..reps {
        run(i)?;
        events[i + 1].record(&gpu.stream).map_err(drv("recording an event"))?;
        // The host runs ahead of the GPU: sampling here reads the clocks under this load.
        if (i == reps / 2 || i + 1 == reps)
            && let Some(c) = gpu.nvml_clocks()
        {
            samples.push(c);
        }
    }
    events[reps].synchronize().map_err(drv("waiting for the timed runs"))?;
    let ms = events
        .windows(2)
        .map(|w| w[0].elapsed_ms(&w[1]).map(f64::from))
        .collect::<Result<Vec<f64>, _>>()
        .map_err(drv("reading event times"))?;
    let clocks = (!samples.is_empty()).then(|| {
        (
            median(&samples.iter().map(|c| c.0).collect::<Vec<_>>()),
            median(&samples.iter().map(|c| c.1).collect::<Vec<_>>()),
        )
    });
    Ok(Timed { median_ms: median(&ms), ms, clocks })
}
