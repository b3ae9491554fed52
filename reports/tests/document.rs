//! `reports::doc` and `reports::html`, with the heatmap, stacked bars and roofline figures.

use gpusim_reports::Error;
use gpusim_reports::bars::{Bar, StackedBars};
use gpusim_reports::doc::{Block, Cell, Document, Figure, Section, Table};
use gpusim_reports::heatmap::Heatmap;
use gpusim_reports::roofline::{self, Roofline};
use gpusim_reports::{bars, heatmap, html, lines};

fn heat() -> Heatmap {
    let mut h = Heatmap::new("time", "sm.count", "hbm.bandwidth");
    h.x_values = vec!["66".into(), "132".into()];
    h.y_values = vec!["3.35 TB/s".into(), "8 TB/s".into()];
    h.cells = vec![vec![Some(20.0), Some(11.0)], vec![Some(18.0), None]];
    h
}

fn stalls() -> StackedBars {
    let mut b = StackedBars::new("stalls", "share of warp-cycles");
    b.bars.push(Bar { label: "gemm".into(), segments: vec![("barrier".into(), 3.0), ("selected".into(), 1.0)] });
    b.bars.push(Bar { label: "copy".into(), segments: vec![("long_scoreboard".into(), 9.0)] });
    b
}

fn roof() -> Roofline {
    Roofline {
        title: "roofline".into(),
        compute: ("tensor".into(), 9.9e14),
        levels: vec![("HBM".into(), 3.35e12), ("L2".into(), 1.1e13)],
        points: vec![("gemm".into(), 300.0, 6e14)],
    }
}

fn document() -> Document {
    let mut s = Section::new("Points <all>");
    s.push(Block::KeyValues(vec![("gpusim".into(), "0.1.0 & co".into())]));
    s.push(Block::Table(Table {
        columns: vec!["point".into(), "time (µs)".into()],
        rows: vec![vec![Cell::text("0"), Cell::num(12.5, 1)], vec![Cell::text("1"), Cell::num(f64::NAN, 1)]],
    }));
    s.push(Block::Figure(Figure::new("heat", heatmap::render_svg(&heat())).unwrap()));
    s.push(Block::Figure(Figure::new("bars", bars::render_svg(&stalls())).unwrap()));
    s.push(Block::Figure(Figure::new("roof", lines::render_svg(&roofline::plot(&roof()).unwrap())).unwrap()));
    let mut t = Section::new("Second");
    t.push(Block::Note("careful".into()));
    Document { title: "Study".into(), subtitle: "sub".into(), sections: vec![s, t] }
}

#[test]
fn html_is_one_self_contained_page_with_tables_figures_and_escaped_text() {
    let page = html::render(&document());
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert_eq!(page.matches("<table class=\"sortable\">").count(), 1);
    assert_eq!(page.matches("<figure><svg").count(), 3);
    assert!(page.contains("Points &lt;all&gt;") && page.contains("0.1.0 &amp; co"));
    assert!(page.contains("data-v=\"1.25e1\">12.5<"), "numbers sort by data-v");
    // NaN has no data-v (it would not parse back), and nothing is fetched.
    assert!(page.contains("<td class=\"n\">NaN</td>"));
    for needle in ["http://", "https://", "src=", "<link"] {
        let outside_svg = page.split("<svg").map(|p| p.split("</svg>").last().unwrap()).collect::<String>();
        assert!(!outside_svg.contains(needle), "`{needle}` in the page outside its SVGs");
    }
    assert!(page.contains("href=\"#s0\"") && page.contains("href=\"#s1\""));
    assert_eq!(page, html::render(&document()), "deterministic");
}

#[test]
fn heatmap_labels_cells_and_marks_missing_ones() {
    let svg = heatmap::render_svg(&heat()).unwrap();
    for t in ["20", "11", "18", "—", "3.35 TB/s", "sm.count"] {
        assert!(svg.contains(t), "`{t}` missing");
    }
    let mut bad = heat();
    bad.cells.pop();
    assert!(matches!(heatmap::render_svg(&bad), Err(Error::Shape(_))));
    let mut empty = heat();
    empty.cells = vec![vec![None, None], vec![None, None]];
    assert!(matches!(heatmap::render_svg(&empty), Err(Error::Empty)));
    let mut nan = heat();
    nan.cells[0][0] = Some(f64::INFINITY);
    assert!(matches!(heatmap::render_svg(&nan), Err(Error::NotFinite { .. })));
}

#[test]
fn stacked_bars_have_one_legend_entry_per_segment_name_and_reject_negatives() {
    let svg = bars::render_svg(&stalls()).unwrap();
    for t in ["barrier", "selected", "long_scoreboard", "gemm", "copy"] {
        assert_eq!(svg.matches(&format!(">\n{t}\n<")).count(), 1, "`{t}` once");
    }
    let mut neg = stalls();
    neg.bars[0].segments[0].1 = -1.0;
    assert!(matches!(bars::render_svg(&neg), Err(Error::Negative { .. })));
    let mut zero = stalls();
    zero.bars.iter_mut().for_each(|b| b.segments.iter_mut().for_each(|s| s.1 = 0.0));
    assert!(matches!(bars::render_svg(&zero), Err(Error::Empty)));
}

#[test]
fn roofline_ceilings_bend_at_the_ridge_and_bad_values_are_named() {
    let p = roofline::plot(&roof()).unwrap();
    assert_eq!(p.series.len(), 3);
    let hbm = &p.series[0].points;
    assert!((hbm[1].0 - 9.9e14 / 3.35e12).abs() < 1e-6 && hbm[1].1 == 9.9e14, "{hbm:?}");
    assert!(!p.series[2].line, "a kernel is a point, not a line");
    let mut bad = roof();
    bad.points[0].1 = 0.0;
    let e = roofline::plot(&bad).unwrap_err();
    assert!(e.to_string().contains("gemm"), "{e}");
}
