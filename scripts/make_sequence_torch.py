"""Exports torch modules whose forward builds Python lists of tensors (TorchScript, `torch.jit.script`) with
the TorchScript exporter (`dynamo=False`) into the folder given as argv[1] (committed as
core/tests/data/sequence/, for core/tests/sequence_models.rs). Run with the torch venv's Python.

  torch_list_ops   torch.unbind → torch.cat, torch.split → list indexing → torch.cat, a list built with
                   append/insert → torch.stack, len(list): exports SplitToSequence, ConcatFromSequence,
                   SequenceAt, SequenceEmpty/SequenceLength, with constant positions.
  torch_list_loop  a list comprehension over torch.unbind → torch.stack: exports a Loop whose body reads and
                   inserts into sequences (SequenceAt with the iteration number, SequenceInsert), which the
                   importer refuses (a sequence crossing a Loop boundary).
"""

import os
import sys
from typing import List

import onnx
import torch


class ListOps(torch.nn.Module):
    def forward(self, x):
        ys = torch.unbind(x, 1)
        b = torch.cat(list(ys), 0)
        s = torch.split(x, 2, dim=2)
        c = torch.cat([s[-1], s[0]], 2)
        parts: List[torch.Tensor] = []
        parts.append(torch.relu(x[0]))
        parts.insert(0, x[1] * 2.0)
        e = torch.stack(parts, 0)
        return b, c, e, torch.tensor(len(ys))


class ListLoop(torch.nn.Module):
    def forward(self, x):
        return torch.stack([t * 2.0 for t in torch.unbind(x, 0)], 1)


def export(module, name, out):
    path = os.path.join(out, name + ".onnx")
    x = torch.randn(3, 4, 5)
    torch.onnx.export(torch.jit.script(module), (x,), path, opset_version=17, dynamo=False, input_names=["x"])
    ops = [n.op_type for n in onnx.load(path).graph.node]
    assert any(op.startswith("Sequence") or op.endswith("Sequence") for op in ops), f"{name}: no sequence ops in {ops}"
    print(name, ops)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    export(ListOps(), "torch_list_ops", out)
    export(ListLoop(), "torch_list_loop", out)


if __name__ == "__main__":
    main()
