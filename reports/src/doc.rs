//! The one document model of gpusim's reports: a title, sections of blocks (headings,
//! paragraphs, key-value provenance blocks, sortable tables, figures holding the SVG of a plot
//! of this crate), rendered to one self-contained HTML file by [`crate::html`]. Plain data:
//! the CLI builds documents from runs, studies, correlations and calibrations.

use crate::Error;

/// A whole report.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Document {
    pub title: String,
    /// A line under the title (e.g. what produced the document).
    pub subtitle: String,
    pub sections: Vec<Section>,
}

/// A section: a heading (listed in the contents) and its blocks.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Section {
    pub heading: String,
    pub blocks: Vec<Block>,
}

/// One block of a section.
#[derive(Clone, Debug, PartialEq)]
pub enum Block {
    /// A heading within a section (not in the contents).
    Subheading(String),
    Paragraph(String),
    /// A highlighted line (a warning, a verdict).
    Note(String),
    /// Label–value pairs, in order (provenance).
    KeyValues(Vec<(String, String)>),
    Table(Table),
    Figure(Figure),
}

/// A table whose columns sort on a click of their header.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Table {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Cell>>,
}

/// A table cell: text, or a number shown as `text` and sorted by `value`.
#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    Text(String),
    Number { value: f64, text: String },
}

impl Cell {
    /// A number shown with `decimals` decimals.
    pub fn num(value: f64, decimals: usize) -> Cell {
        Cell::Number { value, text: format!("{value:.decimals$}") }
    }
    pub fn text(s: impl Into<String>) -> Cell {
        Cell::Text(s.into())
    }
}

/// An inline SVG figure with its caption.
#[derive(Clone, Debug, PartialEq)]
pub struct Figure {
    pub caption: String,
    /// An `<svg>` element, as this crate's `render_svg` functions give it.
    pub svg: String,
}

impl Figure {
    /// A figure from a rendering result, e.g. `Figure::new("…", lines::render_svg(&p))`.
    pub fn new(caption: impl Into<String>, svg: Result<String, Error>) -> Result<Figure, Error> {
        Ok(Figure { caption: caption.into(), svg: svg? })
    }
}

impl Section {
    pub fn new(heading: impl Into<String>) -> Section {
        Section { heading: heading.into(), blocks: Vec::new() }
    }
    pub fn push(&mut self, b: Block) -> &mut Section {
        self.blocks.push(b);
        self
    }
}
