//! Nearest upsampling written as a repeat: `Unsqueeze` (or `Reshape`) inserting a 1 after axis `a`, `Tile`
//! repeating only that new axis `f` times, `Reshape` merging the two (numpy's `repeat(x, f, axis=a)`, which
//! Keras' UpSampling2D becomes in TFLite, once per spatial axis) is a nearest Resize of axis `a` by `f`.
//! For a 4-D `x` and a power-of-two `f` (so that every implementation's source index `floor(i·in/out)` is
//! exact) the three nodes become one Resize (nearest, asymmetric coordinates, floor) — which the TFLite
//! export writes as RESIZE_NEAREST_NEIGHBOR, an Edge TPU op, where TILE is not. Axis 1 (H of a value held in
//! NHWC order) is resized between two Transposes that put it among the spatial axes (2, 3) of the IR's NCHW
//! convention; the export turns such transposes into layout changes.

use crate::ir::{CoordTransform, DType, Graph, Node, NearestMode, Op, ResizeAttrs, ResizeMode, Tensor};

/// Rewrites every eligible repeat (see the module docs); returns how many.
pub fn run(g: &mut Graph) -> usize {
    let uses = g.use_counts();
    let producers = g.producers();
    let mut plans = Vec::new();
    for (k, n) in g.nodes.iter().enumerate() {
        if let Some(p) = plan(g, &uses, &producers, n) {
            plans.push((k, p));
        }
    }
    if plans.is_empty() {
        return 0;
    }
    let count = plans.len();
    let nodes = std::mem::take(&mut g.nodes);
    let mut out = Vec::with_capacity(nodes.len() + 2 * count);
    let mut plans = plans.into_iter().peekable();
    for (k, n) in nodes.into_iter().enumerate() {
        match plans.next_if(|(pk, _)| *pk == k) {
            Some((_, (x, axis, factor))) => rewrite(g, &mut out, n, x, axis, factor),
            None => out.push(n),
        }
    }
    g.nodes = out;
    count
}

/// For the final Reshape `n` of a repeat: its source `x`, the repeated axis and the factor.
fn plan(g: &Graph, uses: &[usize], producers: &[Option<usize>], n: &Node) -> Option<(crate::ir::ValueId, usize, usize)> {
    let Op::Reshape { .. } = n.op else { return None };
    let t = n.input(0)?;
    let tile = &g.nodes[producers[t.0]?];
    let Op::Tile = tile.op else { return None };
    let u = tile.input(0)?;
    let ins = &g.nodes[producers[u.0]?];
    if !matches!(ins.op, Op::Unsqueeze { .. } | Op::Reshape { .. }) {
        return None;
    }
    let x = ins.input(0)?;
    let single = |v: crate::ir::ValueId| uses[v.0] == 1 && !super::is_graph_output(g, v);
    if !single(t) || !single(u) || g.value(x).dtype != DType::F32 {
        return None;
    }
    let (xs, us, ys) = (&g.value(x).shape, &g.value(u).shape, &g.value(n.outputs[0]).shape);
    if xs.len() != 4 || us.len() != 5 {
        return None;
    }
    let reps = g.value(tile.input(1)?).constant.as_ref()?.to_i64_vec();
    // The inserted axis a + 1: u is x with a 1 there; only it is tiled.
    let a = (0..4).find(|&a| us[a + 1] == 1 && us[..a + 1] == xs[..a + 1] && us[a + 2..] == xs[a + 1..])?;
    let f = *reps.get(a + 1)?;
    let only = reps.iter().enumerate().all(|(i, &r)| r == 1 || i == a + 1);
    if a == 0 || !only || f < 2 || (f as u64).count_ones() != 1 {
        return None;
    }
    let f = f as usize;
    let mut want = xs.clone();
    want[a] *= f;
    (*ys == want).then_some((x, a, f))
}

/// The Resize (between Transposes for axis 1) that replaces the final Reshape `n`.
fn rewrite(g: &mut Graph, out: &mut Vec<Node>, n: Node, x: crate::ir::ValueId, axis: usize, factor: usize) {
    let y = n.outputs[0];
    let attrs = ResizeAttrs {
        mode: ResizeMode::Nearest,
        coord: CoordTransform::Asymmetric,
        nearest: NearestMode::Floor,
        cubic_coeff_a: -0.75,
        exclude_outside: false,
        extrapolation_value: 0.0,
    };
    let sizes = |g: &mut Graph, s: &[usize]| g.add_constant(format!("{}/sizes", n.name), Tensor::from_i64(vec![4], s.iter().map(|&d| d as i64).collect()));
    let ys = g.value(y).shape.clone();
    if axis >= 2 {
        let s = sizes(g, &ys);
        out.push(Node { name: n.name.clone(), op: Op::Resize(attrs), inputs: vec![Some(x), None, None, Some(s)], outputs: vec![y], keep_float: false });
        return;
    }
    // Axis 1: NHWC-ordered [N, H, W, C] → [N, C, H, W], resize H, back.
    let xs = g.value(x).shape.clone();
    let nchw = |s: &[usize]| vec![s[0], s[3], s[1], s[2]];
    let xt = g.add_value(format!("{}/to_nchw", n.name), DType::F32, nchw(&xs));
    let rt = g.add_value(format!("{}/resized", n.name), DType::F32, nchw(&ys));
    let s = sizes(g, &nchw(&ys));
    debug_assert_eq!(nchw(&ys)[2], nchw(&xs)[2] * factor);
    out.push(Node { name: format!("{}/to_nchw", n.name), op: Op::Transpose { perm: vec![0, 3, 1, 2] }, inputs: vec![Some(x)], outputs: vec![xt], keep_float: false });
    out.push(Node { name: format!("{}/resize", n.name), op: Op::Resize(attrs), inputs: vec![Some(xt), None, None, Some(s)], outputs: vec![rt], keep_float: false });
    out.push(Node { name: n.name, op: Op::Transpose { perm: vec![0, 2, 3, 1] }, inputs: vec![Some(rt)], outputs: vec![y], keep_float: false });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::builder::GraphBuilder;
    use crate::runtime::{CpuEval, Session};

    /// Keras UpSampling2D((2, 2)) on an NHWC-ordered value as imported: repeat along H (axis 1), then W
    /// (axis 2); and an NCHW repeat of W by 4. The rewritten graph has Resizes, no Tile, and computes
    /// exactly what the repeats compute.
    #[test]
    fn repeats_become_nearest_resizes_with_the_same_values() {
        let mut b = GraphBuilder::with_eval("t", &CpuEval);
        let x = b.input("x", DType::F32, &[1, 3, 5, 2]);
        let repeat = |b: &mut GraphBuilder, v, axis: usize, f: i64| {
            let axes = b.constant("axes", Tensor::from_i64(vec![1], vec![axis as i64 + 1]));
            let u = b.op(Op::Unsqueeze { axes: None }, &[v, axes]).unwrap();
            let mut reps = vec![1i64; 5];
            reps[axis + 1] = f;
            let r = b.constant("reps", Tensor::from_i64(vec![5], reps));
            let t = b.op(Op::Tile, &[u, r]).unwrap();
            let mut s: Vec<i64> = b.graph().value(v).shape.iter().map(|&d| d as i64).collect();
            s[axis] *= f;
            b.reshape(t, &s).unwrap()
        };
        let h = repeat(&mut b, x, 1, 2);
        let w = repeat(&mut b, h, 2, 2);
        b.output(w);
        let w4 = repeat(&mut b, x, 3, 4);
        b.output(w4);
        // Not a repeat: a factor of 3 stays a Tile.
        let w3 = repeat(&mut b, x, 3, 3);
        b.output(w3);
        let g = b.finish().unwrap();
        let mut r = g.clone();
        assert_eq!(run(&mut r), 3);
        crate::passes::optimize(&mut r).unwrap();
        assert_eq!(r.nodes.iter().filter(|n| matches!(n.op, Op::Resize(_))).count(), 3);
        assert_eq!(r.nodes.iter().filter(|n| matches!(n.op, Op::Tile)).count(), 1);
        let feed = vec![Tensor::from_f32(vec![1, 3, 5, 2], (0..30).map(|i| i as f32 * 0.5 - 3.0).collect())];
        let want = Session::new(g).unwrap().run(&feed).unwrap();
        let got = Session::new(r).unwrap().run(&feed).unwrap();
        assert_eq!(got, want);
    }
}
