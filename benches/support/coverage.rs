//! What a frame hands a rasterizer: its triangles and the pixels they cover (shared by
//! `examples/window_frames` and the window's layout tests).

/// The triangles of `meshes` and the pixels they cover at `ppp` pixels per point (overlaps
/// counted each time: what a rasterizer shades).
pub fn coverage(meshes: &[egui::ClippedPrimitive], ppp: f32) -> (usize, f64) {
    let (mut triangles, mut area) = (0, 0f64);
    for cp in meshes {
        let egui::epaint::Primitive::Mesh(m) = &cp.primitive else {
            continue;
        };
        triangles += m.indices.len() / 3;
        for t in m.indices.chunks_exact(3) {
            let at = |i: u32| {
                m.vertices
                    .get(i as usize)
                    .map_or(egui::Pos2::ZERO, |v| v.pos)
            };
            let (a, b, c) = (at(t[0]), at(t[1]), at(t[2]));
            area += f64::from(((b.x - a.x) * (c.y - a.y) - (c.x - a.x) * (b.y - a.y)).abs() / 2.0);
        }
    }
    (triangles, area * f64::from(ppp * ppp))
}
