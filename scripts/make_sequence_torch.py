"""Exports torch modules whose forward builds Python lists of tensors (TorchScript, `torch.jit.script`) with
the TorchScript exporter (`dynamo=False`) into the folder given as argv[1] (committed as
core/tests/data/sequence/, for core/tests/sequence_models.rs). Run with the torch venv's Python.

  torch_list_ops   torch.unbind → torch.cat, torch.split → list indexing → torch.cat, a list built with
                   append/insert → torch.stack, len(list): exports SplitToSequence, ConcatFromSequence,
                   SequenceAt, SequenceEmpty/SequenceLength, with constant positions.
  torch_list_loop  a list comprehension over torch.unbind → torch.stack: exports a Loop whose body reads a
                   sequence made outside it (SequenceAt with the iteration number on the unbind result) and
                   appends to a carried one.
  torch_loop_stack `for i in range(x.size(0)): out.append(f(x[i], i))`, then torch.stack (dims 0 and 2),
                   torch.cat, len(out), out[-1], out[1]: a Loop carrying a sequence the body appends to
                   (SequenceEmpty, SequenceInsert), its trip count from x's symbolic dim 0.
  torch_loop_two_lists  two lists and a tensor (an RNN-like state) carried by one loop, elements of
                   different shapes; torch.stack(a, 1), torch.cat(b, 0) and the final state.
  torch_loop_count a list starting with one tensor ([x]), appended to `int(n)` times, n an int64 input (a
                   trip count known only at run time); torch.cat and len.
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


class LoopStack(torch.nn.Module):
    def forward(self, x):
        out: List[torch.Tensor] = []
        for i in range(x.size(0)):
            out.append(torch.relu(x[i]) * float(i) + 1.0)
        return torch.stack(out), torch.stack(out, 2), torch.cat(out, 1), torch.tensor(len(out)), out[-1], out[1]


class LoopTwoLists(torch.nn.Module):
    def forward(self, x):
        h = torch.zeros_like(x[0])
        a: List[torch.Tensor] = []
        b: List[torch.Tensor] = []
        for i in range(x.size(0)):
            h = torch.tanh(x[i] + h)
            a.append(h)
            b.append(h.sum(0) * 2.0)
        return torch.stack(a, 1), torch.cat(b, 0), h


class LoopCount(torch.nn.Module):
    def forward(self, x, n):
        out: List[torch.Tensor] = [x]
        for i in range(int(n)):
            out.append(x * float(i))
        return torch.cat(out, 0), torch.tensor(len(out))


def export(module, name, out, args=None, input_names=("x",), dynamic_axes=None):
    path = os.path.join(out, name + ".onnx")
    args = args if args is not None else (torch.randn(3, 4, 5),)
    torch.onnx.export(
        torch.jit.script(module), args, path, opset_version=17, dynamo=False, input_names=list(input_names), dynamic_axes=dynamic_axes
    )
    ops = [n.op_type for n in onnx.load(path).graph.node]
    assert any(op.startswith("Sequence") or op.endswith("Sequence") for op in ops), f"{name}: no sequence ops in {ops}"
    print(name, ops)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    export(ListOps(), "torch_list_ops", out)
    export(ListLoop(), "torch_list_loop", out)
    export(LoopStack(), "torch_loop_stack", out, dynamic_axes={"x": {0: "n"}})
    export(LoopTwoLists(), "torch_loop_two_lists", out)
    export(LoopCount(), "torch_loop_count", out, args=(torch.randn(2, 3), torch.tensor(3)), input_names=("x", "n"))


if __name__ == "__main__":
    main()
