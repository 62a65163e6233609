//! The process colours as plain RGB (the window draws them; the View hands out their slots,
//! see `engine::view`), and the CIEDE2000 colour difference that keeps a process's band
//! apart from the bands beside it.

/// How many colours each palette has.
pub(crate) const SLOTS: usize = 20;

/// An sRGB colour.
type Rgb = [u8; 3];

/// Process colours on a dark background: hues of Tableau 20 and Okabe–Ito without the blue
/// and purple of the memory bar ("used", "reserved"), the red of the memory limit, the orange
/// of leak warnings and any grey, most distinct first.
pub(crate) const STANDARD: [Rgb; SLOTS] = [
    [89, 161, 79],   // green
    [237, 201, 72],  // yellow
    [23, 190, 207],  // cyan
    [250, 180, 170], // salmon
    [0, 120, 120],   // teal
    [188, 189, 34],  // lime
    [250, 40, 210],  // magenta
    [0, 158, 115],   // bluish green
    [120, 220, 240], // sky
    [182, 153, 45],  // olive
    [140, 209, 125], // light green
    [140, 60, 120],  // plum
    [100, 220, 180], // mint
    [255, 214, 165], // peach
    [0, 110, 160],   // deep sky
    [219, 219, 141], // khaki
    [120, 105, 0],   // dark olive
    [247, 182, 230], // light pink
    [60, 110, 40],   // dark green
    [150, 110, 100], // rosy brown
];

/// A palette for colour-blind eyes: Okabe–Ito and Paul Tol's schemes without their oranges,
/// reds and blues (the warnings', the limit's and "used" memory's colours), picked so that each
/// stays apart from the others as seen with deuteranopia and protanopia too, most distinct
/// first.
pub(crate) const COLOR_BLIND: [Rgb; SLOTS] = [
    [0, 158, 115],   // bluish green
    [140, 210, 210], // pale teal
    [240, 228, 66],  // yellow
    [0, 102, 90],    // dark teal
    [170, 230, 200], // pale mint
    [102, 102, 17],  // dark olive
    [204, 121, 167], // reddish purple
    [170, 170, 0],   // mustard
    [200, 190, 130], // khaki
    [250, 240, 170], // cream
    [0, 130, 130],   // sea
    [68, 187, 153],  // mint
    [250, 200, 220], // light pink
    [153, 153, 51],  // olive
    [34, 136, 51],   // green
    [187, 204, 51],  // pear
    [221, 204, 119], // sand
    [17, 119, 51],   // dark green
    [220, 180, 230], // lilac
    [180, 0, 190],   // violet
];

/// The smallest CIEDE2000 difference between a process's colour and the colour of a band
/// beside it in the stack (the View's slots keep it, see `engine::view`): about what tells two
/// colours apart at a glance.
pub(crate) const NEIGHBOUR_DELTA_E: f64 = 15.0;

/// A colour on a light background: the same hue, a little darker.
pub(crate) fn on_light(c: Rgb) -> Rgb {
    // One factor for all: the palette's light and dark shades stay apart.
    c.map(|v| (f32::from(v) * 0.85).round() as u8)
}

/// Every shade slot `slot` takes: each palette on a dark and on a light background (none
/// for a slot past the palettes).
fn shades(slot: usize) -> Option<[Rgb; 4]> {
    let s = *STANDARD.get(slot)?;
    let c = *COLOR_BLIND.get(slot)?;
    Some([s, on_light(s), c, on_light(c)])
}

/// True when slots `a` and `b` differ by at least [`NEIGHBOUR_DELTA_E`] in every palette and
/// theme (slots past the palettes never are: their colours are not fixed).
pub(crate) fn far_apart(a: usize, b: usize) -> bool {
    match (shades(a), shades(b)) {
        (Some(x), Some(y)) => x
            .iter()
            .zip(y.iter())
            .all(|(p, q)| delta_e2000(*p, *q) >= NEIGHBOUR_DELTA_E),
        _ => false,
    }
}

/// CIEDE2000 difference of two sRGB colours.
pub(crate) fn delta_e2000(a: Rgb, b: Rgb) -> f64 {
    delta_e2000_lab(lab(a), lab(b))
}

/// CIELAB (D65) of an sRGB colour.
pub fn lab(c: Rgb) -> [f64; 3] {
    let lin = |v: u8| {
        let v = f64::from(v) / 255.0;
        if v <= 0.04045 {
            v / 12.92
        } else {
            ((v + 0.055) / 1.055).powf(2.4)
        }
    };
    let [r, g, b] = c.map(lin);
    let x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047;
    let y = 0.2126 * r + 0.7152 * g + 0.0722 * b;
    let z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883;
    let f = |t: f64| {
        if t > 216.0 / 24389.0 {
            t.cbrt()
        } else {
            (24389.0 / 27.0 * t + 16.0) / 116.0
        }
    };
    let (fx, fy, fz) = (f(x), f(y), f(z));
    [116.0 * fy - 16.0, 500.0 * (fx - fy), 200.0 * (fy - fz)]
}

/// CIEDE2000 difference of two CIELAB colours (Sharma, Wu and Dalal, 2005).
fn delta_e2000_lab([l1, a1, b1]: [f64; 3], [l2, a2, b2]: [f64; 3]) -> f64 {
    let c_mean = (a1.hypot(b1) + a2.hypot(b2)) / 2.0;
    let g = 0.5 * (1.0 - (c_mean.powi(7) / (c_mean.powi(7) + 25f64.powi(7))).sqrt());
    let (a1p, a2p) = ((1.0 + g) * a1, (1.0 + g) * a2);
    let (c1, c2) = (a1p.hypot(b1), a2p.hypot(b2));
    let hue = |b: f64, a: f64| b.atan2(a).to_degrees().rem_euclid(360.0);
    let (h1, h2) = (hue(b1, a1p), hue(b2, a2p));
    let zero = c1 * c2 == 0.0;
    let dh = match h2 - h1 {
        _ if zero => 0.0,
        d if d > 180.0 => d - 360.0,
        d if d < -180.0 => d + 360.0,
        d => d,
    };
    let d_big_h = 2.0 * (c1 * c2).sqrt() * (dh / 2.0).to_radians().sin();
    let l_mean = (l1 + l2) / 2.0;
    let cp_mean = (c1 + c2) / 2.0;
    let h_mean = if zero {
        h1 + h2
    } else if (h1 - h2).abs() <= 180.0 {
        (h1 + h2) / 2.0
    } else if h1 + h2 < 360.0 {
        (h1 + h2 + 360.0) / 2.0
    } else {
        (h1 + h2 - 360.0) / 2.0
    };
    let cos = |deg: f64| deg.to_radians().cos();
    let t =
        1.0 - 0.17 * cos(h_mean - 30.0) + 0.24 * cos(2.0 * h_mean) + 0.32 * cos(3.0 * h_mean + 6.0)
            - 0.20 * cos(4.0 * h_mean - 63.0);
    let d_theta = 30.0 * (-((h_mean - 275.0) / 25.0).powi(2)).exp();
    let rc = 2.0 * (cp_mean.powi(7) / (cp_mean.powi(7) + 25f64.powi(7))).sqrt();
    let sl = 1.0 + 0.015 * (l_mean - 50.0).powi(2) / (20.0 + (l_mean - 50.0).powi(2)).sqrt();
    let sc = 1.0 + 0.045 * cp_mean;
    let sh = 1.0 + 0.015 * cp_mean * t;
    let rt = -(2.0 * d_theta).to_radians().sin() * rc;
    let (dl, dc, dhh) = ((l2 - l1) / sl, (c2 - c1) / sc, d_big_h / sh);
    (dl * dl + dc * dc + dhh * dhh + rt * dc * dhh).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pairs of Sharma, Wu and Dalal's CIEDE2000 test data and their published differences.
    #[test]
    fn delta_e2000_matches_the_published_test_data() {
        let cases = [
            ([50.0, 2.6772, -79.7751], [50.0, 0.0, -82.7485], 2.0425),
            ([50.0, 2.5, 0.0], [50.0, 0.0, -2.5], 4.3065),
            ([50.0, 2.5, 0.0], [73.0, 25.0, -18.0], 27.1492),
            ([50.0, -0.001, 2.49], [50.0, 0.0011, -2.49], 4.7461),
            (
                [60.2574, -34.0099, 36.2677],
                [60.4626, -34.1751, 39.4387],
                1.2644,
            ),
            (
                [22.7233, 20.0904, -46.694],
                [23.0331, 14.973, -42.5619],
                2.0373,
            ),
            (
                [90.8027, -2.0831, 1.441],
                [91.1528, -1.6435, 0.0447],
                1.4441,
            ),
            ([2.0776, 0.0795, -1.135], [0.9033, -0.0636, -0.5514], 0.9082),
        ];
        for (a, b, want) in cases {
            let got = delta_e2000_lab(a, b);
            assert!((got - want).abs() < 1e-3, "{a:?} {b:?}: {got} != {want}");
            assert!((delta_e2000_lab(b, a) - want).abs() < 1e-3);
        }
    }

    /// The window's reserved colours: "used" blue, "reserved" purple, the limit's and the
    /// warnings' reds, the forecast's orange (and their light-theme shades), parked blue and
    /// unattributed grey.
    const RESERVED: [Rgb; 9] = [
        [76, 145, 255],
        [150, 110, 200],
        [230, 80, 80],
        [235, 90, 70],
        [240, 150, 40],
        [90, 160, 235],
        [150, 150, 150],
        [150, 70, 0],
        [180, 40, 20],
    ];

    /// No process colour of either palette, on either theme, comes within the neighbour
    /// distance of a colour the window gives a meaning (the colour-blind palette used Okabe-Ito's
    /// orange and blue before).
    #[test]
    fn no_process_colour_looks_like_a_reserved_one() {
        for slot in 0..SLOTS {
            for (i, c) in shades(slot).into_iter().flatten().enumerate() {
                for r in RESERVED {
                    let d = delta_e2000(c, r);
                    assert!(
                        d >= NEIGHBOUR_DELTA_E,
                        "slot {slot} shade {i} {c:?} ~ {r:?}: {d:.1}"
                    );
                }
            }
        }
    }

    /// Each slot has far slots to choose from (the View picks a new band's slot apart from the
    /// bands beside it): at least eight for every slot, so two neighbours never leave none.
    #[test]
    fn every_slot_has_many_far_slots() {
        for a in 0..SLOTS {
            let far = (0..SLOTS).filter(|b| *b != a && far_apart(a, *b)).count();
            assert!(far >= 8, "slot {a}: {far} far slots");
            assert!(!far_apart(a, a));
        }
        assert!(!far_apart(0, SLOTS));
    }
}
