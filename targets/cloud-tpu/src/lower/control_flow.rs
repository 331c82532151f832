//! Control flow: `If` → `stablehlo.if` (both branches lowered as regions), `Loop` and `Scan` →
//! `stablehlo.while` whose state is (iteration, [condition,] carried values, scan output buffers). Scan
//! outputs are written into buffers of their final (static) shape with `dynamic_update_slice`, so a Loop with
//! scan outputs lowers only when its trip count is known (its output shape is then static); the opset 8 Scan
//! (batch axis) runs one while loop per batch entry. Region bodies reference outer values directly (these regions are not isolated
//! from above), so captured inputs need no plumbing.

use tpu_sdk_core::ir::ops::control_flow::{IfAttrs, LoopAttrs, ScanAttrs};
use tpu_sdk_core::ir::{DType, Graph, Node};

use super::emit::{ty, Cx, V};
use super::lower_nodes;
use crate::error::Result;

/// Lowers region `g` with its inputs bound to `args` into `cx` (inside a region being written); returns the
/// SSA values of its outputs.
fn region(cx: &mut Cx, g: &Graph, args: &[V]) -> Result<Vec<V>> {
    let mut inner = cx.nested(g, args);
    lower_nodes(&mut inner, g)?;
    let outs = g.outputs.iter().map(|&o| inner.value(o)).collect::<Result<Vec<_>>>()?;
    cx.absorb(inner);
    Ok(outs)
}

/// `%a, %b : t1, t2` (or `%a : t` / empty).
fn operands(vs: &[V]) -> (String, String) {
    (vs.iter().map(|v| v.name.clone()).collect::<Vec<_>>().join(", "), vs.iter().map(V::ty).collect::<Vec<_>>().join(", "))
}

/// The results of a multi-result op named `name`.
fn results(name: &str, types: &[(DType, Vec<usize>)]) -> Vec<V> {
    types
        .iter()
        .enumerate()
        .map(|(k, (d, s))| V { name: if types.len() == 1 { name.to_string() } else { format!("{name}#{k}") }, dtype: *d, shape: s.clone() })
        .collect()
}

/// A one-element condition as `tensor<i1>`.
fn scalar_cond(cx: &mut Cx, c: V) -> V {
    let c = if c.dtype == DType::Bool {
        c
    } else {
        let zero = cx.splat_like(0.0, &c);
        cx.compare("NE", &c, &zero)
    };
    cx.reshape(&c, &[])
}

pub(super) fn if_op(cx: &mut Cx, node: &Node, a: &IfAttrs) -> Result<Vec<V>> {
    for (label, why) in ["then_branch", "else_branch"].iter().zip(&a.unrunnable) {
        if let Some(why) = why {
            return Err(cx.unsupported(
                node,
                format!(
                    "{label} cannot run with the input shapes the model was loaded with ({why}); a TPU program needs both branches: give the inputs the condition depends on fixed values (`--bind NAME=VALUE`, or their .npy with `run`) so that the If folds to the branch they take"
                ),
            ));
        }
    }
    let c = cx.input(node, 0)?;
    let cond = scalar_cond(cx, c);
    let caps = (1..node.inputs.len()).map(|i| cx.input(node, i)).collect::<Result<Vec<_>>>()?;
    let types: Vec<(DType, Vec<usize>)> = (0..node.outputs.len()).map(|k| cx.out(node, k)).collect();
    let tys: Vec<String> = types.iter().map(|(d, s)| ty(*d, s)).collect();
    let name = cx.fresh();
    let count = if types.len() > 1 { format!(":{}", types.len()) } else { String::new() };
    cx.line(format_args!("    {name}{count} = \"stablehlo.if\"({}) ({{", cond.name));
    for (k, (label, g)) in [("then_branch", &a.then_branch), ("else_branch", &a.else_branch)].into_iter().enumerate() {
        if k == 1 {
            cx.line("    }, {");
        }
        let saved = cx.begin_region();
        let outs = region(cx, g, &caps)?;
        for (j, (o, (d, s))) in outs.iter().zip(&types).enumerate() {
            if o.dtype != *d || &o.shape != s {
                return Err(cx.unsupported(
                    node,
                    format!("{label} gives {} {:?} for output {j}, the If's static type is {d} {s:?}; TPU programs need both branches to agree", o.dtype, o.shape),
                ));
            }
        }
        let (names, ts) = operands(&outs);
        cx.line(format_args!("      \"stablehlo.return\"({names}) : ({ts}) -> ()"));
        cx.end_region(saved);
    }
    let loc = cx.loc();
    cx.line(format_args!("    }}) : ({}) -> ({}){loc}", cond.ty(), tys.join(", ")));
    Ok(results(&name, &types))
}

/// Writes `stablehlo.while` over `init`; `cond` writes the condition region from the block arguments and
/// returns its i1 value, `body` the body region and returns the next state.
fn while_loop(
    cx: &mut Cx,
    init: &[V],
    cond: impl FnOnce(&mut Cx, &[V]) -> Result<V>,
    body: impl FnOnce(&mut Cx, &[V]) -> Result<Vec<V>>,
) -> Result<Vec<V>> {
    let name = cx.fresh();
    let args: Vec<V> = init.iter().enumerate().map(|(i, v)| V { name: format!("{name}_a{i}"), dtype: v.dtype, shape: v.shape.clone() }).collect();
    let binds: Vec<String> = args.iter().zip(init).map(|(a, v)| format!("{} = {}", a.name, v.name)).collect();
    let (_, tys) = operands(init);
    let count = if init.len() > 1 { format!(":{}", init.len()) } else { String::new() };
    cx.line(format_args!("    {name}{count} = stablehlo.while({}) : {tys}", binds.join(", ")));
    cx.line("    cond {");
    let saved = cx.begin_region();
    let c = cond(cx, &args)?;
    cx.line(format_args!("      stablehlo.return {} : {}", c.name, c.ty()));
    cx.end_region(saved);
    cx.line("    } do {");
    let saved = cx.begin_region();
    let next = body(cx, &args)?;
    let (names, ts) = operands(&next);
    cx.line(format_args!("      stablehlo.return {names} : {ts}"));
    cx.end_region(saved);
    cx.line("    }");
    let types: Vec<(DType, Vec<usize>)> = init.iter().map(|v| (v.dtype, v.shape.clone())).collect();
    Ok(results(&name, &types))
}

/// `buf` with `update` (rank of `buf`, size 1 at `axis`) written at `index` along `axis`.
fn update_at(cx: &mut Cx, buf: &V, update: &V, axis: usize, index: &V) -> V {
    let zero = cx.scalar(0.0, DType::I64);
    let idx: Vec<String> = (0..buf.rank()).map(|d| if d == axis { index.name.clone() } else { zero.name.clone() }).collect();
    let idx_tys = vec![ty(DType::I64, &[]); buf.rank()].join(", ");
    let sep = if idx.is_empty() { "" } else { ", " };
    cx.emit(
        format!(
            "stablehlo.dynamic_update_slice {}, {}{sep}{} : ({}, {}{sep}{idx_tys}) -> {}",
            buf.name,
            update.name,
            idx.join(", "),
            buf.ty(),
            update.ty(),
            buf.ty()
        ),
        buf.dtype,
        buf.shape.clone(),
    )
}

/// Index `index` of `axis` of `x`, that axis removed.
fn slice_at(cx: &mut Cx, x: &V, axis: usize, index: &V) -> V {
    let zero = cx.scalar(0.0, DType::I64);
    let idx: Vec<String> = (0..x.rank()).map(|d| if d == axis { index.name.clone() } else { zero.name.clone() }).collect();
    let idx_tys = vec![ty(DType::I64, &[]); x.rank()].join(", ");
    let mut sizes = x.shape.clone();
    sizes[axis] = 1;
    let sizes_txt: Vec<String> = sizes.iter().map(|s| s.to_string()).collect();
    let s = cx.emit(
        format!(
            "stablehlo.dynamic_slice {}, {}, sizes = [{}] : ({}, {idx_tys}) -> {}",
            x.name,
            idx.join(", "),
            sizes_txt.join(", "),
            x.ty(),
            ty(x.dtype, &sizes)
        ),
        x.dtype,
        sizes,
    );
    let mut shape = x.shape.clone();
    shape.remove(axis);
    cx.reshape(&s, &shape)
}

/// `len - 1 - t` when `reverse`, else `t`.
fn position(cx: &mut Cx, t: &V, len: usize, reverse: bool) -> V {
    if !reverse {
        return t.clone();
    }
    let last = cx.scalar(len as f64 - 1.0, DType::I64);
    cx.sub(&last, t)
}

pub(super) fn loop_op(cx: &mut Cx, node: &Node, a: &LoopAttrs) -> Result<Vec<V>> {
    let n = a.num_carried;
    let body = &a.body;
    let k = body.outputs.len() - 1 - n;
    let m = cx.opt_input(node, 0)?;
    let m = match m {
        Some(m) => cx.reshape(&m, &[]),
        None if k > 0 => return Err(cx.unsupported(node, "a Loop with scan outputs needs a trip count for a static TPU program")),
        None => cx.scalar(i64::MAX as f64, DType::I64),
    };
    let c0 = match cx.opt_input(node, 1)? {
        Some(c) => scalar_cond(cx, c),
        None => cx.scalar(1.0, DType::Bool),
    };
    let carried = (0..n).map(|i| cx.input(node, 2 + i)).collect::<Result<Vec<_>>>()?;
    let caps = (2 + n..node.inputs.len()).map(|i| cx.input(node, i)).collect::<Result<Vec<_>>>()?;
    for (i, c) in carried.iter().enumerate() {
        let (d, s) = cx.out(node, i);
        if c.dtype != d || c.shape != s {
            return Err(cx.unsupported(node, format!("carried value {i} changes type across iterations; TPU programs need a fixed shape")));
        }
    }
    let mut init = vec![cx.scalar(0.0, DType::I64), c0];
    init.extend(carried.iter().cloned());
    for j in 0..k {
        let (d, s) = cx.out(node, n + j);
        init.push(cx.splat(0.0, d, &s));
    }
    if k > 0 && cx.out(node, n).1.first() == Some(&0) {
        // a trip count of 0: no iteration, and no body to write (its update of 0 scan rows would not be valid)
        return Ok(init[2..].to_vec());
    }
    let outs = while_loop(
        cx,
        &init,
        |cx, args| {
            let lt = cx.compare("LT", &args[0], &m);
            Ok(cx.binary("and", &lt, &args[1]))
        },
        |cx, args| {
            let mut body_args: Vec<V> = args[..2 + n].to_vec();
            body_args.extend(caps.iter().cloned());
            let outs = region(cx, body, &body_args)?;
            let one = cx.scalar(1.0, DType::I64);
            let mut next = vec![cx.add(&args[0], &one)];
            let c = scalar_cond(cx, outs[0].clone());
            next.push(c);
            for i in 0..n {
                if outs[1 + i].dtype != args[2 + i].dtype || outs[1 + i].shape != args[2 + i].shape {
                    return Err(cx.unsupported(node, format!("the body changes the shape of carried value {i}")));
                }
                next.push(outs[1 + i].clone());
            }
            for j in 0..k {
                let buf = &args[2 + n + j];
                let mut s = vec![1];
                s.extend_from_slice(&outs[1 + n + j].shape);
                let upd = cx.reshape(&outs[1 + n + j], &s);
                next.push(update_at(cx, buf, &upd, 0, &args[0]));
            }
            Ok(next)
        },
    )?;
    Ok(outs[2..].to_vec())
}

pub(super) fn scan_op(cx: &mut Cx, node: &Node, a: &ScanAttrs) -> Result<Vec<V>> {
    let ins = (0..node.inputs.len()).map(|i| cx.input(node, i)).collect::<Result<Vec<_>>>()?;
    let types: Vec<(DType, Vec<usize>)> = (0..node.outputs.len()).map(|k| cx.out(node, k)).collect();
    if !a.batched {
        return scan_once(cx, a, &ins, &types);
    }
    // opset 8: every state and scan input has a leading batch axis; one scan per batch entry (unrolled, the
    // batch size is static), results stacked back along axis 0
    let nb = a.num_state + a.num_scan_inputs;
    let batch = ins.first().and_then(|v| v.shape.first().copied()).ok_or_else(|| cx.unsupported(node, "inputs need a batch axis"))?;
    let per_types: Vec<(DType, Vec<usize>)> = types.iter().map(|(d, s)| (*d, s[1..].to_vec())).collect();
    let mut parts: Vec<Vec<V>> = vec![Vec::new(); types.len()];
    for b in 0..batch {
        let mut entry = Vec::with_capacity(ins.len());
        for (i, v) in ins.iter().enumerate() {
            if i < nb {
                let s = cx.slice_axis(v, 0, b, b + 1);
                entry.push(cx.reshape(&s, &v.shape[1..]));
            } else {
                entry.push(v.clone());
            }
        }
        let outs = scan_once(cx, a, &entry, &per_types)?;
        for (p, (o, (_, s))) in parts.iter_mut().zip(outs.iter().zip(&types)) {
            let mut one = s.clone();
            one[0] = 1;
            p.push(cx.reshape(o, &one));
        }
    }
    Ok(parts.iter().map(|p| cx.concat(p, 0)).collect())
}

/// One Scan (opset 9 semantics) over `ins` (state, scan inputs, captures) with outputs of `types`.
fn scan_once(cx: &mut Cx, a: &ScanAttrs, ins: &[V], types: &[(DType, Vec<usize>)]) -> Result<Vec<V>> {
    let (n, m) = (a.num_state, a.num_scan_inputs);
    let body = &a.body;
    let k = body.outputs.len() - n;
    let len = if m > 0 { ins[n].shape[a.input_axes[0]] } else { 0 };
    let len_v = cx.scalar(len as f64, DType::I64);
    let mut init = vec![cx.scalar(0.0, DType::I64)];
    init.extend(ins[..n].iter().cloned());
    for (d, s) in &types[n..n + k] {
        init.push(cx.splat(0.0, *d, s));
    }
    let outs = while_loop(
        cx,
        &init,
        |cx, args| Ok(cx.compare("LT", &args[0], &len_v)),
        |cx, args| {
            let t = &args[0];
            let mut body_args: Vec<V> = args[1..1 + n].to_vec();
            for j in 0..m {
                let p = position(cx, t, len, a.input_reverse[j]);
                body_args.push(slice_at(cx, &ins[n + j], a.input_axes[j], &p));
            }
            body_args.extend(ins[n + m..].iter().cloned());
            let outs = region(cx, body, &body_args)?;
            let one = cx.scalar(1.0, DType::I64);
            let mut next = vec![cx.add(t, &one)];
            next.extend(outs[..n].iter().cloned());
            for j in 0..k {
                let buf = &args[1 + n + j];
                let axis = a.output_axes[j];
                let mut s = outs[n + j].shape.clone();
                s.insert(axis.min(s.len()), 1);
                let upd = cx.reshape(&outs[n + j], &s);
                let p = position(cx, t, len, a.output_reverse[j]);
                next.push(update_at(cx, buf, &upd, axis, &p));
            }
            Ok(next)
        },
    )?;
    Ok(outs[1..].to_vec())
}
