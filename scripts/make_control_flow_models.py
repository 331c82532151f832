"""Writes small ONNX models with control flow (If, Loop, Scan) into the folder given as argv[1], for
cli/tests/control_flow.rs: good models (run on the CPU target and compared with onnxruntime) and bad ones
(each must be refused with a clear error).

Good models (float inputs only, so random inputs drive them):
  if_nested      If on a data-dependent condition; both branches use outer values (captures), an outer
                 initializer, and the then-branch holds a nested If using a value two scopes up.
  loop_scan      Loop with a constant trip count and a data-dependent condition that may stop it early;
                 carried state, a scan output (its length known only at run time), a captured outer value.
  loop_while     Loop without trip count (a while loop): doubles until the sum passes a threshold.
  loop_plain     Loop with a constant trip count, no condition, a captured initializer (for the export paths).
  loop_if        Loop with its trip count an input, a data-dependent condition and an If in its body (for the
                 TFLite export: WHILE with an IF in its body subgraph).
  loop_swap      Loop whose two carried values trade places each iteration, then an If with a constant branch.
  loop_grow      Loop whose carried value grows each iteration (Concat): a body input known only at run time.
  loop_symbolic  Loop over an input with a symbolic batch dim (loaded with --dim batch=3).
  loop_stack     Loop with a constant trip count, a constant true condition passed through, two carried values
                 (a running sum and an RNN-like state) and two scan outputs, one scaled by the iteration number
                 (for the TFLite export: unrolled).
  loop_long      Loop with scan outputs and 5000 iterations: too many to unroll (the TFLite export refuses it).
  loop_count_scan  Loop whose trip count is an int64 input, a carried value, a captured input and two scan outputs
                 (for the TFLite export: a WHILE growing the scan outputs, their length known only at run time).
  loop_stop_scan Loop with a constant trip count (10) and a condition computed in the body that stops it early,
                 a scan output; float inputs only (for the int8 export too).
  loop_scan_used loop_scan followed by a ReduceSum (node 'total') of its scan output (the TFLite export refuses it:
                 such a scan output may only be a graph output).
  scan_axes      Scan (opset 16) with reversed input, scan axis 1, output axis 1 and a reversed output.
  scan8          Scan opset 8 form (batch axis, no sequence_lens).
Bad models:
  bad_loop_body      a Loop body taking 2 inputs where the node passes 3.
  bad_if_outputs     an If whose branches give 1 and 2 outputs.
  bad_deep_nesting   20 Ifs nested in each other.
  bad_loop_2_62      a Loop with trip count 2^62 and a condition that stays true.
  bad_region_bomb    an If branch holding a 4 TB ConstantOfShape (the memory budget reaches into regions).
"""

import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh

OPSET = 17


def model(graph, opset=OPSET):
    m = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def save(out, name, m, check=True):
    if check:
        onnx.checker.check_model(m, full_check=True)
    onnx.save(m, os.path.join(out, name + ".onnx"))


def vi(name, dtype, shape):
    return h.make_tensor_value_info(name, dtype, shape)


def const(name, arr):
    return h.make_node("Constant", [], [name], value=nh.from_array(np.asarray(arr), name))


def if_nested():
    # inner If (inside then): uses 'w' (initializer of the main graph) and 'x' (two scopes up)
    inner_then = h.make_graph([h.make_node("Mul", ["x", "w"], ["it"])], "inner_then", [], [vi("it", T.FLOAT, [2, 3])])
    inner_else = h.make_graph([h.make_node("Sub", ["x", "w"], ["ie"])], "inner_else", [], [vi("ie", T.FLOAT, [2, 3])])
    then_g = h.make_graph(
        [
            h.make_node("ReduceMax", ["x"], ["mx"], keepdims=0),
            const("zero_t", np.float32(0.0)),
            h.make_node("Greater", ["mx", "zero_t"], ["c2"]),
            h.make_node("If", ["c2"], ["inner"], then_branch=inner_then, else_branch=inner_else),
            h.make_node("Add", ["inner", "b"], ["t_out"]),
        ],
        "then",
        [],
        [vi("t_out", T.FLOAT, [2, 3])],
    )
    else_g = h.make_graph([h.make_node("Tanh", ["b"], ["e_out"])], "else", [], [vi("e_out", T.FLOAT, [2, 3])])
    g = h.make_graph(
        [
            h.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
            const("zero", np.float32(0.0)),
            h.make_node("Greater", ["s", "zero"], ["c"]),
            h.make_node("Relu", ["x"], ["b"]),
            h.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g),
        ],
        "if_nested",
        [vi("x", T.FLOAT, [2, 3])],
        [vi("y", T.FLOAT, [2, 3])],
        [nh.from_array(np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], np.float32), "w")],
    )
    return model(g)


def loop_scan():
    body = h.make_graph(
        [
            h.make_node("Mul", ["acc_in", "k"], ["prod"]),
            h.make_node("Add", ["prod", "x"], ["acc_out"]),
            h.make_node("Cast", ["i"], ["i_f"], to=T.FLOAT),
            h.make_node("Mul", ["acc_out", "i_f"], ["scan_out"]),
            h.make_node("ReduceSum", ["acc_out"], ["total"], keepdims=0),
            const("limit", np.float32(40.0)),
            h.make_node("Less", ["total", "limit"], ["cond_out"]),
        ],
        "body",
        [vi("i", T.INT64, []), vi("cond_in", T.BOOL, []), vi("acc_in", T.FLOAT, [2, 3])],
        [vi("cond_out", T.BOOL, []), vi("acc_out", T.FLOAT, [2, 3]), vi("scan_out", T.FLOAT, [2, 3])],
    )
    g = h.make_graph(
        [
            h.make_node("Abs", ["x0"], ["x"]),
            h.make_node("Sigmoid", ["x0"], ["k"]),
            h.make_node("Loop", ["M", "", "x"], ["acc", "scans"], body=body),
        ],
        "loop_scan",
        [vi("x0", T.FLOAT, [2, 3])],
        [vi("acc", T.FLOAT, [2, 3]), vi("scans", T.FLOAT, [None, 2, 3])],
        [nh.from_array(np.array(7, np.int64), "M")],
    )
    return model(g)


def loop_while():
    body = h.make_graph(
        [
            const("two", np.float32(2.0)),
            h.make_node("Mul", ["v_in", "two"], ["v_out"]),
            h.make_node("ReduceSum", ["v_out"], ["s"], keepdims=0),
            h.make_node("Less", ["s", "threshold"], ["cond_out"]),
        ],
        "body",
        [vi("i", T.INT64, []), vi("cond_in", T.BOOL, []), vi("v_in", T.FLOAT, [4])],
        [vi("cond_out", T.BOOL, []), vi("v_out", T.FLOAT, [4])],
    )
    g = h.make_graph(
        [
            h.make_node("Abs", ["x"], ["a"]),
            const("eps", np.float32(0.01)),
            h.make_node("Add", ["a", "eps"], ["v0"]),
            const("true", np.array(True)),
            h.make_node("Loop", ["", "true", "v0"], ["y"], body=body),
        ],
        "loop_while",
        [vi("x", T.FLOAT, [4])],
        [vi("y", T.FLOAT, [4])],
        [nh.from_array(np.array(1000.0, np.float32), "threshold")],
    )
    return model(g)


def loop_symbolic():
    body = h.make_graph(
        [
            h.make_node("Add", ["acc_in", "x"], ["acc_out"]),
            h.make_node("Identity", ["cond_in"], ["cond_out"]),
            h.make_node("Shape", ["acc_out"], ["shape_out"]),
        ],
        "body",
        [vi("i", T.INT64, []), vi("cond_in", T.BOOL, []), vi("acc_in", T.FLOAT, ["batch", 4])],
        [vi("cond_out", T.BOOL, []), vi("acc_out", T.FLOAT, ["batch", 4]), vi("shape_out", T.INT64, [2])],
    )
    g = h.make_graph(
        [h.make_node("Loop", ["M", "", "x"], ["y", "shapes"], body=body)],
        "loop_symbolic",
        [vi("x", T.FLOAT, ["batch", 4])],
        [vi("y", T.FLOAT, ["batch", 4]), vi("shapes", T.INT64, [3, 2])],
        [nh.from_array(np.array(3, np.int64), "M")],
    )
    return model(g)


def loop_stack():
    body = h.make_graph(
        [
            h.make_node("Identity", ["cond_in"], ["cond_out"]),
            h.make_node("Mul", ["acc_in", "k"], ["decayed"]),
            h.make_node("Add", ["decayed", "x"], ["acc_out"]),
            h.make_node("Cast", ["i"], ["i_f"], to=T.FLOAT),
            h.make_node("Mul", ["acc_out", "i_f"], ["scaled"]),
            h.make_node("ReduceSum", ["acc_out", "rows"], ["col_sum"], keepdims=0),
            h.make_node("Mul", ["col_sum", "w"], ["drive"]),
            h.make_node("Mul", ["h_in", "u"], ["recur"]),
            h.make_node("Add", ["drive", "recur"], ["pre"]),
            h.make_node("Tanh", ["pre"], ["h_out"]),
        ],
        "body",
        [vi("i", T.INT64, []), vi("cond_in", T.BOOL, []), vi("acc_in", T.FLOAT, [2, 3]), vi("h_in", T.FLOAT, [3])],
        [vi("cond_out", T.BOOL, []), vi("acc_out", T.FLOAT, [2, 3]), vi("h_out", T.FLOAT, [3]), vi("scaled", T.FLOAT, [2, 3]),
         vi("h_out_scan", T.FLOAT, [3])],
    )
    # the second scan output is the new state itself (a body output listed twice)
    body.output[4].name = "h_out"
    g = h.make_graph(
        [
            h.make_node("Sigmoid", ["x"], ["k"]),
            const("true", np.array(True)),
            h.make_node("Loop", ["M", "true", "x", "h0"], ["acc", "h", "scaled_all", "h_all"], body=body, name="stack_loop"),
        ],
        "loop_stack",
        [vi("x", T.FLOAT, [2, 3]), vi("h0", T.FLOAT, [3])],
        [vi("acc", T.FLOAT, [2, 3]), vi("h", T.FLOAT, [3]), vi("scaled_all", T.FLOAT, [5, 2, 3]), vi("h_all", T.FLOAT, [5, 3])],
        [nh.from_array(np.array(5, np.int64), "M"), nh.from_array(np.array([0], np.int64), "rows"),
         nh.from_array(np.array([0.5, -1.0, 0.75], np.float32), "w"), nh.from_array(np.array([0.9, 0.5, -0.6], np.float32), "u")],
    )
    return model(g)


def loop_long():
    body = h.make_graph(
        [h.make_node("Identity", ["cond_in"], ["cond_out"]), h.make_node("Add", ["v_in", "x"], ["v_out"]), h.make_node("Neg", ["v_out"], ["y_t"])],
        "body",
        [vi("i", T.INT64, []), vi("cond_in", T.BOOL, []), vi("v_in", T.FLOAT, [3])],
        [vi("cond_out", T.BOOL, []), vi("v_out", T.FLOAT, [3]), vi("y_t", T.FLOAT, [3])],
    )
    g = h.make_graph(
        [h.make_node("Loop", ["M", "", "x"], ["v", "ys"], body=body, name="long_loop")],
        "loop_long",
        [vi("x", T.FLOAT, [3])],
        [vi("v", T.FLOAT, [3]), vi("ys", T.FLOAT, [5000, 3])],
        [nh.from_array(np.array(5000, np.int64), "M")],
    )
    return model(g)


def loop_count_scan():
    body = h.make_graph(
        [
            const("half", np.float32(0.5)),
            h.make_node("Mul", ["acc_in", "half"], ["decayed"]),
            h.make_node("Add", ["decayed", "x"], ["acc_out"]),
            h.make_node("Cast", ["i"], ["i_f"], to=T.FLOAT),
            h.make_node("Mul", ["acc_out", "i_f"], ["y_t"]),
            h.make_node("ReduceSum", ["acc_out", "axis1"], ["z_t"], keepdims=0),
            h.make_node("Identity", ["cond_in"], ["cond_out"]),
        ],
        "body",
        [vi("i", T.INT64, []), vi("cond_in", T.BOOL, []), vi("acc_in", T.FLOAT, [2, 3])],
        [vi("cond_out", T.BOOL, []), vi("acc_out", T.FLOAT, [2, 3]), vi("y_t", T.FLOAT, [2, 3]), vi("z_t", T.FLOAT, [2])],
    )
    g = h.make_graph(
        [const("axis1", np.array([1], np.int64)), h.make_node("Loop", ["m", "", "x"], ["acc", "ys", "zs"], body=body, name="count_loop")],
        "loop_count_scan",
        [vi("x", T.FLOAT, [2, 3]), vi("m", T.INT64, [])],
        [vi("acc", T.FLOAT, [2, 3]), vi("ys", T.FLOAT, [None, 2, 3]), vi("zs", T.FLOAT, [None, 2])],
    )
    return model(g)


def loop_stop_scan():
    body = h.make_graph(
        [
            const("grow", np.float32(1.5)),
            h.make_node("Mul", ["s_in", "grow"], ["scaled"]),
            h.make_node("Add", ["scaled", "x"], ["s_out"]),
            const("two", np.float32(2.0)),
            h.make_node("Mul", ["s_out", "two"], ["y_t"]),
            h.make_node("ReduceSum", ["s_out"], ["total"], keepdims=0),
            const("limit", np.float32(6.0)),
            h.make_node("Less", ["total", "limit"], ["cond_out"]),
        ],
        "body",
        [vi("i", T.INT64, []), vi("cond_in", T.BOOL, []), vi("s_in", T.FLOAT, [3])],
        [vi("cond_out", T.BOOL, []), vi("s_out", T.FLOAT, [3]), vi("y_t", T.FLOAT, [3])],
    )
    g = h.make_graph(
        [h.make_node("Loop", ["M", "", "x"], ["s", "ys"], body=body, name="stop_loop")],
        "loop_stop_scan",
        [vi("x", T.FLOAT, [3])],
        [vi("s", T.FLOAT, [3]), vi("ys", T.FLOAT, [None, 3])],
        [nh.from_array(np.array(10, np.int64), "M")],
    )
    return model(g)


def loop_scan_used():
    """loop_scan followed by a ReduceSum (node 'total') of its scan output."""
    m = loop_scan()
    g = m.graph
    g.node.append(h.make_node("ReduceSum", ["scans"], ["scans_total"], keepdims=0, name="total"))
    del g.output[1]
    g.output.append(vi("scans_total", T.FLOAT, []))
    g.name = "loop_scan_used"
    return m


def loop_plain():
    body = h.make_graph(
        [h.make_node("Identity", ["cond_in"], ["cond_out"]), h.make_node("Mul", ["v_in", "half"], ["m"]), h.make_node("Add", ["m", "x"], ["v_out"])],
        "body",
        [vi("i", T.INT64, []), vi("cond_in", T.BOOL, []), vi("v_in", T.FLOAT, [4])],
        [vi("cond_out", T.BOOL, []), vi("v_out", T.FLOAT, [4])],
    )
    g = h.make_graph(
        [h.make_node("Loop", ["M", "", "x"], ["y"], body=body, name="plain_loop")],
        "loop_plain",
        [vi("x", T.FLOAT, [4])],
        [vi("y", T.FLOAT, [4])],
        [nh.from_array(np.array(3, np.int64), "M"), nh.from_array(np.array(0.5, np.float32), "half")],
    )
    return model(g)


def loop_if():
    # a Loop whose trip count is an input, with a data-dependent condition, and an If inside its body: halve the
    # carried value while its sum is positive, else add the captured outer input; stop once the sum passes 20
    then_g = h.make_graph([h.make_node("Mul", ["v_in", "half"], ["t"])], "halve", [], [vi("t", T.FLOAT, [4])])
    else_g = h.make_graph([h.make_node("Add", ["v_in", "x"], ["e"])], "add_x", [], [vi("e", T.FLOAT, [4])])
    body = h.make_graph(
        [
            h.make_node("ReduceSum", ["v_in"], ["s"], keepdims=0),
            h.make_node("Greater", ["s", "zero"], ["pos"]),
            h.make_node("If", ["pos"], ["v_out"], then_branch=then_g, else_branch=else_g),
            h.make_node("ReduceSum", ["v_out"], ["s2"], keepdims=0),
            h.make_node("Less", ["s2", "limit"], ["cond_out"]),
        ],
        "body",
        [vi("i", T.INT64, []), vi("cond_in", T.BOOL, []), vi("v_in", T.FLOAT, [4])],
        [vi("cond_out", T.BOOL, []), vi("v_out", T.FLOAT, [4])],
    )
    g = h.make_graph(
        [h.make_node("Loop", ["n", "", "x"], ["y"], body=body, name="loop_with_if")],
        "loop_if",
        [vi("x", T.FLOAT, [4]), vi("n", T.INT64, [])],
        [vi("y", T.FLOAT, [4])],
        [nh.from_array(np.array(0.5, np.float32), "half"), nh.from_array(np.array(0.0, np.float32), "zero"),
         nh.from_array(np.array(20.0, np.float32), "limit")],
    )
    return model(g)


def loop_swap():
    # a Loop whose carried values trade places each iteration, (a, b) -> (b + 1, a), then an If whose then-branch
    # is a constant (for the TFLite export: a WHILE body output that is another slot's input)
    body = h.make_graph(
        [h.make_node("Identity", ["c"], ["co"]), h.make_node("Add", ["b", "one"], ["b1"]), h.make_node("Identity", ["a"], ["ao"])],
        "body",
        [vi("i", T.INT64, []), vi("c", T.BOOL, []), vi("a", T.FLOAT, [3]), vi("b", T.FLOAT, [3])],
        [vi("co", T.BOOL, []), vi("b1", T.FLOAT, [3]), vi("ao", T.FLOAT, [3])],
        [nh.from_array(np.array(1.0, np.float32), "one")],
    )
    then_g = h.make_graph([const("k", np.array([7, 8, 9], np.float32))], "constant", [], [vi("k", T.FLOAT, [3])])
    else_g = h.make_graph([h.make_node("Neg", ["x"], ["nx"])], "negate", [], [vi("nx", T.FLOAT, [3])])
    g = h.make_graph(
        [
            h.make_node("Loop", ["M", "", "x", "y"], ["p", "q"], body=body, name="swap_loop"),
            h.make_node("ReduceSum", ["p"], ["s"], keepdims=0),
            h.make_node("Greater", ["s", "zero"], ["pos"]),
            h.make_node("If", ["pos"], ["r"], then_branch=then_g, else_branch=else_g),
        ],
        "loop_swap",
        [vi("x", T.FLOAT, [3]), vi("y", T.FLOAT, [3])],
        [vi("p", T.FLOAT, [3]), vi("q", T.FLOAT, [3]), vi("r", T.FLOAT, [3])],
        [nh.from_array(np.array(3, np.int64), "M"), nh.from_array(np.array(0.0, np.float32), "zero")],
    )
    return model(g)


def loop_grow():
    body = h.make_graph(
        [
            h.make_node("Identity", ["cond_in"], ["cond_out"]),
            h.make_node("Concat", ["v_in", "x"], ["v_out"], axis=0),
            h.make_node("ReduceSum", ["v_out"], ["s"], keepdims=0),
        ],
        "body",
        [vi("i", T.INT64, []), vi("cond_in", T.BOOL, []), vi("v_in", T.FLOAT, [None, 2])],
        [vi("cond_out", T.BOOL, []), vi("v_out", T.FLOAT, [None, 2]), vi("s", T.FLOAT, [])],
    )
    g = h.make_graph(
        [h.make_node("Loop", ["M", "", "x"], ["y", "sums"], body=body)],
        "loop_grow",
        [vi("x", T.FLOAT, [1, 2])],
        [vi("y", T.FLOAT, [None, 2]), vi("sums", T.FLOAT, [None])],
        [nh.from_array(np.array(4, np.int64), "M")],
    )
    return model(g)


def scan_axes():
    body = h.make_graph(
        [
            h.make_node("Add", ["s_in", "col"], ["s_out"]),
            h.make_node("Mul", ["s_out", "col"], ["o"]),
        ],
        "body",
        [vi("s_in", T.FLOAT, [2]), vi("col", T.FLOAT, [2])],
        [vi("s_out", T.FLOAT, [2]), vi("o", T.FLOAT, [2])],
    )
    g = h.make_graph(
        [
            const("s0", np.zeros(2, np.float32)),
            h.make_node(
                "Scan",
                ["s0", "x"],
                ["s", "y"],
                body=body,
                num_scan_inputs=1,
                scan_input_axes=[-1],
                scan_input_directions=[1],
                scan_output_axes=[1],
                scan_output_directions=[1],
            ),
        ],
        "scan_axes",
        [vi("x", T.FLOAT, [2, 5])],
        [vi("s", T.FLOAT, [2]), vi("y", T.FLOAT, [2, 5])],
    )
    return model(g, 16)


def scan8():
    body = h.make_graph(
        [h.make_node("Add", ["s_in", "row"], ["s_out"]), h.make_node("Identity", ["s_out"], ["o"])],
        "body",
        [vi("s_in", T.FLOAT, [3]), vi("row", T.FLOAT, [3])],
        [vi("s_out", T.FLOAT, [3]), vi("o", T.FLOAT, [3])],
    )
    g = h.make_graph(
        [h.make_node("Scan", ["", "s0", "x"], ["s", "y"], body=body, num_scan_inputs=1, directions=[1])],
        "scan8",
        [vi("s0", T.FLOAT, [2, 3]), vi("x", T.FLOAT, [2, 4, 3])],
        [vi("s", T.FLOAT, [2, 3]), vi("y", T.FLOAT, [2, 4, 3])],
    )
    return model(g, 8)


def bad_loop_body():
    body = h.make_graph(
        [h.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body",
        [vi("i", T.INT64, []), vi("cond_in", T.BOOL, [])],
        [vi("cond_out", T.BOOL, [])],
    )
    g = h.make_graph(
        [h.make_node("Loop", ["M", "", "x"], ["y"], body=body, name="bad_loop")],
        "bad_loop_body",
        [vi("x", T.FLOAT, [2])],
        [vi("y", T.FLOAT, [2])],
        [nh.from_array(np.array(3, np.int64), "M")],
    )
    return model(g)


def bad_if_outputs():
    then_g = h.make_graph([h.make_node("Neg", ["x"], ["a"])], "then", [], [vi("a", T.FLOAT, [2])])
    else_g = h.make_graph(
        [h.make_node("Abs", ["x"], ["b"]), h.make_node("Neg", ["x"], ["c"])], "else", [], [vi("b", T.FLOAT, [2]), vi("c", T.FLOAT, [2])]
    )
    g = h.make_graph(
        [
            h.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
            const("zero", np.float32(0.0)),
            h.make_node("Greater", ["s", "zero"], ["c"]),
            h.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g, name="bad_if"),
        ],
        "bad_if_outputs",
        [vi("x", T.FLOAT, [2])],
        [vi("y", T.FLOAT, [2])],
    )
    return model(g)


def bad_deep_nesting(depth=20):
    inner = h.make_graph([h.make_node("Neg", ["x"], ["o0"])], "leaf", [], [vi("o0", T.FLOAT, [2])])
    for d in range(depth):
        other = h.make_graph([h.make_node("Abs", ["x"], [f"e{d}"])], f"else{d}", [], [vi(f"e{d}", T.FLOAT, [2])])
        inner = h.make_graph(
            [h.make_node("If", ["c"], [f"o{d + 1}"], then_branch=inner, else_branch=other)], f"then{d}", [], [vi(f"o{d + 1}", T.FLOAT, [2])]
        )
    other = h.make_graph([h.make_node("Abs", ["x"], ["top_e"])], "top_else", [], [vi("top_e", T.FLOAT, [2])])
    g = h.make_graph(
        [
            h.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
            const("zero", np.float32(0.0)),
            h.make_node("Greater", ["s", "zero"], ["c"]),
            h.make_node("If", ["c"], ["y"], then_branch=inner, else_branch=other, name="deep_if"),
        ],
        "bad_deep_nesting",
        [vi("x", T.FLOAT, [2])],
        [vi("y", T.FLOAT, [2])],
    )
    return model(g)


def bad_loop_2_62():
    body = h.make_graph(
        [h.make_node("Identity", ["cond_in"], ["cond_out"]), h.make_node("Neg", ["v_in"], ["v_out"])],
        "body",
        [vi("i", T.INT64, []), vi("cond_in", T.BOOL, []), vi("v_in", T.FLOAT, [2])],
        [vi("cond_out", T.BOOL, []), vi("v_out", T.FLOAT, [2])],
    )
    g = h.make_graph(
        [const("true", np.array(True)), h.make_node("Loop", ["M", "true", "x"], ["y"], body=body, name="long_loop")],
        "bad_loop_2_62",
        [vi("x", T.FLOAT, [2])],
        [vi("y", T.FLOAT, [2])],
        [nh.from_array(np.array(2**62, np.int64), "M")],
    )
    return model(g)


def bad_region_bomb():
    then_g = h.make_graph(
        [
            const("big_shape", np.array([100000, 100000, 100], np.int64)),
            h.make_node("ConstantOfShape", ["big_shape"], ["big"], value=nh.from_array(np.array([1.0], np.float32))),
            h.make_node("ReduceSum", ["big"], ["t"], keepdims=0),
        ],
        "then",
        [],
        [vi("t", T.FLOAT, [])],
    )
    else_g = h.make_graph([h.make_node("ReduceSum", ["x"], ["e"], keepdims=0)], "else", [], [vi("e", T.FLOAT, [])])
    g = h.make_graph(
        [
            h.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
            const("zero", np.float32(0.0)),
            h.make_node("Greater", ["s", "zero"], ["c"]),
            h.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g, name="bomb_if"),
        ],
        "bad_region_bomb",
        [vi("x", T.FLOAT, [2])],
        [vi("y", T.FLOAT, [])],
    )
    return model(g)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, f in [("if_nested", if_nested), ("loop_scan", loop_scan), ("loop_while", loop_while), ("loop_symbolic", loop_symbolic), ("loop_plain", loop_plain), ("loop_if", loop_if), ("loop_swap", loop_swap), ("loop_grow", loop_grow),
                    ("loop_stack", loop_stack), ("loop_long", loop_long), ("loop_count_scan", loop_count_scan), ("loop_stop_scan", loop_stop_scan), ("loop_scan_used", loop_scan_used),
                    ("scan_axes", scan_axes), ("scan8", scan8), ("bad_loop_2_62", bad_loop_2_62),
                    ("bad_region_bomb", bad_region_bomb)]:
        save(out, name, f())
    # the checker rejects these (or recursion would be too slow for it); they are meant to be bad
    for name, f in [("bad_loop_body", bad_loop_body), ("bad_if_outputs", bad_if_outputs), ("bad_deep_nesting", bad_deep_nesting)]:
        save(out, name, f(), check=False)


if __name__ == "__main__":
    main()
