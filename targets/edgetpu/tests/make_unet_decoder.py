"""Writes a small U-Net-like encoder/decoder as ONNX (seeded weights), the way PyTorch exports one:
make_unet_decoder.py OUT.onnx

x [1,3,32,32] → Conv3x3(8)+Relu (skip) → MaxPool2 → Conv3x3(16)+Relu → ConvTranspose(16→8, k=2, s=2)+Relu
→ Concat(skip) → Conv3x3(16→8)+Relu → ConvTranspose(8→4, k=3, s=2, p=1, output_padding=1)
→ Conv1x1(4→2) → y [1,2,64,64]. Needs the onnx package.
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(7)
inits, nodes = [], []


def const(name, arr):
    inits.append(numpy_helper.from_array(np.asarray(arr, np.float32), name))
    return name


def w(name, *shape):
    fan_in = int(np.prod(shape[1:]))
    return const(name, rng.standard_normal(shape) / np.sqrt(fan_in))


def b(name, n):
    return const(name, rng.uniform(-0.1, 0.1, n))


def node(op, ins, out, **attrs):
    nodes.append(helper.make_node(op, ins, [out], name=out + "_node", **attrs))
    return out


c1 = node("Conv", ["x", w("w1", 8, 3, 3, 3), b("b1", 8)], "c1", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
r1 = node("Relu", [c1], "r1")
p1 = node("MaxPool", [r1], "p1", kernel_shape=[2, 2], strides=[2, 2])
c2 = node("Conv", [p1, w("w2", 16, 8, 3, 3), b("b2", 16)], "c2", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
r2 = node("Relu", [c2], "r2")
# ConvTranspose weights are [C_in, C_out, kh, kw].
u1 = node("ConvTranspose", [r2, w("wt1", 16, 8, 2, 2), b("bt1", 8)], "u1", kernel_shape=[2, 2], strides=[2, 2])
ur = node("Relu", [u1], "ur")
cat = node("Concat", [ur, r1], "cat", axis=1)
c3 = node("Conv", [cat, w("w3", 8, 16, 3, 3), b("b3", 8)], "c3", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
r3 = node("Relu", [c3], "r3")
u2 = node("ConvTranspose", [r3, w("wt2", 8, 4, 3, 3)], "u2", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1])
node("Conv", [u2, w("w4", 2, 4, 1, 1), b("b4", 2)], "y", kernel_shape=[1, 1])

g = helper.make_graph(
    nodes,
    "unet_decoder",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 64, 64])],
    inits,
)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="tpu-sdk tests")
onnx.checker.check_model(m, full_check=True)
onnx.save(m, sys.argv[1])
