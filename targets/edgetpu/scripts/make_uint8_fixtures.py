"""Writes the legacy uint8 TFLite fixtures of the int8 CPU runtime test (core/tests/tflite_int8.rs).

What TF1 quantization-aware training produced (Coral's old mobilenet_v1_quant models and the like): asymmetric
uint8 activations, and uint8 weights with per-tensor scales and non-zero zero points. Made here the same way, by
TensorFlow's v1 converter (`tf.compat.v1.lite.TFLiteConverter`, `inference_type=tf.uint8`) from a TF1 graph
with seeded random weights whose ranges are set by FakeQuant ops (weights: their own min/max; activations:
fixed ranges chosen so that some values saturate). "_fio" variants keep float inputs and outputs (QUANTIZE /
DEQUANTIZE at the edges). Only the models are written: the test draws random inputs and asks LiteRT
(test-support/litert_oracle.py) for the expected outputs at run time.

    /path/to/python-with-tensorflow targets/edgetpu/scripts/make_uint8_fixtures.py [OUT_DIR [NAME...]]

OUT_DIR defaults to core/tests/data/int8. Deterministic for a given TensorFlow version.
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_int8_fixtures import op_names  # noqa: E402  (the op list printed for each fixture)

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "..", "core", "tests", "data", "int8")
tf1 = tf.compat.v1


class Net:
    """Seeded weights behind FakeQuant ops (what QAT leaves in a TF1 graph)."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def fq(self, t, lo, hi):
        return tf.quantization.fake_quant_with_min_max_args(t, lo, hi, num_bits=8)

    def w(self, shape, scale=0.5):
        w = (self.rng.standard_normal(shape) * scale).astype(np.float32)
        # asymmetric ranges: non-zero uint8 zero points that differ from 128
        return self.fq(tf.constant(w), float(w.min()), float(w.max()) * 0.8)

    def b(self, n, scale=0.3):
        return tf.constant((self.rng.standard_normal(n) * scale).astype(np.float32))


def legacy(x, n):
    """Conv (relu6, stride 2, SAME) → depthwise (multiplier 2) → 1x1 conv → residual ADD, depthwise stride 2,
    average and max pooling, CONCATENATION, LOGISTIC, FULLY_CONNECTED, SOFTMAX."""
    c = n.fq(tf.nn.relu6(tf.nn.conv2d(x, n.w((3, 3, 3, 12)), 2, "SAME") + n.b(12)), 0, 6)
    d = n.fq(tf.nn.relu6(tf.nn.depthwise_conv2d(c, n.w((3, 3, 12, 2)), [1, 1, 1, 1], "SAME") + n.b(24)), 0, 6)
    p = n.fq(tf.nn.conv2d(d, n.w((1, 1, 24, 12), 0.3), 1, "VALID") + n.b(12), -4, 4)
    d2 = n.fq(tf.nn.depthwise_conv2d(p, n.w((3, 3, 12, 1)), [1, 2, 2, 1], "SAME") + n.b(12), -5, 3)
    a = n.fq(tf.add(c, p), -3, 7)
    ap = tf.nn.avg_pool2d(a, 3, 2, "SAME")
    mp = tf.nn.max_pool2d(a, 2, 2, "VALID")
    cat = n.fq(tf.concat([ap, mp], -1), -3, 7)
    sg = n.fq(tf.sigmoid(cat), 0, 1)
    r = tf.reshape(sg, [1, -1])
    f = n.fq(tf.matmul(r, n.w((int(r.shape[1]), 10), 0.1)) + n.b(10), -6, 6)
    sm = n.fq(tf.nn.softmax(f), 0, 1)
    return [tf.identity(sm, name="probs"), tf.identity(d2, name="features")]


def mnv1(x, n):
    """A small MobileNet v1 (what Coral's mobilenet_v1_quant models are): conv stride 2, depthwise-separable
    blocks (ReLU6, strides 1 and 2, 8 to 48 channels), global average pooling, 1x1 conv logits, SOFTMAX; the
    last block's output is a second output."""
    y = n.fq(tf.nn.relu6(tf.nn.conv2d(x, n.w((3, 3, 3, 8)), 2, "SAME") + n.b(8)), 0, 6)
    for cin, cout, stride in [(8, 16, 1), (16, 24, 2), (24, 24, 1), (24, 48, 2), (48, 48, 1)]:
        y = n.fq(tf.nn.relu6(tf.nn.depthwise_conv2d(y, n.w((3, 3, cin, 1)), [1, stride, stride, 1], "SAME") + n.b(cin)), 0, 6)
        y = n.fq(tf.nn.relu6(tf.nn.conv2d(y, n.w((1, 1, cin, cout), 0.3), 1, "SAME") + n.b(cout)), 0, 6)
    features = tf.identity(y, name="features")
    y = n.fq(tf.nn.avg_pool2d(y, int(y.shape[1]), 1, "VALID"), 0, 6)
    y = n.fq(tf.nn.conv2d(y, n.w((1, 1, 48, 10), 0.3), 1, "SAME") + n.b(10), -8, 8)
    y = tf.reshape(y, [1, 10])
    return [tf.identity(n.fq(tf.nn.softmax(y), 0, 1), name="probs"), features]


def zoo(x, n):
    """MUL, SUB, TANH, RELU, CONCATENATION of differently scaled inputs (requantized), MEAN, PAD, MAX_POOL_2D,
    FULLY_CONNECTED on a 4-D input."""
    c = n.fq(tf.nn.conv2d(x, n.w((3, 3, 4, 6)), 1, "SAME") + n.b(6), -4, 4)
    th = n.fq(tf.tanh(c), -1, 1)
    sg = n.fq(tf.sigmoid(c), 0, 1)
    m = n.fq(th * sg, -1, 1)
    s = n.fq(c - m, -5, 5)
    r = n.fq(tf.nn.relu(s), 0, 5)
    cat = n.fq(tf.concat([s, r, m], -1), -5, 5)
    mp = tf.nn.max_pool2d(cat, 2, 2, "SAME")
    pad = tf.pad(mp, [[0, 0], [1, 0], [0, 1], [0, 0]])
    mean = n.fq(tf.reduce_mean(pad, axis=[1, 2], keepdims=True), -2, 2)
    flat = tf.reshape(pad, [1, -1])
    d = n.fq(tf.matmul(flat, n.w((int(flat.shape[1]), 7), 0.1)) + n.b(7), -3, 3)
    return [tf.identity(d, name="dense"), tf.identity(mean, name="mean"), tf.identity(cat, name="concat")]


NETS = {
    "legacy": (legacy, [1, 12, 12, 3], (-1.0, 1.0)),
    "mnv1": (mnv1, [1, 32, 32, 3], (-1.0, 1.0)),
    "zoo": (zoo, [1, 8, 8, 4], (-2.0, 2.0)),
}


def convert(build, shape, in_range, float_io):
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, shape, name="image")
        n = Net(7)
        outs = build(n.fq(x, *in_range), n)
        with tf1.Session(graph=g) as s:
            conv = tf1.lite.TFLiteConverter.from_session(s, [x], outs)
            conv.inference_type = tf.uint8
            # (mean, std): real = (q - mean) / std, the input FakeQuant's range
            lo, hi = in_range
            std = 255.0 / (hi - lo)
            conv.quantized_input_stats = {"image": (-lo * std, std)}
            if float_io:
                conv.inference_input_type = tf.float32
                conv.inference_output_type = tf.float32
            return conv.convert()


def main():
    os.makedirs(OUT, exist_ok=True)
    only = sys.argv[2:]
    for net, (build, shape, in_range) in NETS.items():
        for float_io in (False, True) if net == "legacy" else (False,):
            name = f"{net}_uint8" + ("_fio" if float_io else "")
            if only and name not in only:
                continue
            data = convert(build, shape, in_range, float_io)
            with open(os.path.join(OUT, name + ".tflite"), "wb") as f:
                f.write(data)
            print(f"{name}: {len(data)} bytes, ops {op_names(data)}")


if __name__ == "__main__":
    main()
