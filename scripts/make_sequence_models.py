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
  loop_append_outer    a Loop (3 trips) appending a value of the outer graph to a carried SequenceEmpty,
                       then ConcatFromSequence.
  loop_readers         a Loop whose trip count is computed from an int64 input (1 + m, at least one trip)
                       carrying a sequence, a tensor and a second sequence (elements of another shape), with
                       a scan output of its own; after it: ConcatFromSequence (new_axis 1 at a negative axis,
                       new_axis 0 at axis 1 and 0), SequenceLength, SequenceAt at run-time positions (pos mod
                       length, and that minus length: negative) and at -1, an append after the loop.
  loop_initial         a Loop appending to SequenceConstruct(x, y) (two elements in front), then a second Loop
                       appending to the first one's result; ConcatFromSequence and SequenceLength of both.
  loop_zero_trips      a Loop whose trip count is an int64 input (0 included), SequenceLength of the
                       sequence it appends to and its carried tensor.
  loop_concat_trips    a Loop whose trip count is an int64 input appending x + i, then ConcatFromSequence with
                       and without new_axis (onnxruntime fails on 0 trips: an empty sequence).
  if_capture           an If whose then-branch reads an outer sequence (SequenceAt at -1, SequenceLength).
  loop_reads_loop      a Loop appending to a sequence, then a second Loop that runs SequenceLength of it times
                       and reads it from the back (SequenceAt at -1 - i, a run-time position) into a running sum it
                       appends to.
Bad models:
  bad_position_range   SequenceAt at position 2 of a 2-tensor sequence.
  bad_runtime_position SequenceAt whose position is a graph input.
  bad_sequence_output  a graph output that is a sequence.
  bad_loop_sequence    a Loop (node 'loop') whose body reads its carried sequence (SequenceLength).
  bad_loop_insert_at   a Loop whose body inserts into its carried sequence at position 0.
  bad_loop_erase       a Loop whose body erases from its carried sequence.
  bad_loop_seq_output  a Loop's appended sequence as a graph output.
  bad_erase_after_loop SequenceErase (node 'erase') on the sequence a Loop appended to.
  bad_if_capture       an If (node 'branch') whose then-branch reads an outer sequence of tensors of two shapes.
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


def seq_vi(name, shape):
    return h.make_tensor_sequence_value_info(name, T.FLOAT, shape)


def append_body(body_nodes, seq_out="seq_out", extra_in=(), extra_out=()):
    """A Loop body (iteration i, condition passed through, carried sequence seq_in) running `body_nodes`,
    which compute `seq_out`."""
    return h.make_graph(
        [h.make_node("Identity", ["cond_in"], ["cond_out"])] + body_nodes,
        "body",
        [vi("i", T.INT64, []), vi("cond_in", T.BOOL, []), seq_vi("seq_in", None), *extra_in],
        [vi("cond_out", T.BOOL, []), seq_vi(seq_out, None), *extra_out],
    )


def append_loop(name, body, outputs, after, out_vis, ins=None):
    nodes = [
        h.make_node("SequenceEmpty", [], ["e"], dtype=T.FLOAT),
        const("trips", np.int64(3)),
        const("cond", np.bool_(True)),
        h.make_node("Loop", ["trips", "cond", "e"], outputs, name="loop", body=body),
    ] + after
    return model(h.make_graph(nodes, name, ins or [vi("x", T.FLOAT, [2])], out_vis))


def loop_append_outer():
    body = append_body([h.make_node("SequenceInsert", ["seq_in", "x"], ["seq_out"])])
    after = [h.make_node("ConcatFromSequence", ["s"], ["y"], axis=0)]
    return append_loop("loop_append_outer", body, ["s"], after, [vi("y", T.FLOAT, [6])])


def loop_readers():
    body = h.make_graph(
        [
            h.make_node("Identity", ["cond_in"], ["cond_out"]),
            h.make_node("Cast", ["i"], ["fi"], to=T.FLOAT),
            h.make_node("Mul", ["x", "fi"], ["xi"]),
            h.make_node("Add", ["xi", "h_in"], ["h_out"]),
            h.make_node("SequenceInsert", ["a_in", "h_out"], ["a_out"]),
            const("axes1", np.array([1], np.int64)),
            h.make_node("ReduceSum", ["h_out", "axes1"], ["row"], keepdims=0),
            h.make_node("Sin", ["row"], ["srow"]),
            h.make_node("SequenceInsert", ["b_in", "srow"], ["b_out"]),
            h.make_node("Neg", ["h_out"], ["scan"]),
        ],
        "body",
        [vi("i", T.INT64, []), vi("cond_in", T.BOOL, []), seq_vi("a_in", None), vi("h_in", T.FLOAT, [2, 3]), seq_vi("b_in", None)],
        [vi("cond_out", T.BOOL, []), seq_vi("a_out", None), vi("h_out", T.FLOAT, [2, 3]), seq_vi("b_out", None), vi("scan", T.FLOAT, [2, 3])],
    )
    nodes = [
        h.make_node("SequenceEmpty", [], ["e"], dtype=T.FLOAT),
        const("one", np.int64(1)),
        h.make_node("Add", ["m", "one"], ["trips"]),
        const("cond", np.bool_(True)),
        h.make_node("Loop", ["trips", "cond", "e", "x", "e"], ["a", "h", "b", "scans"], name="loop", body=body),
        h.make_node("ConcatFromSequence", ["a"], ["stack_last"], axis=-1, new_axis=1),
        h.make_node("ConcatFromSequence", ["a"], ["cat1"], axis=1),
        h.make_node("ConcatFromSequence", ["b"], ["cat_b"], axis=0),
        h.make_node("SequenceLength", ["a"], ["len"]),
        h.make_node("Mod", ["pos", "len"], ["at"]),
        h.make_node("SequenceAt", ["a", "at"], ["a_at"]),
        h.make_node("Sub", ["at", "len"], ["neg_at"]),
        h.make_node("SequenceAt", ["b", "neg_at"], ["b_at"]),
        const("minus1", np.int32(-1)),
        h.make_node("SequenceAt", ["a", "minus1"], ["a_last"]),
        h.make_node("SequenceInsert", ["a", "x"], ["a_more"]),
        h.make_node("ConcatFromSequence", ["a_more"], ["stack0"], axis=0, new_axis=1),
    ]
    ins = [vi("x", T.FLOAT, [2, 3]), vi("m", T.INT64, []), vi("pos", T.INT64, [])]
    outs = [
        vi("stack_last", T.FLOAT, [2, 3, None]),
        vi("cat1", T.FLOAT, [2, None]),
        vi("cat_b", T.FLOAT, [None]),
        vi("len", T.INT64, []),
        vi("a_at", T.FLOAT, [2, 3]),
        vi("b_at", T.FLOAT, [2]),
        vi("a_last", T.FLOAT, [2, 3]),
        vi("stack0", T.FLOAT, [None, 2, 3]),
        vi("h", T.FLOAT, [2, 3]),
        vi("scans", T.FLOAT, [None, 2, 3]),
    ]
    return model(h.make_graph(nodes, "loop_readers", ins, outs))


def loop_initial():
    def body():
        return append_body(
            [h.make_node("Cast", ["i"], ["fi"], to=T.FLOAT), h.make_node("Mul", ["x", "fi"], ["xi"]), h.make_node("SequenceInsert", ["seq_in", "xi"], ["seq_out"])]
        )

    nodes = [
        h.make_node("SequenceConstruct", ["x", "y"], ["s0"]),
        const("trips", np.int64(3)),
        const("trips2", np.int64(2)),
        const("cond", np.bool_(True)),
        h.make_node("Loop", ["trips", "cond", "s0"], ["s1"], name="loop1", body=body()),
        h.make_node("Loop", ["trips2", "cond", "s1"], ["s2"], name="loop2", body=body()),
        h.make_node("ConcatFromSequence", ["s1"], ["stack1"], axis=1, new_axis=1),
        h.make_node("ConcatFromSequence", ["s2"], ["cat2"], axis=0),
        h.make_node("SequenceLength", ["s2"], ["len2"]),
    ]
    ins = [vi("x", T.FLOAT, [2, 3]), vi("y", T.FLOAT, [2, 3])]
    outs = [vi("stack1", T.FLOAT, [2, 5, 3]), vi("cat2", T.FLOAT, [14, 3]), vi("len2", T.INT64, [])]
    return model(h.make_graph(nodes, "loop_initial", ins, outs))


def loop_zero_trips():
    body = append_body(
        [h.make_node("Add", ["h_in", "x"], ["h_out"]), h.make_node("SequenceInsert", ["seq_in", "h_out"], ["seq_out"])],
        extra_in=[vi("h_in", T.FLOAT, [2])],
        extra_out=[vi("h_out", T.FLOAT, [2])],
    )
    nodes = [
        h.make_node("SequenceEmpty", [], ["e"], dtype=T.FLOAT),
        h.make_node("Loop", ["m", "", "e", "x"], ["s", "h"], name="loop", body=body),
        h.make_node("SequenceLength", ["s"], ["len"]),
    ]
    ins = [vi("x", T.FLOAT, [2]), vi("m", T.INT64, [])]
    return model(h.make_graph(nodes, "loop_zero_trips", ins, [vi("len", T.INT64, []), vi("h", T.FLOAT, [2])]))


def loop_concat_trips():
    body = append_body(
        [h.make_node("Cast", ["i"], ["fi"], to=T.FLOAT), h.make_node("Add", ["x", "fi"], ["t"]), h.make_node("SequenceInsert", ["seq_in", "t"], ["seq_out"])]
    )
    nodes = [
        h.make_node("SequenceEmpty", [], ["e"], dtype=T.FLOAT),
        h.make_node("Loop", ["m", "", "e"], ["s"], name="loop", body=body),
        h.make_node("ConcatFromSequence", ["s"], ["stack1"], axis=1, new_axis=1),
        h.make_node("ConcatFromSequence", ["s"], ["cat1"], axis=1),
    ]
    ins = [vi("x", T.FLOAT, [2, 3]), vi("m", T.INT64, [])]
    return model(h.make_graph(nodes, "loop_concat_trips", ins, [vi("stack1", T.FLOAT, [2, None, 3]), vi("cat1", T.FLOAT, [2, None])]))


def bad_loop_sequence():
    body = append_body(
        [
            h.make_node("SequenceLength", ["seq_in"], ["n"], name="length"),
            h.make_node("Cast", ["n"], ["fn"], to=T.FLOAT),
            h.make_node("Mul", ["x", "fn"], ["t"]),
            h.make_node("SequenceInsert", ["seq_in", "t"], ["seq_out"]),
        ]
    )
    after = [h.make_node("ConcatFromSequence", ["s"], ["y"], axis=0)]
    return append_loop("bad_loop_sequence", body, ["s"], after, [vi("y", T.FLOAT, [6])])


def bad_loop_insert_at():
    body = append_body([const("zero", np.int64(0)), h.make_node("SequenceInsert", ["seq_in", "x", "zero"], ["seq_out"], name="insert_front")])
    after = [h.make_node("ConcatFromSequence", ["s"], ["y"], axis=0)]
    return append_loop("bad_loop_insert_at", body, ["s"], after, [vi("y", T.FLOAT, [6])])


def bad_loop_erase():
    body = append_body(
        [h.make_node("SequenceInsert", ["seq_in", "x"], ["longer"]), h.make_node("SequenceErase", ["longer"], ["seq_out"], name="erase_last")]
    )
    after = [h.make_node("SequenceLength", ["s"], ["y"])]
    return append_loop("bad_loop_erase", body, ["s"], after, [vi("y", T.INT64, [])])


def bad_loop_seq_output():
    body = append_body([h.make_node("SequenceInsert", ["seq_in", "x"], ["seq_out"])])
    return append_loop("bad_loop_seq_output", body, ["s"], [], [seq_vi("s", [2])])


def bad_erase_after_loop():
    body = append_body([h.make_node("SequenceInsert", ["seq_in", "x"], ["seq_out"])])
    after = [h.make_node("SequenceErase", ["s"], ["s2"], name="erase"), h.make_node("ConcatFromSequence", ["s2"], ["y"], axis=0)]
    return append_loop("bad_erase_after_loop", body, ["s"], after, [vi("y", T.FLOAT, [4])])


def if_capture():
    then_g = h.make_graph(
        [
            const("minus1", np.int64(-1)),
            h.make_node("SequenceAt", ["s", "minus1"], ["last"]),
            h.make_node("SequenceLength", ["s"], ["n"]),
            h.make_node("Cast", ["n"], ["fn"], to=T.FLOAT),
            h.make_node("Mul", ["last", "fn"], ["t"]),
        ],
        "then",
        [],
        [vi("t", T.FLOAT, [2])],
    )
    else_g = h.make_graph([h.make_node("Identity", ["x"], ["e"])], "else", [], [vi("e", T.FLOAT, [2])])
    nodes = [
        h.make_node("Neg", ["x"], ["nx"]),
        h.make_node("SequenceConstruct", ["x", "nx"], ["s"]),
        h.make_node("ReduceSum", ["x"], ["sum"], keepdims=0),
        const("zero_f", np.float32(0)),
        h.make_node("Greater", ["sum", "zero_f"], ["c"]),
        h.make_node("If", ["c"], ["y"], name="branch", then_branch=then_g, else_branch=else_g),
    ]
    return model(h.make_graph(nodes, "if_capture", [vi("x", T.FLOAT, [2])], [vi("y", T.FLOAT, [2])]))


def loop_reads_loop():
    first = append_body(
        [h.make_node("Cast", ["i"], ["fi"], to=T.FLOAT), h.make_node("Mul", ["x", "fi"], ["xi"]), h.make_node("SequenceInsert", ["seq_in", "xi"], ["seq_out"])]
    )
    second = append_body(
        [
            const("minus1", np.int64(-1)),
            h.make_node("Sub", ["minus1", "i"], ["back"]),
            h.make_node("SequenceAt", ["s1", "back"], ["t"]),
            h.make_node("Add", ["h_in", "t"], ["h_out"]),
            h.make_node("SequenceInsert", ["seq_in", "h_out"], ["seq_out"]),
        ],
        extra_in=[vi("h_in", T.FLOAT, [2, 3])],
        extra_out=[vi("h_out", T.FLOAT, [2, 3])],
    )
    nodes = [
        h.make_node("SequenceEmpty", [], ["e"], dtype=T.FLOAT),
        const("trips", np.int64(4)),
        const("cond", np.bool_(True)),
        h.make_node("Loop", ["trips", "cond", "e"], ["s1"], name="appends", body=first),
        h.make_node("SequenceLength", ["s1"], ["n"]),
        h.make_node("Loop", ["n", "cond", "e", "y"], ["s2", "h"], name="reads_back", body=second),
        h.make_node("ConcatFromSequence", ["s2"], ["sums"], axis=0, new_axis=1),
    ]
    ins = [vi("x", T.FLOAT, [2, 3]), vi("y", T.FLOAT, [2, 3])]
    return model(h.make_graph(nodes, "loop_reads_loop", ins, [vi("sums", T.FLOAT, [4, 2, 3]), vi("h", T.FLOAT, [2, 3])]))


def bad_if_capture():
    then_g = h.make_graph(
        [const("zero", np.int64(0)), h.make_node("SequenceAt", ["s", "zero"], ["t"])], "then", [], [vi("t", T.FLOAT, [2])]
    )
    else_g = h.make_graph([h.make_node("Identity", ["x"], ["e"])], "else", [], [vi("e", T.FLOAT, [2])])
    nodes = [
        h.make_node("SequenceConstruct", ["x", "y"], ["s"]),
        h.make_node("ReduceSum", ["x"], ["sum"], keepdims=0),
        const("zero_f", np.float32(0)),
        h.make_node("Greater", ["sum", "zero_f"], ["c"]),
        h.make_node("If", ["c"], ["z"], name="branch", then_branch=then_g, else_branch=else_g),
    ]
    ins = [vi("x", T.FLOAT, [2]), vi("y", T.FLOAT, [3])]
    return model(h.make_graph(nodes, "bad_if_capture", ins, [vi("z", T.FLOAT, [2])]))


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for f in [construct_insert_at, split_concat, empty_insert, loop_append_outer, loop_readers, loop_initial, loop_zero_trips, loop_concat_trips, if_capture, loop_reads_loop]:
        save(out, f.__name__, f())
    bad = [bad_position_range, bad_runtime_position, bad_sequence_output, bad_loop_sequence, bad_loop_insert_at, bad_loop_erase]
    for f in bad + [bad_loop_seq_output, bad_erase_after_loop, bad_if_capture]:
        save(out, f.__name__, f(), check=False)


if __name__ == "__main__":
    main()
