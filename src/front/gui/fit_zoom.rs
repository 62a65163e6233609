//! Keeps the window usable when it is smaller than its layout needs: a 900×600 screen at the
//! desktop's 200 % scale gives 450×300 points, far under the 800×500 the panes are laid out
//! for (menus overlapped, windows opened off-screen). Below that size the window zooms out
//! just enough to get the points back (never under half size); at full size again it goes
//! back to the user's zoom.

/// The size in points the panes are laid out for (also the window's minimum size).
pub(crate) const MIN_POINTS: [f32; 2] = [800.0, 500.0];
/// The smallest zoom used to fit (text at half size is the limit of legible).
const MIN_ZOOM: f32 = 0.5;

/// The zoom that fits a window of `size_px` pixels, at the desktop's `native_ppp` pixels per
/// point, into [`MIN_POINTS`]; None when it fits at 1.
fn fitting_zoom(size_px: [f32; 2], native_ppp: f32) -> Option<f32> {
    let w = size_px[0] / native_ppp / MIN_POINTS[0];
    let h = size_px[1] / native_ppp / MIN_POINTS[1];
    let z = w.min(h);
    (z < 1.0).then(|| z.max(MIN_ZOOM))
}

/// What the window remembers between frames.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct FitZoom {
    /// The zoom in force before fitting began (to restore), while fitted.
    before: Option<f32>,
}

impl FitZoom {
    /// Called once a frame: zooms out while the window is too small, back when it is not.
    pub(crate) fn update(&mut self, ctx: &egui::Context) {
        let Some(native) = ctx.native_pixels_per_point() else {
            return;
        };
        let px = ctx.content_rect().size() * ctx.pixels_per_point();
        match fitting_zoom([px.x, px.y], native) {
            Some(z) => {
                self.before.get_or_insert(ctx.zoom_factor());
                if (ctx.zoom_factor() - z).abs() > 0.01 {
                    ctx.set_zoom_factor(z);
                }
            }
            None => {
                if let Some(z) = self.before.take() {
                    ctx.set_zoom_factor(z);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fits_small_windows_only() {
        // 900×600 px at 200 %: 450×300 pt → zoom 0.5625 (the width decides) … 0.6 (height).
        assert_eq!(fitting_zoom([900.0, 600.0], 2.0), Some(0.5625));
        // 1920×1080 at 200 %: 960×540 pt fits.
        assert_eq!(fitting_zoom([1920.0, 1080.0], 2.0), None);
        // 900×600 at 100 % fits; a tiny window never goes under half size.
        assert_eq!(fitting_zoom([900.0, 600.0], 1.0), None);
        assert_eq!(fitting_zoom([300.0, 200.0], 2.0), Some(MIN_ZOOM));
    }
}
