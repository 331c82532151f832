"""Writes the LSTM export test models of targets/edgetpu/tests/lstm_export.rs into targets/edgetpu/tests/data/lstm/
(small, committed; rerun to regenerate with the zoo's torch venv: `.cache/zoo/venv-torch/bin/python targets/edgetpu/tests/data/make_lstm_models.py`):

* torch.onnx.export of seeded torch LSTMs returning only their output sequence: a forward batch-first LSTM and
  a 2-layer bidirectional time-major LSTM;
* single ONNX LSTM nodes written with onnx.helper: a reverse LSTM with peepholes and its final hidden state
  Y_h, a bidirectional batch-major (layout 1) LSTM with Y_h, zero initial states and full sequence_lens, and a
  forward LSTM with Relu cell activations;
* single ONNX RNN nodes: a bidirectional tanh RNN with Y_h, a reverse Relu RNN, a reverse batch-major tanh RNN.
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lstm")


def export_torch():
    import torch
    from torch import nn

    torch.manual_seed(0)

    class Seq(nn.Module):
        def __init__(self, rnn):
            super().__init__()
            self.rnn = rnn

        def forward(self, x):
            y, _ = self.rnn(x)
            return y

    models = {
        "lstm_forward_batch_first": (Seq(nn.LSTM(6, 8, batch_first=True)), (2, 7, 6)),
        "lstm_bi2_time_major": (Seq(nn.LSTM(6, 8, num_layers=2, bidirectional=True)), (7, 2, 6)),
    }
    for name, (m, shape) in models.items():
        m.eval()
        path = os.path.join(OUT, f"{name}.onnx")
        torch.onnx.export(m, (torch.randn(*shape),), path, input_names=["x"], output_names=["y"], opset_version=17, dynamo=False)
        print("wrote", path)


def node_model(name, attrs, seq, batch, inp, hid, dirs, layout=0, peepholes=False, lens=False, zero_states=False, outputs=("Y", "Y_h"), seed=0):
    rng = np.random.default_rng(seed)
    x_shape = [batch, seq, inp] if layout else [seq, batch, inp]
    state = [batch, dirs, hid] if layout else [dirs, batch, hid]
    inits = [
        numpy_helper.from_array((rng.standard_normal((dirs, 4 * hid, inp)) * 0.5).astype(np.float32), "w"),
        numpy_helper.from_array((rng.standard_normal((dirs, 4 * hid, hid)) * 0.5).astype(np.float32), "r"),
        numpy_helper.from_array((rng.standard_normal((dirs, 8 * hid)) * 0.3).astype(np.float32), "b"),
    ]
    ins = ["x", "w", "r", "b"]
    if lens:
        inits.append(numpy_helper.from_array(np.full((batch,), seq, np.int32), "lens"))
        ins.append("lens")
    else:
        ins.append("")
    if zero_states:
        inits.append(numpy_helper.from_array(np.zeros(state, np.float32), "h0"))
        inits.append(numpy_helper.from_array(np.zeros(state, np.float32), "c0"))
        ins += ["h0", "c0"]
    else:
        ins += ["", ""]
    if peepholes:
        inits.append(numpy_helper.from_array((rng.standard_normal((dirs, 3 * hid)) * 0.5).astype(np.float32), "p"))
        ins.append("p")
    while ins and ins[-1] == "":
        ins.pop()
    outs = [o if o in outputs else "" for o in ("Y", "Y_h", "Y_c")]
    while outs[-1] == "":
        outs.pop()
    node = helper.make_node("LSTM", ins, outs, hidden_size=hid, layout=layout, **attrs)
    y_shape = [batch, seq, dirs, hid] if layout else [seq, dirs, batch, hid]
    shapes = {"Y": y_shape, "Y_h": state, "Y_c": state}
    graph = helper.make_graph(
        [node], name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, shapes[o]) for o in outputs], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    onnx.checker.check_model(m)
    path = os.path.join(OUT, f"{name}.onnx")
    onnx.save(m, path)
    print("wrote", path)


def rnn_model(name, attrs, seq, batch, inp, hid, dirs, layout=0, seed=0):
    rng = np.random.default_rng(seed)
    x_shape = [batch, seq, inp] if layout else [seq, batch, inp]
    inits = [
        numpy_helper.from_array((rng.standard_normal((dirs, hid, inp)) * 0.5).astype(np.float32), "w"),
        numpy_helper.from_array((rng.standard_normal((dirs, hid, hid)) * 0.4).astype(np.float32), "r"),
        numpy_helper.from_array((rng.standard_normal((dirs, 2 * hid)) * 0.3).astype(np.float32), "b"),
    ]
    node = helper.make_node("RNN", ["x", "w", "r", "b"], ["Y", "Y_h"], hidden_size=hid, layout=layout, **attrs)
    y_shape = [batch, seq, dirs, hid] if layout else [seq, dirs, batch, hid]
    state = [batch, dirs, hid] if layout else [dirs, batch, hid]
    graph = helper.make_graph(
        [node], name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, y_shape), helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, state)], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    onnx.checker.check_model(m)
    path = os.path.join(OUT, f"{name}.onnx")
    onnx.save(m, path)
    print("wrote", path)


def state_input_model(name, seq, batch, inp, hid, seed=0):
    """A forward LSTM whose initial states are graph inputs and whose final cell state is an output (a streaming
    model's cell): TFLite's LSTM cannot express it, so the export unrolls it into the cell's arithmetic."""
    rng = np.random.default_rng(seed)
    inits = [
        numpy_helper.from_array((rng.standard_normal((1, 4 * hid, inp)) * 0.5).astype(np.float32), "w"),
        numpy_helper.from_array((rng.standard_normal((1, 4 * hid, hid)) * 0.4).astype(np.float32), "r"),
        numpy_helper.from_array((rng.standard_normal((1, 8 * hid)) * 0.3).astype(np.float32), "b"),
    ]
    node = helper.make_node("LSTM", ["x", "w", "r", "b", "", "h0", "c0"], ["Y", "Y_h", "Y_c"], hidden_size=hid)
    state = [1, batch, hid]
    graph = helper.make_graph(
        [node], name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [seq, batch, inp]),
         helper.make_tensor_value_info("h0", TensorProto.FLOAT, state), helper.make_tensor_value_info("c0", TensorProto.FLOAT, state)],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [seq, 1, batch, hid]),
         helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, state), helper.make_tensor_value_info("Y_c", TensorProto.FLOAT, state)], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    onnx.checker.check_model(m)
    path = os.path.join(OUT, f"{name}.onnx")
    onnx.save(m, path)
    print("wrote", path)


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    export_torch()
    node_model("lstm_reverse_peepholes_yh", {"direction": "reverse"}, 6, 3, 5, 4, 1, peepholes=True, seed=1)
    node_model("lstm_bi_layout1_yh", {"direction": "bidirectional"}, 5, 2, 4, 6, 2, layout=1, lens=True, zero_states=True, seed=2)
    node_model("lstm_relu", {"activations": ["Sigmoid", "Relu", "Relu"]}, 6, 2, 3, 5, 1, outputs=("Y",), seed=3)
    rnn_model("rnn_bi_tanh_yh", {"direction": "bidirectional"}, 6, 3, 4, 5, 2, seed=4)
    rnn_model("rnn_reverse_relu", {"direction": "reverse", "activations": ["Relu"]}, 5, 2, 3, 4, 1, seed=5)
    rnn_model("rnn_reverse_tanh_layout1", {"direction": "reverse"}, 5, 2, 3, 4, 1, layout=1, seed=6)
    state_input_model("lstm_state_inputs", 3, 2, 5, 6, seed=7)
