//! Graph optimisation passes, each its own unit: [`const_fold`], [`dce`], [`fold_bias_add`], [`fold_batchnorm`],
//! [`fuse_activation`], [`simplify_shapes`], [`sink_transposes`], [`upsample`]. [`optimize`] runs them in a
//! sensible order. [`fuse_silu`] is the CPU runtime's own: it runs when a session is planned.

pub mod const_fold;
pub mod dce;
pub mod fold_batchnorm;
pub mod fold_bias_add;
pub mod fuse_activation;
pub mod fuse_silu;
pub mod inline_if;
pub mod kv_cache;
pub mod logits_row;
pub mod simplify_shapes;
pub mod sink_transposes;
pub mod upsample;

use crate::ir::{verify, Graph};
use crate::Result;

/// Runs every pass and verifies the result.
pub fn optimize(g: &mut Graph) -> Result<()> {
    // control-flow regions first (each is a graph of its own; its inputs and outputs stay as they are)
    for n in &mut g.nodes {
        for r in crate::ir::ops::control_flow::regions_mut(&mut n.op) {
            optimize(r)?;
        }
    }
    const_fold::run(g)?;
    if inline_if::run(g)? > 0 {
        const_fold::run(g)?;
    }
    simplify_shapes::run(g);
    upsample::run(g);
    if sink_transposes::run(g) > 0 {
        simplify_shapes::run(g);
    }
    fold_bias_add::run(g);
    fold_batchnorm::run(g);
    // the passes above leave dead nodes (the transposes sink_transposes replaced) that still count as
    // readers: without this, a Conv whose old NHWC transpose is dead keeps its Relu as a separate pass
    dce::run(g);
    fuse_activation::run(g);
    dce::run(g);
    verify::verify(g)
}

/// Whether `v` is one of the graph outputs.
pub(crate) fn is_graph_output(g: &Graph, v: crate::ir::ValueId) -> bool {
    g.outputs.contains(&v)
}

/// Removes the nodes whose flag in `remove` (one per node) is set.
pub(crate) fn remove_nodes(g: &mut Graph, remove: &[bool]) {
    let mut it = remove.iter();
    g.nodes.retain(|_| !*it.next().expect("one flag per node"));
}
