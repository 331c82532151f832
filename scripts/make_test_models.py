#!/usr/bin/env python3
"""Writes small real-architecture ONNX models (seeded weights) for the onnxruntime comparison tests.

usage: make_test_models.py OUT_DIR

Each model is built the way exporters write it (PyTorch-style op patterns), small enough to run in
milliseconds but with the structure of the real network:

- mobilenet_v2.onnx  the full MobileNetV2 at 96x96 (bench/make_mobilenet_v2.py's layer structure)
- gpt_block.onnx     two minGPT decoder blocks: LayerNormalization, causal self-attention (MatMul, Reshape,
                     Transpose, Softmax, a Trilu mask applied with Where), GELU (Erf form), token and position
                     embeddings (Gather), Range/Shape/Expand for positions
- llama_block.onnx   a Llama block: RMSNorm written as Pow/ReduceMean/Add/Sqrt/Div, rotary-free attention,
                     SwiGLU MLP (Sigmoid, Mul), Cast
- unet.onnx          a two-level UNet: Conv+Relu, MaxPool, ConvTranspose, Resize (nearest and linear),
                     Concat, Pad, Sigmoid
- dlrm.onnx          a DLRM-style recommender: embedding Gathers, ReduceSum pooling, Gemm MLPs, Concat,
                     pairwise-interaction MatMul, Flatten, Sigmoid
- yolo_c2f.onnx      a YOLOv8-style C2f block: Conv + SiLU written as Sigmoid and Mul (both operand orders;
                     the CPU runtime fuses them into the Conv), Split, residual bottlenecks, Concat, a strided
                     and a depthwise conv, ConvTranspose + SiLU, and a Gemm + SiLU head
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class Builder:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.n = [], [], 0

    def name(self, p):
        self.n += 1
        return f"{p}_{self.n}"

    def const(self, arr, p="c", dtype=np.float32):
        n = self.name(p)
        self.inits.append(numpy_helper.from_array(np.asarray(arr).astype(dtype), n))
        return n

    def i64(self, vals, p="i"):
        return self.const(np.array(vals), p, np.int64)

    def w(self, *shape, scale=None):
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
        s = scale if scale is not None else 1.0 / np.sqrt(fan_in)
        return self.const(self.rng.standard_normal(shape) * s, "w")

    def op(self, op_type, inputs, n_out=1, **attrs):
        outs = [self.name(op_type.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=self.name(op_type), **attrs))
        return outs[0] if n_out == 1 else outs

    def save(self, path, name, inputs, outputs, opset):
        g = helper.make_graph(self.nodes, name, inputs, outputs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="tpu-sdk tests")
        onnx.checker.check_model(m, full_check=True)
        onnx.save(m, path)


def linear(b, x, din, dout, bias=True):
    y = b.op("MatMul", [x, b.w(din, dout)])
    return b.op("Add", [y, b.const(b.rng.standard_normal(dout) * 0.02, "bias")]) if bias else y


def gelu_erf(b, x):
    t = b.op("Div", [x, b.const(np.sqrt(2.0))])
    t = b.op("Erf", [t])
    t = b.op("Add", [t, b.const(1.0)])
    t = b.op("Mul", [x, t])
    return b.op("Mul", [t, b.const(0.5)])


def attention(b, x, T, C, H, causal_where):
    hd = C // H
    q, k, v = b.op("Split", [linear(b, x, C, 3 * C), b.i64([C, C, C])], n_out=3, axis=2)

    def heads(t):
        t = b.op("Reshape", [t, b.i64([1, T, H, hd])])
        return b.op("Transpose", [t], perm=[0, 2, 1, 3])

    q, k, v = heads(q), heads(k), heads(v)
    kt = b.op("Transpose", [k], perm=[0, 1, 3, 2])
    att = b.op("Mul", [b.op("MatMul", [q, kt]), b.const(1.0 / np.sqrt(hd))])
    att = causal_where(att)
    att = b.op("Softmax", [att], axis=-1)
    y = b.op("MatMul", [att, v])
    y = b.op("Transpose", [y], perm=[0, 2, 1, 3])
    y = b.op("Reshape", [y, b.i64([1, T, C])])
    return linear(b, y, C, C)


def gpt_block(path):
    b = Builder(1)
    T, C, H, V = 16, 64, 4, 97
    pos = b.op("Range", [b.const(0, dtype=np.int64), b.op("Squeeze", [b.op("Slice", [b.op("Shape", ["idx"]), b.i64([1]), b.i64([2])]), b.i64([0])]), b.const(1, dtype=np.int64)])
    tok = b.op("Gather", [b.w(V, C, scale=0.1), "idx"], axis=0)
    pe = b.op("Gather", [b.w(T, C, scale=0.1), pos], axis=0)
    x = b.op("Add", [tok, b.op("Unsqueeze", [pe, b.i64([0])])])
    mask = b.op("Cast", [b.op("Trilu", [b.const(np.ones((T, T)))], upper=0)], to=TensorProto.BOOL)

    def causal(att):
        return b.op("Where", [mask, att, b.const(-1e9)])

    for _ in range(2):
        h = b.op("LayerNormalization", [x, b.const(1 + 0.1 * b.rng.standard_normal(C)), b.const(0.1 * b.rng.standard_normal(C))], axis=-1, epsilon=1e-5)
        x = b.op("Add", [x, attention(b, h, T, C, H, causal)])
        h = b.op("LayerNormalization", [x, b.const(np.ones(C)), b.const(np.zeros(C))], axis=-1, epsilon=1e-5)
        x = b.op("Add", [x, linear(b, gelu_erf(b, linear(b, h, C, 4 * C)), 4 * C, C)])
    x = b.op("LayerNormalization", [x, b.const(np.ones(C)), b.const(np.zeros(C))], axis=-1)
    logits = linear(b, x, C, V, bias=False)
    b.nodes[-1].output[0] = "logits"
    b.save(path, "gpt_block", [helper.make_tensor_value_info("idx", TensorProto.INT64, [1, T])],
           [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, T, V])], 17)


def llama_block(path):
    b = Builder(2)
    T, C, H = 12, 48, 4

    def rmsnorm(x):
        ms = b.op("ReduceMean", [b.op("Pow", [x, b.const(2.0)]), b.i64([-1])], keepdims=1)
        r = b.op("Sqrt", [b.op("Add", [ms, b.const(1e-6)])])
        return b.op("Mul", [b.op("Div", [x, r]), b.const(1 + 0.1 * b.rng.standard_normal(C))])

    neg = b.op("Cast", [b.op("Trilu", [b.const(np.full((T, T), -1e4)), b.const(1, dtype=np.int64)], upper=1)], to=TensorProto.FLOAT)

    def causal(att):
        return b.op("Add", [att, neg])

    x = "x"
    for _ in range(2):
        x = b.op("Add", [x, attention(b, rmsnorm(x), T, C, H, causal)])
        h = rmsnorm(x)
        gate = linear(b, h, C, 128, bias=False)
        silu = b.op("Mul", [gate, b.op("Sigmoid", [gate])])
        up = linear(b, h, C, 128, bias=False)
        x = b.op("Add", [x, linear(b, b.op("Mul", [silu, up]), 128, C, bias=False)])
    y = rmsnorm(x)
    b.nodes[-1].output[0] = "y"
    b.save(path, "llama_block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, T, C])],
           [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, T, C])], 18)


def unet(path):
    b = Builder(3)

    def conv(x, cin, cout, k=3):
        y = b.op("Conv", [x, b.w(cout, cin, k, k), b.const(b.rng.standard_normal(cout) * 0.1)], pads=[k // 2] * 4)
        return b.op("Relu", [y])

    e1 = conv(conv("image", 3, 8), 8, 8)
    p1 = b.op("MaxPool", [e1], kernel_shape=[2, 2], strides=[2, 2])
    e2 = conv(conv(p1, 8, 16), 16, 16)
    p2 = b.op("MaxPool", [e2], kernel_shape=[2, 2], strides=[2, 2])
    mid = conv(p2, 16, 32)
    u2 = b.op("ConvTranspose", [mid, b.w(32, 16, 2, 2), b.const(np.zeros(16))], strides=[2, 2], kernel_shape=[2, 2])
    d2 = conv(b.op("Concat", [u2, e2], axis=1), 32, 16)
    u1 = b.op("Resize", [d2, "", b.const([1, 1, 2, 2])], mode="linear", coordinate_transformation_mode="half_pixel")
    u1n = b.op("Resize", [d2, "", b.const([1, 1, 2, 2])], mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    d1 = conv(b.op("Concat", [u1, u1n, e1], axis=1), 40, 8)
    d1 = b.op("Pad", [d1, b.i64([0, 0, 1, 1, 0, 0, 1, 1])], mode="reflect")
    out = b.op("Conv", [d1, b.w(2, 8, 3, 3)])
    b.nodes.append(helper.make_node("Sigmoid", [out], ["mask"]))
    b.save(path, "unet", [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 32, 48])],
           [helper.make_tensor_value_info("mask", TensorProto.FLOAT, [1, 2, 32, 48])], 13)


def dlrm(path):
    b = Builder(4)
    B, D = 4, 16
    dense = b.op("Relu", [b.op("Gemm", ["dense", b.const(b.rng.standard_normal((32, 13)) * 0.3), b.const(np.zeros(32))], transB=1)])
    dense = b.op("Relu", [b.op("Gemm", [dense, b.w(32, D), b.const(np.zeros(D))])])
    embs = [dense]
    for t, rows in enumerate([50, 30, 20]):
        ids = b.op("Gather", ["sparse", b.const(t, dtype=np.int64)], axis=1)  # [B, 3]
        e = b.op("Gather", [b.w(rows, D, scale=0.5), ids], axis=0)  # [B, 3, D]
        embs.append(b.op("ReduceSum", [e, b.i64([1])], keepdims=0))
    feats = b.op("Concat", [b.op("Unsqueeze", [e, b.i64([1])]) for e in embs], axis=1)  # [B, 4, D]
    inter = b.op("MatMul", [feats, b.op("Transpose", [feats], perm=[0, 2, 1])])  # [B, 4, 4]
    top = b.op("Concat", [b.op("Flatten", [inter], axis=1), dense], axis=1)  # [B, 16 + D]
    top = b.op("Relu", [b.op("Gemm", [top, b.w(16 + D, 24), b.const(np.zeros(24))])])
    logit = b.op("Gemm", [top, b.w(24, 1), b.const(np.zeros(1))], alpha=0.5, beta=1.0)
    b.nodes.append(helper.make_node("Sigmoid", [logit], ["ctr"]))
    b.save(path, "dlrm", [helper.make_tensor_value_info("dense", TensorProto.FLOAT, [B, 13]),
                          helper.make_tensor_value_info("sparse", TensorProto.INT64, [B, 3, 3])],
           [helper.make_tensor_value_info("ctr", TensorProto.FLOAT, [B, 1])], 13)


def yolo_c2f(path):
    b = Builder(5)

    def silu(x, flip=False):
        s = b.op("Sigmoid", [x])
        return b.op("Mul", [s, x] if flip else [x, s])

    def conv(x, cin, cout, k=3, stride=1, group=1, flip=False):
        w = b.w(cout, cin // group, k, k, scale=np.sqrt(2.0 / (cin // group * k * k)))
        y = b.op("Conv", [x, w, b.const(b.rng.standard_normal(cout) * 0.1)], pads=[k // 2] * 4, strides=[stride] * 2, group=group)
        return silu(y, flip)

    x = conv("image", 3, 16, stride=2)
    x = conv(x, 16, 32, stride=2, flip=True)
    y = conv(x, 32, 32, k=1)
    a, c = b.op("Split", [y, b.i64([16, 16])], n_out=2, axis=1)
    parts = [a, c]
    for _ in range(2):
        h = conv(conv(parts[-1], 16, 16), 16, 16, flip=True)
        parts.append(b.op("Add", [parts[-1], h]))
    y = conv(b.op("Concat", parts, axis=1), 64, 32, k=1)
    y = conv(y, 32, 32, group=32)
    up = b.op("ConvTranspose", [y, b.w(32, 8, 2, 2), b.const(np.zeros(8))], strides=[2, 2], kernel_shape=[2, 2])
    b.nodes.append(helper.make_node("Sigmoid", [up], ["up_sig"]))
    b.nodes.append(helper.make_node("Mul", [up, "up_sig"], ["features"]))
    pooled = b.op("Flatten", [b.op("GlobalAveragePool", [y])], axis=1)
    logits = b.op("Gemm", [pooled, b.w(32, 10), b.const(np.zeros(10))])
    b.nodes.append(helper.make_node("Sigmoid", [logits], ["logit_sig"]))
    b.nodes.append(helper.make_node("Mul", ["logit_sig", logits], ["scores"]))
    b.save(path, "yolo_c2f", [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 64, 80])],
           [helper.make_tensor_value_info("features", TensorProto.FLOAT, [1, 8, 32, 40]),
            helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 10])], 13)


def mobilenet(path):
    here = os.path.dirname(os.path.abspath(__file__))
    src = open(os.path.join(here, "..", "bench", "make_mobilenet_v2.py")).read().replace("224, 224", "96, 96")
    argv = sys.argv
    sys.argv = ["make_mobilenet_v2.py", path]
    try:
        exec(compile(src, "make_mobilenet_v2.py", "exec"), {"__name__": "__main__"})
    finally:
        sys.argv = argv


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, f in [("gpt_block", gpt_block), ("llama_block", llama_block), ("unet", unet), ("dlrm", dlrm),
                    ("yolo_c2f", yolo_c2f), ("mobilenet_v2", mobilenet)]:
        f(os.path.join(out, f"{name}.onnx"))
    print(f"wrote 6 models to {out}")


if __name__ == "__main__":
    main()
