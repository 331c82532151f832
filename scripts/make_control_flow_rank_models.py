"""Writes small ONNX models whose Scan and If outputs have a shape known only at run time into the folder given as
argv[1] (committed as core/tests/data/control_flow_rank/, for core/tests/control_flow_ranks.rs). Ops after them
need their rank (Softmax's default axis -1, Concat and ReduceSum at negative axes), so a wrong rank shows as a
wrong result or a failed import. The run-time lengths come from an int64 input `k` (kk = k + 1 elements kept by a
Slice, clamped to the row).

Good models (compared with onnxruntime):
  scan_run_time_rank  Scan (opset 17) with a scalar state first, then a state vector of run-time length, two
                      scan outputs of run-time length (one stacked at scan_output_axes -1); after it Softmax
                      of each and a Concat at axis -1.
  if_run_time_rank    If on a data-dependent condition whose branches give a [2, ?] matrix (different lengths
                      per branch) and a scalar; after it Softmax and ReduceSum at axis -1.
Bad model:
  bad_if_ranks        an If (node 'branch') whose then_branch gives a [2, ?] matrix and else_branch a [?] vector,
                      then a Softmax (node 'soft', axis -1) of it: the rank is unknown, the Softmax is refused.
"""

import os
import sys

import numpy as np
from onnx import TensorProto as T, helper as h

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_control_flow_models import const, model, save, vi  # noqa: E402


def kept(prefix="kk"):
    """Nodes computing `kk` = k + 1 (int64 [1]) from the graph input k."""
    return [const("one_i", np.array([1], np.int64)), h.make_node("Add", ["k", "one_i"], [prefix])]


def scan_run_time_rank():
    body = h.make_graph(
        [
            const("zero_b", np.array([0], np.int64)),
            h.make_node("Slice", ["xs", "zero_b", "kk"], ["part"]),
            h.make_node("ReduceSum", ["xs"], ["rowsum"], keepdims=0),
            h.make_node("Add", ["s", "rowsum"], ["s_out"]),
            h.make_node("Add", ["v", "part"], ["v_out"]),
            h.make_node("Mul", ["part", "s_out"], ["y"]),
            h.make_node("Neg", ["part"], ["z"]),
        ],
        "scan_body",
        [vi("s", T.FLOAT, []), vi("v", T.FLOAT, None), vi("xs", T.FLOAT, [4])],
        [vi("s_out", T.FLOAT, []), vi("v_out", T.FLOAT, None), vi("y", T.FLOAT, None), vi("z", T.FLOAT, None)],
    )
    nodes = kept() + [
        const("zero", np.array([0], np.int64)),
        const("s0", np.float32(0.5)),
        h.make_node("Slice", ["v_src", "zero", "kk"], ["v0"]),
        h.make_node("Scan", ["s0", "v0", "x"], ["s_last", "v_last", "ys", "zs"], body=body, num_scan_inputs=1, scan_output_axes=[0, -1]),
        h.make_node("Softmax", ["ys"], ["ys_soft"]),
        h.make_node("Softmax", ["v_last"], ["v_soft"]),
        h.make_node("Transpose", ["zs"], ["zs_t"]),
        h.make_node("Concat", ["ys", "zs_t"], ["yz"], axis=-1),
    ]
    g = h.make_graph(
        nodes,
        "scan_run_time_rank",
        [vi("x", T.FLOAT, [5, 4]), vi("v_src", T.FLOAT, [4]), vi("k", T.INT64, [1])],
        [vi("s_last", T.FLOAT, []), vi("ys_soft", T.FLOAT, None), vi("v_soft", T.FLOAT, None), vi("yz", T.FLOAT, None)],
    )
    return model(g)


def branch(name, nodes, outs):
    return h.make_graph(nodes, name, [], outs)


def if_run_time_rank():
    then_g = branch(
        "then",
        [
            const("t0", np.array([0], np.int64)),
            const("t1", np.array([1], np.int64)),
            h.make_node("Slice", ["x", "t0", "kk", "t1"], ["tm"]),
            h.make_node("ReduceMax", ["x"], ["ts"], keepdims=0),
        ],
        [vi("tm", T.FLOAT, None), vi("ts", T.FLOAT, [])],
    )
    else_g = branch(
        "else",
        [
            const("e0", np.array([0], np.int64)),
            const("e1", np.array([1], np.int64)),
            h.make_node("Add", ["kk", "e1"], ["kk2"]),
            h.make_node("Neg", ["x"], ["nx"]),
            h.make_node("Slice", ["nx", "e0", "kk2", "e1"], ["em"]),
            h.make_node("ReduceMin", ["x"], ["es"], keepdims=0),
        ],
        [vi("em", T.FLOAT, None), vi("es", T.FLOAT, [])],
    )
    nodes = kept() + [
        h.make_node("ReduceSum", ["x"], ["total"], keepdims=0),
        const("zero_f", np.float32(0.0)),
        h.make_node("Greater", ["total", "zero_f"], ["c"]),
        h.make_node("If", ["c"], ["m", "sc"], then_branch=then_g, else_branch=else_g, name="branch"),
        h.make_node("Softmax", ["m"], ["m_soft"]),
        const("last", np.array([-1], np.int64)),
        h.make_node("ReduceSum", ["m", "last"], ["m_rows"], keepdims=0),
        h.make_node("Mul", ["m_rows", "sc"], ["rows_scaled"]),
    ]
    g = h.make_graph(
        nodes,
        "if_run_time_rank",
        [vi("x", T.FLOAT, [2, 3]), vi("k", T.INT64, [1])],
        [vi("m_soft", T.FLOAT, None), vi("rows_scaled", T.FLOAT, None)],
    )
    return model(g)


def bad_if_ranks():
    then_g = branch(
        "then",
        [const("t0", np.array([0], np.int64)), const("t1", np.array([1], np.int64)), h.make_node("Slice", ["x", "t0", "kk", "t1"], ["tm"])],
        [vi("tm", T.FLOAT, None)],
    )
    else_g = branch(
        "else",
        [
            const("flat", np.array([-1], np.int64)),
            const("e0", np.array([0], np.int64)),
            h.make_node("Reshape", ["x", "flat"], ["xf"]),
            h.make_node("Slice", ["xf", "e0", "kk"], ["em"]),
        ],
        [vi("em", T.FLOAT, None)],
    )
    nodes = kept() + [
        h.make_node("ReduceSum", ["x"], ["total"], keepdims=0),
        const("zero_f", np.float32(0.0)),
        h.make_node("Greater", ["total", "zero_f"], ["c"]),
        h.make_node("If", ["c"], ["m"], then_branch=then_g, else_branch=else_g, name="branch"),
        h.make_node("Softmax", ["m"], ["m_soft"], name="soft"),
    ]
    g = h.make_graph(nodes, "bad_if_ranks", [vi("x", T.FLOAT, [2, 3]), vi("k", T.INT64, [1])], [vi("m_soft", T.FLOAT, None)])
    return model(g)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    # no shapes on the run-time values (so no rank hints from annotations): the checker wants one on each
    for f in [scan_run_time_rank, if_run_time_rank, bad_if_ranks]:
        save(out, f.__name__, f(), check=False)


if __name__ == "__main__":
    main()
