"""Writes the recurrent test models of core/tests/rnn_models.rs and targets/cloud-tpu/tests/rnn_models.rs into
core/tests/data/rnn/ (small, committed; rerun to regenerate):

* torch.onnx.export of seeded torch modules: a 2-layer bidirectional batch-first LSTM, the same GRU, a 2-layer
  tanh RNN, and a CRNN text recognizer (a small conv stack, a 2-layer bidirectional LSTM over the width, a linear
  classifier per column);
* single ONNX nodes written with onnx.helper for the attributes exporters rarely emit: LSTM with peepholes, clip,
  input_forget, HardSigmoid/Elu/Softsign with alpha/beta and per-entry sequence_lens (reverse); a bidirectional
  GRU with linear_before_reset and sequence_lens; a bidirectional RNN with Relu/LeakyRelu and initial_h.

Run with the zoo's torch venv: .cache/zoo/venv-torch/bin/python core/tests/data/make_rnn_models.py
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rnn")


def export_torch():
    import torch
    from torch import nn

    torch.manual_seed(0)

    class Seq(nn.Module):
        """A recurrent stack returning its output sequence and final states."""

        def __init__(self, rnn):
            super().__init__()
            self.rnn = rnn

        def forward(self, x):
            y, h = self.rnn(x)
            if isinstance(h, tuple):
                return (y,) + h
            return y, h

    class Crnn(nn.Module):
        """CRNN: conv features of a 1x32xW text line → columns → BiLSTM ×2 → per-column class logits."""

        def __init__(self, classes=37, hidden=32):
            super().__init__()

            def block(i, o, pool):
                return [nn.Conv2d(i, o, 3, 1, 1), nn.BatchNorm2d(o), nn.ReLU(), nn.MaxPool2d(pool)]

            self.conv = nn.Sequential(*block(1, 16, 2), *block(16, 32, 2), *block(32, 48, (2, 1)), *block(48, 64, (4, 1)))
            self.rnn = nn.LSTM(64, hidden, num_layers=2, bidirectional=True, batch_first=True)
            self.fc = nn.Linear(2 * hidden, classes)

        def forward(self, x):
            f = self.conv(x)  # [N, 64, 1, W/4]
            f = f.squeeze(2).permute(0, 2, 1)  # [N, W/4, 64]
            y, _ = self.rnn(f)
            return self.fc(y).log_softmax(-1)

    models = {
        "lstm_bi2_batch_first": (Seq(nn.LSTM(12, 20, num_layers=2, bidirectional=True, batch_first=True)), (3, 9, 12)),
        "gru_bi2_batch_first": (Seq(nn.GRU(12, 20, num_layers=2, bidirectional=True, batch_first=True)), (3, 9, 12)),
        "rnn_tanh2": (Seq(nn.RNN(12, 20, num_layers=2)), (9, 3, 12)),
        "crnn": (Crnn(), (1, 1, 32, 100)),
    }
    for name, (m, shape) in models.items():
        m.eval()
        if name == "crnn":
            # BatchNorm statistics from one training-mode pass, so activations keep a trained network's range.
            m.train()
            for mod in m.modules():
                if isinstance(mod, nn.BatchNorm2d):
                    mod.momentum = 1.0
            with torch.no_grad():
                m(torch.rand(8, *shape[1:]))
            m.eval()
        x = torch.randn(*shape)
        path = os.path.join(OUT, f"{name}.onnx")
        torch.onnx.export(m, (x,), path, input_names=["x"], opset_version=17, dynamo=False)
        onnx.checker.check_model(onnx.load(path))
        print("wrote", path)


def node_model(name, op, attrs, inputs, n_out, const=()):
    """One `op` node over `inputs` ((name, array or None) pairs); names in `const` become initializers."""
    names, vis, inits = [], [], []
    for iname, arr in inputs:
        if arr is None:
            names.append("")
            continue
        names.append(iname)
        if iname in const:
            inits.append(numpy_helper.from_array(arr, iname))
        else:
            vis.append(helper.make_tensor_value_info(iname, helper.np_dtype_to_tensor_dtype(arr.dtype), arr.shape))
    outs = [f"y{k}" for k in range(n_out)]
    node = helper.make_node(op, names, outs, name=name, **attrs)
    g = helper.make_graph([node], name, vis, [helper.make_value_info(o, helper.make_tensor_type_proto(TensorProto.FLOAT, None)) for o in outs], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    path = os.path.join(OUT, f"{name}.onnx")
    onnx.save(m, path)
    print("wrote", path)


def write_nodes():
    rng = np.random.default_rng(1)

    def f(*shape, scale=0.5):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    seq, batch, inp, hid = 7, 4, 5, 6
    lens = np.array([7, 3, 0, 5], dtype=np.int32)
    node_model(
        "lstm_peephole_clip_forget_acts",
        "LSTM",
        dict(
            hidden_size=hid,
            direction="reverse",
            clip=0.8,
            input_forget=1,
            activations=["HardSigmoid", "Elu", "Softsign"],
            activation_alpha=[0.3, 0.9],
            activation_beta=[0.4],
        ),
        [
            ("x", f(seq, batch, inp)),
            ("w", f(1, 4 * hid, inp)),
            ("r", f(1, 4 * hid, hid)),
            ("b", f(1, 8 * hid)),
            ("lens", lens),
            ("h0", f(1, batch, hid)),
            ("c0", f(1, batch, hid)),
            ("p", f(1, 3 * hid)),
        ],
        3,
        const=("w", "r", "b", "lens", "p"),
    )
    node_model(
        "gru_bi_linear_before_reset_lens",
        "GRU",
        dict(hidden_size=hid, direction="bidirectional", linear_before_reset=1),
        [
            ("x", f(seq, batch, inp)),
            ("w", f(2, 3 * hid, inp)),
            ("r", f(2, 3 * hid, hid)),
            ("b", f(2, 6 * hid)),
            ("lens", lens),
            ("h0", f(2, batch, hid)),
        ],
        2,
        const=("w", "r", "b", "lens"),
    )
    # Longer than the cloud-tpu lowering unrolls: its sequence_lens go through the while loop.
    long_seq = 20
    node_model(
        "lstm_bi_lens_long",
        "LSTM",
        dict(hidden_size=hid, direction="bidirectional"),
        [
            ("x", f(long_seq, batch, inp)),
            ("w", f(2, 4 * hid, inp)),
            ("r", f(2, 4 * hid, hid)),
            ("b", f(2, 8 * hid)),
            ("lens", np.array([20, 13, 0, 7], dtype=np.int32)),
            ("h0", f(2, batch, hid)),
            ("c0", f(2, batch, hid)),
        ],
        3,
        const=("w", "r", "b", "lens"),
    )
    node_model(
        "gru_reverse_scaled_tanh",
        "GRU",
        dict(hidden_size=hid, direction="reverse", activations=["Sigmoid", "ScaledTanh"], activation_alpha=[1.5], activation_beta=[0.7]),
        [("x", f(seq, batch, inp)), ("w", f(1, 3 * hid, inp)), ("r", f(1, 3 * hid, hid)), ("b", f(1, 6 * hid))],
        2,
        const=("w", "r", "b"),
    )
    node_model(
        "rnn_bi_relu_leaky",
        "RNN",
        dict(hidden_size=hid, direction="bidirectional", activations=["Relu", "LeakyRelu"], activation_alpha=[0.2]),
        [
            ("x", f(seq, batch, inp)),
            ("w", f(2, hid, inp)),
            ("r", f(2, hid, hid)),
            ("b", f(2, 2 * hid)),
            ("lens", None),
            ("h0", f(2, batch, hid)),
        ],
        2,
        const=("w", "r", "b"),
    )


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    write_nodes()
    if "--no-torch" not in sys.argv:
        export_torch()
