"""Regenerates cli/tests/data/torchscript_loop_if.onnx (run with a Python that has torch): a TorchScript module
with a `for` loop over a run-time count and a data-dependent `if`, exported by torch.onnx (TorchScript exporter)
to ONNX Loop and If, as real exported models use them. Usage: python make_torchscript_control_flow.py OUT.onnx"""

import sys

import torch


class M(torch.nn.Module):
    def forward(self, x, n: int):
        h = x
        for i in range(n):
            h = torch.tanh(h * 0.9 + x)
        if h.sum() > 0:
            y = h * 2
        else:
            y = h - 1
        return y
m = torch.jit.script(M())
x = torch.randn(2, 3)
torch.onnx.export(m, (x, 3), sys.argv[1], input_names=["x", "n"], output_names=["y"], opset_version=17, dynamo=False)
