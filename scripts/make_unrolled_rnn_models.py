"""Writes single-node ONNX GRU and LSTM models (onnx.helper, seeded weights) into the folder given as argv[1], for
targets/edgetpu/tests/recurrent.rs: the attribute combinations that the unrolled TFLite export of a GRU must get
right, beside the torch-exported 2-layer bidirectional GRU of core/tests/data/rnn, and an LSTM that unrolls
(TFLite's fused LSTM cannot start from a given cell state or give the final one).

  gru_reset_before_h0   forward, linear_before_reset=0, initial_h a graph input, no Y_h output used
  gru_bi_batch_major    bidirectional, layout=1 (batch-major X, Y, Y_h), linear_before_reset=1, a constant
                        non-zero initial_h, sequence_lens a constant equal to the length
  gru_reverse_no_bias   reverse, no bias input, only Y_h as output
  gru_one_step          forward, a sequence of one step
  lstm_c0_only          LSTM, forward, initial_c a graph input and no initial_h, Y_c read
  gru_too_long          forward, 501 steps: more than the unrolling takes (refused by name)
"""

import os
import sys

import numpy as np
from onnx import TensorProto as T, helper as h, numpy_helper as nh

OPSET = 17


def write(out, name, attrs, x_shape, hid, dirs, *, h0=None, h0_input=False, bias=True, lens=None, outputs=("y", "y_h")):
    rng = np.random.default_rng(sum(map(ord, name)))
    inp = x_shape[2]
    batch_major = attrs.get("layout", 0) == 1
    seq, batch = (x_shape[1], x_shape[0]) if batch_major else (x_shape[0], x_shape[1])
    inits = [
        nh.from_array((rng.standard_normal((dirs, 3 * hid, inp)) * 0.4).astype(np.float32), "w"),
        nh.from_array((rng.standard_normal((dirs, 3 * hid, hid)) * 0.4).astype(np.float32), "r"),
    ]
    names = ["x", "w", "r"]
    if bias:
        inits.append(nh.from_array((rng.standard_normal((dirs, 6 * hid)) * 0.3).astype(np.float32), "b"))
        names.append("b")
    else:
        names.append("")
    inputs = [h.make_tensor_value_info("x", T.FLOAT, list(x_shape))]
    if lens is not None:
        inits.append(nh.from_array(np.full((batch,), lens, np.int32), "lens"))
        names.append("lens")
    else:
        names.append("")
    h_shape = [batch, dirs, hid] if batch_major else [dirs, batch, hid]
    if h0_input:
        inputs.append(h.make_tensor_value_info("h0", T.FLOAT, h_shape))
        names.append("h0")
    elif h0 is not None:
        inits.append(nh.from_array((rng.standard_normal(h_shape) * h0).astype(np.float32), "h0"))
        names.append("h0")
    while names and names[-1] == "":
        names.pop()
    y_shape = [batch, seq, dirs, hid] if batch_major else [seq, dirs, batch, hid]
    node_outputs = [o if o in outputs else "" for o in ("y", "y_h")]
    while node_outputs and node_outputs[-1] == "":
        node_outputs.pop()
    node = h.make_node("GRU", names, node_outputs, name=f"/{name}/GRU", hidden_size=hid, **attrs)
    outs = []
    if "y" in outputs:
        outs.append(h.make_tensor_value_info("y", T.FLOAT, y_shape))
    if "y_h" in outputs:
        outs.append(h.make_tensor_value_info("y_h", T.FLOAT, h_shape))
    g = h.make_graph([node], name, inputs, outs, inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", OPSET)])
    m.ir_version = 8
    with open(os.path.join(out, name + ".onnx"), "wb") as f:
        f.write(m.SerializeToString())


def write_lstm_c0_only(out):
    name, seq, batch, inp, hid = "lstm_c0_only", 5, 2, 4, 6
    rng = np.random.default_rng(7)
    inits = [
        nh.from_array((rng.standard_normal((1, 4 * hid, inp)) * 0.4).astype(np.float32), "w"),
        nh.from_array((rng.standard_normal((1, 4 * hid, hid)) * 0.4).astype(np.float32), "r"),
        nh.from_array((rng.standard_normal((1, 8 * hid)) * 0.3).astype(np.float32), "b"),
    ]
    inputs = [h.make_tensor_value_info("x", T.FLOAT, [seq, batch, inp]), h.make_tensor_value_info("c0", T.FLOAT, [1, batch, hid])]
    node = h.make_node("LSTM", ["x", "w", "r", "b", "", "", "c0"], ["y", "y_h", "y_c"], name=f"/{name}/LSTM", hidden_size=hid)
    outs = [
        h.make_tensor_value_info("y", T.FLOAT, [seq, 1, batch, hid]),
        h.make_tensor_value_info("y_h", T.FLOAT, [1, batch, hid]),
        h.make_tensor_value_info("y_c", T.FLOAT, [1, batch, hid]),
    ]
    m = h.make_model(h.make_graph([node], name, inputs, outs, inits), opset_imports=[h.make_opsetid("", OPSET)])
    m.ir_version = 8
    with open(os.path.join(out, name + ".onnx"), "wb") as f:
        f.write(m.SerializeToString())


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    write(out, "gru_reset_before_h0", dict(linear_before_reset=0), (6, 2, 5), 7, 1, h0_input=True, outputs=("y",))
    write(out, "gru_bi_batch_major", dict(direction="bidirectional", layout=1, linear_before_reset=1), (3, 5, 4), 6, 2, h0=0.5, lens=5)
    write(out, "gru_reverse_no_bias", dict(direction="reverse"), (4, 1, 3), 5, 1, bias=False, outputs=("y_h",))
    write(out, "gru_one_step", dict(linear_before_reset=1), (1, 2, 4), 3, 1)
    write_lstm_c0_only(out)
    write(out, "gru_too_long", dict(), (501, 1, 2), 2, 1)


if __name__ == "__main__":
    main()
