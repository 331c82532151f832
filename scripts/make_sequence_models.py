"""Writes small ONNX models with sequence ops into the folder given as argv[1] (committed as
core/tests/data/sequence/, for core/tests/sequence_models.rs): good models (run on the CPU target and
compared with onnxruntime) and bad ones (each must be refused with a clear error).

Good models (float inputs only, so random inputs drive them):
  construct_insert_at  SequenceConstruct, SequenceInsert at a constant position and at the back,
                       SequenceAt with positive and negative positions, SequenceLength.
  split_concat         SplitToSequence (no split, keepdims 1 and 0; scalar split; 1-D split) into
                       ConcatFromSequence (new_axis 0 and 1, negative axes), SequenceErase at -2, SequenceAt.
  empty_insert         SequenceEmpty, SequenceInsert (back, 0, -1), SequenceErase without position,
                       ConcatFromSequence, SequenceLength.
Bad models:
  bad_position_range   SequenceAt at position 2 of a 2-tensor sequence.
  bad_runtime_position SequenceAt whose position is a graph input.
  bad_sequence_output  a graph output that is a sequence.
  bad_loop_sequence    a Loop carrying a sequence (SequenceEmpty in, SequenceInsert in the body).
  bad_if_capture       an If (node 'branch') whose then-branch reads an outer sequence with SequenceAt.
"""

import os
import sys

import numpy as np
from onnx import TensorProto as T, helper as h

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_control_flow_models import const, model, save, vi  # noqa: E402


def construct_insert_at():
    nodes = [
        h.make_node("SequenceConstruct", ["x", "y"], ["s"]),
        const("one", np.int64(1)),
        h.make_node("SequenceInsert", ["s", "z", "one"], ["s2"]),
        h.make_node("Relu", ["x"], ["rx"]),
        h.make_node("SequenceInsert", ["s2", "rx"], ["s3"]),
        const("minus1", np.int32(-1)),
        h.make_node("SequenceAt", ["s3", "minus1"], ["last"]),
        h.make_node("SequenceAt", ["s3", "one"], ["second"]),
        h.make_node("Sub", ["last", "second"], ["diff"]),
        h.make_node("SequenceLength", ["s3"], ["len"]),
    ]
    ins = [vi(n, T.FLOAT, [2, 3]) for n in "xyz"]
    outs = [vi("diff", T.FLOAT, [2, 3]), vi("len", T.INT64, [])]
    return model(h.make_graph(nodes, "construct_insert_at", ins, outs))


def split_concat():
    nodes = [
        h.make_node("SplitToSequence", ["x"], ["s1"], axis=1),
        h.make_node("ConcatFromSequence", ["s1"], ["cat_keep"], axis=2),
        h.make_node("SplitToSequence", ["x"], ["s2"], axis=-1, keepdims=0),
        h.make_node("ConcatFromSequence", ["s2"], ["stack0"], axis=0, new_axis=1),
        h.make_node("ConcatFromSequence", ["s2"], ["stack_last"], axis=-1, new_axis=1),
        const("two", np.int64(2)),
        h.make_node("SplitToSequence", ["x", "two"], ["s3"], axis=2),
        const("minus2", np.int64(-2)),
        h.make_node("SequenceErase", ["s3", "minus2"], ["s4"]),
        h.make_node("ConcatFromSequence", ["s4"], ["erased"], axis=-1),
        const("sizes", np.array([1, 2], np.int64)),
        h.make_node("SplitToSequence", ["x", "sizes"], ["s5"], axis=1, keepdims=0),
        const("one", np.int64(1)),
        h.make_node("SequenceAt", ["s5", "one"], ["part"]),
    ]
    ins = [vi("x", T.FLOAT, [4, 3, 5])]
    outs = [
        vi("cat_keep", T.FLOAT, [4, 1, 15]),
        vi("stack0", T.FLOAT, [5, 4, 3]),
        vi("stack_last", T.FLOAT, [4, 3, 5]),
        vi("erased", T.FLOAT, [4, 3, 3]),
        vi("part", T.FLOAT, [4, 2, 5]),
    ]
    return model(h.make_graph(nodes, "split_concat", ins, outs))


def empty_insert():
    nodes = [
        h.make_node("SequenceEmpty", [], ["e"], dtype=T.FLOAT),
        h.make_node("SequenceInsert", ["e", "x"], ["s1"]),
        const("zero", np.int64(0)),
        h.make_node("SequenceInsert", ["s1", "y"], ["s2"], name="insert_front"),
        const("minus1", np.int64(-1)),
        h.make_node("Neg", ["x"], ["nx"]),
        h.make_node("SequenceInsert", ["s2", "nx", "minus1"], ["s3"]),
        h.make_node("SequenceInsert", ["s3", "y"], ["s4"]),
        h.make_node("SequenceErase", ["s4"], ["s5"]),
        h.make_node("ConcatFromSequence", ["s5"], ["cat"], axis=0),
        h.make_node("SequenceLength", ["s5"], ["len"]),
    ]
    nodes[3].input.append("zero")
    ins = [vi("x", T.FLOAT, [2, 3]), vi("y", T.FLOAT, [1, 3])]
    outs = [vi("cat", T.FLOAT, [5, 3]), vi("len", T.INT64, [])]
    return model(h.make_graph(nodes, "empty_insert", ins, outs))


def bad_position_range():
    nodes = [
        h.make_node("SequenceConstruct", ["x", "x"], ["s"]),
        const("two", np.int64(2)),
        h.make_node("SequenceAt", ["s", "two"], ["y"], name="at_two"),
    ]
    return model(h.make_graph(nodes, "bad_position_range", [vi("x", T.FLOAT, [2])], [vi("y", T.FLOAT, [2])]))


def bad_runtime_position():
    nodes = [
        h.make_node("SequenceConstruct", ["x", "x"], ["s"]),
        h.make_node("SequenceAt", ["s", "pos"], ["y"], name="at_pos"),
    ]
    ins = [vi("x", T.FLOAT, [2]), vi("pos", T.INT64, [])]
    return model(h.make_graph(nodes, "bad_runtime_position", ins, [vi("y", T.FLOAT, [2])]))


def bad_sequence_output():
    nodes = [h.make_node("SequenceConstruct", ["x", "x"], ["s"])]
    out = h.make_tensor_sequence_value_info("s", T.FLOAT, [2])
    return model(h.make_graph(nodes, "bad_sequence_output", [vi("x", T.FLOAT, [2])], [out]))


def bad_loop_sequence():
    body = h.make_graph(
        [
            h.make_node("Identity", ["cond_in"], ["cond_out"]),
            h.make_node("SequenceInsert", ["seq_in", "x"], ["seq_out"]),
        ],
        "body",
        [vi("i", T.INT64, []), vi("cond_in", T.BOOL, []), h.make_tensor_sequence_value_info("seq_in", T.FLOAT, [2])],
        [vi("cond_out", T.BOOL, []), h.make_tensor_sequence_value_info("seq_out", T.FLOAT, [2])],
    )
    nodes = [
        h.make_node("SequenceEmpty", [], ["e"], dtype=T.FLOAT),
        const("trips", np.int64(3)),
        const("cond", np.bool_(True)),
        h.make_node("Loop", ["trips", "cond", "e"], ["s"], name="loop", body=body),
        h.make_node("ConcatFromSequence", ["s"], ["y"], axis=0),
    ]
    return model(h.make_graph(nodes, "bad_loop_sequence", [vi("x", T.FLOAT, [2])], [vi("y", T.FLOAT, [6])]))


def bad_if_capture():
    then_g = h.make_graph(
        [const("zero", np.int64(0)), h.make_node("SequenceAt", ["s", "zero"], ["t"])], "then", [], [vi("t", T.FLOAT, [2])]
    )
    else_g = h.make_graph([h.make_node("Identity", ["x"], ["e"])], "else", [], [vi("e", T.FLOAT, [2])])
    nodes = [
        h.make_node("SequenceConstruct", ["x", "x"], ["s"]),
        h.make_node("ReduceSum", ["x"], ["sum"], keepdims=0),
        const("zero_f", np.float32(0)),
        h.make_node("Greater", ["sum", "zero_f"], ["c"]),
        h.make_node("If", ["c"], ["y"], name="branch", then_branch=then_g, else_branch=else_g),
    ]
    return model(h.make_graph(nodes, "bad_if_capture", [vi("x", T.FLOAT, [2])], [vi("y", T.FLOAT, [2])]))


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for f in [construct_insert_at, split_concat, empty_insert]:
        save(out, f.__name__, f())
    for f in [bad_position_range, bad_runtime_position, bad_sequence_output, bad_loop_sequence, bad_if_capture]:
        save(out, f.__name__, f(), check=False)


if __name__ == "__main__":
    main()
