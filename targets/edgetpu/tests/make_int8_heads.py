"""Writes the small ONNX heads of `int8_accuracy.rs` (seeded weights), the way PyTorch exports them:
make_int8_heads.py OUT_DIR

detect_head.onnx   x [1,3,16,16] → Conv3x3(16)+Relu → box: Conv1x1(4)+Relu (distances, 0..~12)
                   and cls: Conv1x1(6)+Sigmoid (probabilities) → Concat(axis 1) → y [1,10,16,16] (YOLO's output)
dense_head.onnx    x [1,512] → Gemm(W [24,512], transB) → y [1,24]: 4 rows read one feature each (weight 1),
                   20 mix all 512 (weights ~0.04); every output has about the same range
Needs the onnx package.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(11)


def save(path, nodes, inits, x_shape, y_shape):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)],
                          [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)


out = sys.argv[1]
inits = {
    "w1": rng.standard_normal((16, 3, 3, 3)) / np.sqrt(27), "b1": rng.uniform(-0.1, 0.1, 16),
    "wb": np.abs(rng.standard_normal((4, 16, 1, 1))) * 2.0, "bb": rng.uniform(0.0, 1.0, 4),
    "wc": rng.standard_normal((6, 16, 1, 1)) / 4.0, "bc": rng.uniform(-2.0, 0.0, 6),
}
nodes = [
    helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
    helper.make_node("Relu", ["c1"], ["r1"]),
    helper.make_node("Conv", ["r1", "wb", "bb"], ["box_c"], kernel_shape=[1, 1]),
    helper.make_node("Relu", ["box_c"], ["box"]),
    helper.make_node("Conv", ["r1", "wc", "bc"], ["cls_c"], kernel_shape=[1, 1]),
    helper.make_node("Sigmoid", ["cls_c"], ["cls"]),
    helper.make_node("Concat", ["box", "cls"], ["y"], axis=1),
]
save(os.path.join(out, "detect_head.onnx"), nodes, inits, [1, 3, 16, 16], [1, 10, 16, 16])

w = rng.standard_normal((24, 512)) / np.sqrt(512)
for r in range(4):
    w[r] = 0.0
    w[r, 7 * r] = 1.0
inits = {"w": w, "b": rng.uniform(-0.05, 0.05, 24)}
nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)]
save(os.path.join(out, "dense_head.onnx"), nodes, inits, [1, 512], [1, 24])
