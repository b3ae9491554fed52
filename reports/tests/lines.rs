//! `reports::lines`: content of the SVG, validation, determinism, PNG output.

mod common;

use common::{PNG_MAGIC, TempDir};
use gpusim_reports::Error;
use gpusim_reports::lines::{LinePlot, Series, render_svg, write_png};

fn sample() -> LinePlot {
    let mut p = LinePlot::new("GEMM sweep", "N (elements)", "TFLOP/s");
    p.x_log = true;
    for (name, k) in [("bf16", 1.0), ("fp8", 2.0)] {
        let points = (6..=12).map(|e| (f64::from(1 << e), k * f64::from(e) * 50.0)).collect();
        p.series.push(Series::new(name, points));
    }
    p
}

#[test]
fn svg_has_the_title_the_axes_the_legend_and_the_markers() {
    let p = sample();
    let svg = render_svg(&p).unwrap();
    for text in ["GEMM sweep", "N (elements)", "TFLOP/s", ">\nbf16\n<", ">\nfp8\n<", ">\n100\n<", ">\n1000\n<"] {
        assert!(svg.contains(text), "`{text}` missing");
    }
    // One marker per point plus one per legend entry.
    assert_eq!(svg.matches("<circle").count(), 14 + 2);
}

#[test]
fn linear_axes_take_zero_and_negative_values_log_axes_do_not() {
    let mut p = LinePlot::new("t", "x", "y");
    p.series.push(Series::new("s", vec![(-1.0, 0.0), (0.0, -2.0), (1.0, 3.0)]));
    render_svg(&p).unwrap();
    p.y_log = true;
    match render_svg(&p) {
        Err(Error::NotPositive { label, what, value }) => assert_eq!((label.as_str(), what, value), ("s[0]", "y", 0.0)),
        other => panic!("{other:?}"),
    }
    p.y_log = false;
    p.series[0].points[2].0 = f64::NAN;
    assert!(matches!(render_svg(&p), Err(Error::NotFinite { what: "x", .. })));
}

#[test]
fn no_points_is_an_error() {
    let mut p = LinePlot::new("t", "x", "y");
    assert!(matches!(render_svg(&p), Err(Error::Empty)));
    p.series.push(Series::new("empty", vec![]));
    assert!(matches!(render_svg(&p), Err(Error::Empty)));
}

#[test]
fn the_same_plot_gives_the_same_svg() {
    assert_eq!(render_svg(&sample()).unwrap().as_bytes(), render_svg(&sample()).unwrap().as_bytes());
}

#[test]
fn png_is_written() {
    let dir = TempDir::new("lines");
    let path = dir.0.join("sweep.png");
    write_png(&sample(), &path).unwrap();
    assert!(std::fs::read(&path).unwrap().starts_with(PNG_MAGIC));
}
