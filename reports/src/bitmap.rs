//! The PNG backend: plotters' `BitMapBackend` with text drawn by our own glyph loop.
//!
//! plotters 0.3.7 draws `ab_glyph` text by putting each glyph's bitmap at the pen position,
//! without the glyph's left side bearing, so a glyph with a wide bearing sits too far left
//! ("12" looks like "1 2"). [`PngBackend::draw_text`] is plotters' default `draw_text` with
//! the glyphs placed at their outline bounds ([`draw_glyphs`]); the vertical placement, the
//! layout box (hence anchors and every other layout decision) and all other drawing are
//! plotters' own.

use ab_glyph::{Font, FontRef, ScaleFont, point};
use plotters::backend::BitMapBackend;
use plotters_backend::text_anchor::{HPos, VPos};
use plotters_backend::{BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingBackend, DrawingErrorKind};

use crate::Error;
use crate::font::DEJAVU_SANS;

type BitmapError = <BitMapBackend<'static> as DrawingBackend>::ErrorType;
type Result<T> = std::result::Result<T, DrawingErrorKind<BitmapError>>;

/// A `BitMapBackend` writing a file, drawing all text in [`DEJAVU_SANS`].
pub(crate) struct PngBackend<'a> {
    inner: BitMapBackend<'a>,
    font: FontRef<'static>,
}

impl<'a> PngBackend<'a> {
    pub fn new(path: &'a std::path::Path, size: (u32, u32)) -> std::result::Result<PngBackend<'a>, Error> {
        let font = FontRef::try_from_slice(DEJAVU_SANS).map_err(|_| Error::Font)?;
        Ok(PngBackend { inner: BitMapBackend::new(path, size), font })
    }
}

/// Calls `pixel(x, y, coverage)` for every pixel of `text` at `size` pixels, relative to the
/// text's origin: the baseline at `size / 2` below it, as plotters' ab_glyph drawing has it.
fn draw_glyphs<E>(
    font: &FontRef<'static>,
    size: f64,
    text: &str,
    mut pixel: impl FnMut(i32, i32, f32) -> std::result::Result<(), E>,
) -> std::result::Result<(), E> {
    let scaled = font.as_scaled(size as f32);
    let baseline = (size / 2.0) as f32;
    let mut pen = 0f32;
    let mut prev = None;
    for c in text.chars() {
        let id = scaled.glyph_id(c);
        if let Some(p) = prev {
            pen += scaled.kern(p, id);
        }
        prev = Some(id);
        let glyph = id.with_scale_and_position(scaled.scale(), point(pen, baseline));
        if let Some(outline) = scaled.outline_glyph(glyph) {
            let min = outline.px_bounds().min;
            let mut covered = Vec::new();
            outline.draw(|x, y, c| covered.push((x, y, c)));
            for (x, y, c) in covered {
                pixel(min.x as i32 + x as i32, min.y as i32 + y as i32, c)?;
            }
        }
        pen += scaled.h_advance(id);
    }
    Ok(())
}

impl DrawingBackend for PngBackend<'_> {
    type ErrorType = BitmapError;

    fn get_size(&self) -> (u32, u32) {
        self.inner.get_size()
    }

    fn ensure_prepared(&mut self) -> Result<()> {
        self.inner.ensure_prepared()
    }

    fn present(&mut self) -> Result<()> {
        self.inner.present()
    }

    fn draw_pixel(&mut self, point: BackendCoord, color: BackendColor) -> Result<()> {
        self.inner.draw_pixel(point, color)
    }

    fn draw_line<S: BackendStyle>(&mut self, from: BackendCoord, to: BackendCoord, style: &S) -> Result<()> {
        self.inner.draw_line(from, to, style)
    }

    fn draw_rect<S: BackendStyle>(&mut self, ul: BackendCoord, br: BackendCoord, style: &S, fill: bool) -> Result<()> {
        self.inner.draw_rect(ul, br, style, fill)
    }

    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(&mut self, path: I, style: &S) -> Result<()> {
        self.inner.draw_path(path, style)
    }

    fn draw_circle<S: BackendStyle>(&mut self, c: BackendCoord, r: u32, style: &S, fill: bool) -> Result<()> {
        self.inner.draw_circle(c, r, style, fill)
    }

    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(&mut self, v: I, style: &S) -> Result<()> {
        self.inner.fill_polygon(v, style)
    }

    fn blit_bitmap(&mut self, pos: BackendCoord, size: (u32, u32), src: &[u8]) -> Result<()> {
        self.inner.blit_bitmap(pos, size, src)
    }

    fn draw_text<S: BackendTextStyle>(&mut self, text: &str, style: &S, pos: BackendCoord) -> Result<()> {
        let color = style.color();
        if color.alpha == 0.0 {
            return Ok(());
        }
        let ((min_x, min_y), (max_x, max_y)) =
            style.layout_box(text).map_err(|e| DrawingErrorKind::FontError(Box::new(e)))?;
        let (width, height) = (max_x - min_x, max_y - min_y);
        let dx = match style.anchor().h_pos {
            HPos::Left => 0,
            HPos::Right => -width,
            HPos::Center => -width / 2,
        };
        let dy = match style.anchor().v_pos {
            VPos::Top => 0,
            VPos::Center => -height / 2,
            VPos::Bottom => -height,
        };
        let trans = style.transform();
        let (w, h) = self.get_size();
        let font = self.font.clone();
        draw_glyphs(&font, style.size(), text, |x, y, coverage| {
            let (x, y) = trans.transform(x + dx - min_x, y + dy - min_y);
            let (x, y) = (pos.0 + x, pos.1 + y);
            if x >= 0 && x < w as i32 && y >= 0 && y < h as i32 {
                self.inner.draw_pixel((x, y), color.mix(f64::from(coverage)))
            } else {
                Ok(())
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glyphs_keep_their_left_side_bearing() {
        let font = FontRef::try_from_slice(DEJAVU_SANS).unwrap();
        let mut xs = Vec::new();
        draw_glyphs::<()>(&font, 20.0, "1", |x, _, c| {
            if c > 0.5 {
                xs.push(x);
            }
            Ok(())
        })
        .unwrap();
        // DejaVu Sans' "1" starts about 0.11 em right of its origin (plotters draws it at 0).
        assert!(xs.iter().min().is_some_and(|&x| x >= 1), "{xs:?}");
    }
}
