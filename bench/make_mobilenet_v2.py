#!/usr/bin/env python3
"""Writes MobileNetV2 (1.0, 224x224, the torchvision/Keras layer structure) as an ONNX file.

Weights are seeded random with BatchNorm statistics kept, so the compute is exactly that of the real
network (300 M MACs): this is a benchmark model, not a classifier. Usage: make_mobilenet_v2.py OUT.onnx
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(0)
nodes, inits = [], []
count = [0]


def name(p):
    count[0] += 1
    return f"{p}{count[0]}"


def const(arr, p):
    n = name(p)
    inits.append(numpy_helper.from_array(arr.astype(np.float32), n))
    return n


def conv_bn(x, cin, cout, k, stride, group=1, act=True):
    w = rng.standard_normal((cout, cin // group, k, k)) * np.sqrt(2.0 / (cin // group * k * k))
    y = name("conv")
    nodes.append(helper.make_node("Conv", [x, const(w, "w")], [y], kernel_shape=[k, k], strides=[stride, stride],
                                  pads=[k // 2] * 4, group=group))
    z = name("bn")
    nodes.append(helper.make_node("BatchNormalization",
                                  [y, const(1 + 0.1 * rng.standard_normal(cout), "g"), const(0.1 * rng.standard_normal(cout), "b"),
                                   const(0.1 * rng.standard_normal(cout), "m"), const(1 + 0.1 * rng.random(cout), "v")],
                                  [z], epsilon=1e-5))
    if not act:
        return z
    r = name("relu6")
    nodes.append(helper.make_node("Clip", [z, const(np.array(0.0), "lo"), const(np.array(6.0), "hi")], [r]))
    return r


def block(x, cin, cout, stride, t):
    h = x
    hidden = cin * t
    if t != 1:
        h = conv_bn(h, cin, hidden, 1, 1)
    h = conv_bn(h, hidden, hidden, 3, stride, group=hidden)
    h = conv_bn(h, hidden, cout, 1, 1, act=False)
    if stride == 1 and cin == cout:
        y = name("add")
        nodes.append(helper.make_node("Add", [x, h], [y]))
        return y
    return h


x = conv_bn("input", 3, 32, 3, 2)
cin = 32
for t, c, n, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]:
    for i in range(n):
        x = block(x, cin, c, s if i == 0 else 1, t)
        cin = c
x = conv_bn(x, cin, 1280, 1, 1)
nodes.append(helper.make_node("GlobalAveragePool", [x], ["gap"]))
nodes.append(helper.make_node("Flatten", ["gap"], ["flat"], axis=1))
nodes.append(helper.make_node("Gemm", ["flat", const(rng.standard_normal((1000, 1280)) * 0.03, "fc"),
                                       const(np.zeros(1000), "fcb")], ["logits"], transB=1))
graph = helper.make_graph(nodes, "mobilenet_v2", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 224, 224])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 1000])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="tpu-sdk bench")
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
print(f"wrote {sys.argv[1]}: {len(nodes)} nodes")
