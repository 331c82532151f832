//! The readable text form of a graph (what `tpu-sdk inspect` prints) and its cost summary.

use std::collections::BTreeMap;
use std::fmt::{self, Write};

use super::{Graph, Op, Value, ValueId};

/// Totals over a graph.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Summary {
    /// Number of nodes.
    pub nodes: usize,
    /// Count of each op kind.
    pub ops: BTreeMap<String, usize>,
    /// Parameters (elements of float constants read by nodes).
    pub parameters: usize,
    /// Multiply-accumulates of Conv/ConvTranspose/Gemm/MatMul per inference.
    pub macs: u64,
}

/// Multiply-accumulates of one node (0 for ops that are not products).
pub fn node_macs(g: &Graph, n: usize) -> u64 {
    let node = &g.nodes[n];
    let shape = |i: usize| node.input(i).map(|v| g.value(v).shape.clone()).unwrap_or_default();
    let out = node.outputs.first().map(|&o| g.value(o)).filter(|v| !v.dynamic);
    let Some(out) = out else { return 0 };
    let out_n = out.numel() as u64;
    match &node.op {
        Op::Conv(_) => {
            let w = shape(1);
            if w.len() < 2 {
                return 0;
            }
            out_n * w[1..].iter().product::<usize>() as u64
        }
        Op::ConvTranspose(_) => {
            let (x, w) = (shape(0), shape(1));
            if w.len() < 2 || x.is_empty() {
                return 0;
            }
            x.iter().product::<usize>() as u64 * w[1..].iter().product::<usize>() as u64
        }
        Op::Gemm { trans_a, .. } => {
            let a = shape(0);
            if a.len() != 2 {
                return 0;
            }
            out_n * if *trans_a { a[0] } else { a[1] } as u64
        }
        Op::MatMul => {
            let a = shape(0);
            out_n * a.last().copied().unwrap_or(0) as u64
        }
        _ => 0,
    }
}

/// Totals of `g`.
pub fn summary(g: &Graph) -> Summary {
    let mut s = Summary { nodes: g.nodes.len(), parameters: g.parameter_count(), ..Default::default() };
    for (i, n) in g.nodes.iter().enumerate() {
        *s.ops.entry(n.op.name()).or_default() += 1;
        s.macs += node_macs(g, i);
    }
    s
}

/// `f32[1,3,224,224]`, or `f32[?]` for a shape known only at run time.
pub fn type_string(v: &Value) -> String {
    if v.dynamic {
        return format!("{}[?]", v.dtype);
    }
    let dims: Vec<String> = v.shape.iter().map(|d| d.to_string()).collect();
    format!("{}[{}]", v.dtype, dims.join(","))
}

/// Human form of a count: 4.2M, 310k.
pub fn human(n: u64) -> String {
    match n {
        n if n >= 10_000_000_000 => format!("{:.1}G", n as f64 / 1e9),
        n if n >= 1_000_000_000 => format!("{:.2}G", n as f64 / 1e9),
        n if n >= 1_000_000 => format!("{:.2}M", n as f64 / 1e6),
        n if n >= 10_000 => format!("{:.1}k", n as f64 / 1e3),
        n => n.to_string(),
    }
}

fn name_of(g: &Graph, v: ValueId) -> String {
    let val = g.value(v);
    if let Some(c) = val.constant.as_ref().filter(|_| val.numel() <= 4 && !val.dynamic) {
        let vals: Vec<String> = c.to_f64_vec().iter().map(|x| format!("{x}")).collect();
        return format!("{}={{{}}}", val.name, vals.join(","));
    }
    val.name.clone()
}

impl fmt::Display for Graph {
    /// The text form: inputs, one line per node (`%out: type = Op(inputs)  # name`), outputs, totals. The
    /// regions of control-flow nodes (If branches, Loop/Scan bodies) follow their node, indented.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "graph '{}'", self.name)?;
        write_body(f, self, "  ")?;
        let s = summary(self);
        let ops: Vec<String> = s.ops.iter().map(|(k, v)| format!("{k}×{v}")).collect();
        writeln!(f, "{} nodes, {} parameters, {} MACs", s.nodes, human(s.parameters as u64), human(s.macs))?;
        write!(f, "ops: {}", ops.join(" "))
    }
}

/// Inputs, nodes (with their regions) and outputs of `g`, each line starting with `indent`.
fn write_body(f: &mut fmt::Formatter<'_>, g: &Graph, indent: &str) -> fmt::Result {
    for &i in &g.inputs {
        writeln!(f, "{indent}input  %{}: {}", g.value(i).name, type_string(g.value(i)))?;
    }
    for (idx, n) in g.nodes.iter().enumerate() {
        let mut line = String::from(indent);
        let outs: Vec<String> = n.outputs.iter().map(|&o| format!("%{}: {}", g.value(o).name, type_string(g.value(o)))).collect();
        line.push_str(&outs.join(", "));
        let ins: Vec<String> = n
            .inputs
            .iter()
            .map(|i| match i {
                Some(v) => format!("%{}", name_of(g, *v)),
                None => "_".into(),
            })
            .collect();
        write!(line, " = {}({})", n.op.name(), ins.join(", ")).ok();
        let macs = node_macs(g, idx);
        if macs > 0 {
            write!(line, "  [{} MACs]", human(macs)).ok();
        }
        if !n.name.is_empty() {
            write!(line, "  # {}", n.name).ok();
        }
        writeln!(f, "{line}")?;
        let labels: &[&str] = match &n.op {
            Op::If(_) => &["then", "else"],
            Op::Loop(_) | Op::Scan(_) => &["body"],
            _ => &[],
        };
        for (k, (label, r)) in labels.iter().zip(super::ops::control_flow::regions(&n.op)).enumerate() {
            if let Op::If(a) = &n.op {
                if let Some(why) = &a.unrunnable[k] {
                    writeln!(f, "{indent}  {label} '{}' cannot run with these shapes (an error if taken): {why}", r.name)?;
                    continue;
                }
            }
            writeln!(f, "{indent}  {label} '{}' {{", r.name)?;
            write_body(f, r, &format!("{indent}    "))?;
            writeln!(f, "{indent}  }}")?;
        }
    }
    for &o in &g.outputs {
        writeln!(f, "{indent}output %{}: {}", g.value(o).name, type_string(g.value(o)))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{builder::GraphBuilder, ConvAttrs, DType, Tensor};

    #[test]
    fn counts_conv_macs_and_prints_types() {
        let mut b = GraphBuilder::new("m");
        let x = b.input("x", DType::F32, &[1, 3, 8, 8]);
        let w = b.constant("w", Tensor::zeros(DType::F32, vec![4, 3, 3, 3]));
        let attrs = ConvAttrs {
            kernel_shape: vec![],
            strides: vec![],
            dilations: vec![],
            pads: vec![],
            auto_pad: crate::ir::AutoPad::NotSet,
            group: 1,
            activation: None,
        };
        let y = b.named_op("conv1", "y", Op::Conv(attrs), &[Some(x), Some(w), None]).unwrap();
        b.output(y);
        let g = b.finish().unwrap();
        // 4*6*6 outputs, 3*3*3 MACs each
        assert_eq!(summary(&g).macs, 4 * 36 * 27);
        assert_eq!(summary(&g).parameters, 108);
        let text = g.to_string();
        assert!(text.contains("%y: f32[1,4,6,6] = Conv(%x, %w, _)"), "{text}");
        assert!(text.contains("# conv1"));
    }
}
