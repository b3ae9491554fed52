//! `reports::scatter`: content of the SVG, validation, determinism, PNG output.

mod common;

use common::{PNG_MAGIC, TempDir};
use gpusim_reports::Error;
use gpusim_reports::scatter::{ScatterPlot, ScatterPoint, render_svg, write_png};

fn point(label: &str, group: &str, unit: &str, measured: f64, simulated: f64) -> ScatterPoint {
    ScatterPoint { label: label.into(), group: group.into(), unit: unit.into(), measured, simulated }
}

fn sample() -> ScatterPlot {
    let mut p = ScatterPlot::new("Simulated vs measured <H100>");
    p.points = vec![
        point("gemm-4096", "gemm", "TFLOP/s", 783.3, 891.5),
        point("gemm-512", "gemm", "TFLOP/s", 40.7, 114.0),
        point("lat-l1", "latency", "cycles", 33.0, 33.0),
        point("lat-l2", "latency", "cycles", 205.6, 206.0),
        point("lat-dram", "latency", "cycles", 552.3, 555.3),
        point("bw-dram", "bandwidth", "GB/s", 1776.0, 1846.5),
        point("bw-l2", "bandwidth", "GB/s", 5447.7, 5541.5),
    ];
    p
}

#[test]
fn svg_has_the_title_the_legend_and_one_marker_per_point() {
    let p = sample();
    let svg = render_svg(&p).unwrap();
    assert!(svg.starts_with("<svg"), "{}", &svg[..100]);
    assert!(svg.contains("Simulated vs measured &lt;H100&gt;"), "title missing");
    // Mixed units: each group's legend entry names its unit; the axes name none.
    for entry in ["gemm (TFLOP/s)", "latency (cycles)", "bandwidth (GB/s)", "y = x", "±10%: 5 of 7 points"] {
        assert!(svg.contains(entry), "legend entry `{entry}` missing");
    }
    assert!(svg.contains(">\nmeasured\n<") && svg.contains(">\nsimulated\n<"), "axis descriptions missing");
    // One circle per point, plus one legend marker per group.
    assert_eq!(svg.matches("<circle").count(), p.points.len() + 3);
    // Log axes: decade labels.
    for tick in [">\n100\n<", ">\n1000\n<"] {
        assert!(svg.contains(tick), "tick {tick:?} missing");
    }
}

#[test]
fn a_shared_unit_goes_on_the_axes() {
    let mut p = ScatterPlot::new("bandwidth");
    p.points = vec![point("a", "dram", "GB/s", 1000.0, 1100.0), point("b", "l2", "GB/s", 5000.0, 4000.0)];
    let svg = render_svg(&p).unwrap();
    assert!(svg.contains("measured (GB/s)") && svg.contains("simulated (GB/s)"));
    assert!(svg.contains(">\ndram\n<") && svg.contains(">\nl2\n<"), "plain group names in the legend");
}

#[test]
fn one_point_and_no_band_are_fine() {
    let mut p = ScatterPlot::new("one");
    p.points = vec![point("only", "g", "", 5.0, 5.0)];
    p.band = 0.0;
    let svg = render_svg(&p).unwrap();
    assert_eq!(svg.matches("<circle").count(), 2);
    assert!(!svg.contains("±"));
}

#[test]
fn non_positive_and_non_finite_values_are_errors() {
    for (measured, simulated, what) in
        [(0.0, 1.0, "measured"), (-3.0, 1.0, "measured"), (1.0, 0.0, "simulated"), (1.0, -1e-9, "simulated")]
    {
        let mut p = sample();
        p.points[2] = point("bad", "latency", "cycles", measured, simulated);
        match render_svg(&p) {
            Err(Error::NotPositive { label, what: w, .. }) => assert_eq!((label.as_str(), w), ("bad", what)),
            other => panic!("{measured}, {simulated}: {other:?}"),
        }
    }
    for (measured, simulated) in [(f64::NAN, 1.0), (1.0, f64::INFINITY)] {
        let mut p = sample();
        p.points[0].measured = measured;
        p.points[0].simulated = simulated;
        assert!(matches!(render_svg(&p), Err(Error::NotFinite { .. })), "{measured}, {simulated}");
    }
}

#[test]
fn empty_plots_bad_bands_and_sizes_are_errors() {
    assert!(matches!(render_svg(&ScatterPlot::new("empty")), Err(Error::Empty)));
    for band in [-0.1, 1.0, f64::NAN] {
        let mut p = sample();
        p.band = band;
        assert!(matches!(render_svg(&p), Err(Error::BadBand(_))), "{band}");
    }
    let mut p = sample();
    p.size = (100, 100);
    assert!(matches!(render_svg(&p), Err(Error::BadSize(100, 100))));
}

#[test]
fn the_same_plot_gives_the_same_svg() {
    let a = render_svg(&sample()).unwrap();
    let b = render_svg(&sample()).unwrap();
    assert_eq!(a.as_bytes(), b.as_bytes());
}

#[test]
fn png_is_written_and_deterministic() {
    let dir = TempDir::new("scatter");
    let (a, b) = (dir.0.join("a.png"), dir.0.join("b.PNG"));
    write_png(&sample(), &a).unwrap();
    write_png(&sample(), &b).unwrap();
    let bytes = std::fs::read(&a).unwrap();
    assert!(bytes.starts_with(PNG_MAGIC));
    assert!(bytes.len() > 10_000, "{} bytes: an empty image?", bytes.len());
    assert_eq!(bytes, std::fs::read(&b).unwrap());
}

#[test]
fn png_errors_create_no_file() {
    let dir = TempDir::new("scatter-err");
    let wrong_ext = dir.0.join("plot.svg");
    assert!(matches!(write_png(&sample(), &wrong_ext), Err(Error::Png { .. })));
    let rejected = dir.0.join("rejected.png");
    assert!(matches!(write_png(&ScatterPlot::new("empty"), &rejected), Err(Error::Empty)));
    let missing_dir = dir.0.join("no/such/dir/plot.png");
    let e = write_png(&sample(), &missing_dir).unwrap_err();
    assert!(matches!(e, Error::Png { .. }), "{e:?}");
    assert!(e.to_string().contains("plot.png"), "{e}");
    assert_eq!(std::fs::read_dir(&dir.0).unwrap().count(), 0);
}
