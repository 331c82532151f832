"""Writes the TFLite fixtures of core/tests/tflite_converter.rs with TensorFlow's converter.

Each fixture is a small Keras model or tf.function (seeded weights) converted to a float `.tflite` (two also
with fp16 weights, one with int8 kernels and float I/O), chosen so that the converter emits the builtins real
Keras/TF exports use and the TFLite importer must read: SHAPE (dynamic `tf.shape`), PACK/UNPACK,
SPLIT/SPLIT_V, FILL, BROADCAST_TO, ZEROS_LIKE, TRANSPOSE_CONV, GATHER_ND, SELECT/SELECT_V2, ONE_HOT, CUMSUM,
L2_NORMALIZATION, LOCAL_RESPONSE_NORMALIZATION, REVERSE_V2, SCATTER_ND, SPACE_TO_BATCH_ND/BATCH_TO_SPACE_ND,
RANGE, FLOOR_DIV/FLOOR_MOD, NOT_EQUAL, LOGICAL_*, ADD_N, ROUND, SIGN, TOPK_V2, DEQUANTIZE of fp16 constants,
QUANTIZE/DEQUANTIZE around int8 kernels, plus a Keras transformer block and a small U-Net. Inputs keep a free
batch dimension (`None`): the file then records shape 1 with signature -1 and keeps the SHAPE subgraphs,
which the importer folds to constants.

Only the `.tflite` files are written: the Rust test runs LiteRT itself on seeded inputs. The script prints
each model's operators, and fails when a model no longer contains the builtins it is meant to cover.

    /work/main/.venv-tf/bin/python core/tests/data/make_converter_fixtures.py [OUT_DIR]
    ONLY=split,unet ... (regenerates only those)
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "converter")


def fn(f, *specs):
    """A tf.function of the given input specs (batch left free)."""
    return tf.function(f, input_signature=[tf.TensorSpec(s, tf.float32) for s in specs])


def const(shape, seed, scale=1.0):
    return tf.constant((np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32))


# ----- one model per op family ---------------------------------------------------------------------------

def shape_reshape():
    w = const((32, 5), 1, 0.2)

    def f(x):
        y = tf.reshape(x, [tf.shape(x)[0], -1])  # SHAPE -> STRIDED_SLICE -> PACK -> RESHAPE
        return tf.matmul(y, w)

    return fn(f, [None, 4, 4, 2]), {"SHAPE", "PACK", "RESHAPE"}


def pack_unpack():
    def f(x):
        a, b, c = tf.unstack(x, axis=1)  # [N, 3, 4, 5] -> 3 x [N, 4, 5]
        return tf.stack([a * b, c - a, tf.tanh(b)], axis=-1), tf.stack([c, a], axis=0)

    return fn(f, [None, 3, 4, 5]), {"PACK", "UNPACK"}


def split():
    def f(x):
        a, b, c = tf.split(x, 3, axis=-1)  # SPLIT: axis first
        p, q, r = tf.split(x, [2, -1, 3], axis=1)  # SPLIT_V with a -1
        return tf.concat([a * c, b], axis=-1), p * 2.0, tf.reduce_sum(q, axis=1) + tf.reduce_sum(r, axis=1)

    return fn(f, [None, 8, 6]), {"SPLIT", "SPLIT_V"}


def fill_broadcast():
    bias = const((1, 6), 2)

    def f(x):
        filled = tf.fill(tf.shape(x), 0.5)  # FILL of a computed shape
        zeros = tf.zeros_like(x)
        row = tf.broadcast_to(bias, tf.shape(x))  # BROADCAST_TO
        tiled = tf.broadcast_to(tf.reduce_max(x, axis=1, keepdims=True), [1, 4, 6])
        return x * filled + row + zeros, tiled

    return fn(f, [None, 4, 6]), {"FILL", "BROADCAST_TO"}


def zeros_like():
    def f(x):
        return tf.zeros_like(x) + tf.sigmoid(x), tf.zeros_like(x, dtype=tf.int32)

    return fn(f, [None, 3, 5]), {"ZEROS_LIKE"}


def transpose_conv():
    x = tf.keras.Input((6, 7, 3), name="x")
    y = tf.keras.layers.Conv2DTranspose(4, 3, strides=2, padding="same", activation="relu")(x)
    z = tf.keras.layers.Conv2DTranspose(2, 3, strides=2, padding="valid", use_bias=False)(y)
    u = tf.keras.layers.Conv2DTranspose(3, 2, strides=3, padding="valid")(x)  # kernel < stride
    v = tf.keras.layers.Conv2DTranspose(5, (4, 3), strides=(2, 1), padding="same")(x)
    return tf.keras.Model(x, [z, u, v]), {"TRANSPOSE_CONV"}


def gather_nd():
    idx = tf.constant([[0, 1], [2, 3], [1, 0], [2, 2]], tf.int32)

    def f(x):
        return tf.gather_nd(x[0], idx), tf.gather_nd(x, [[0, 2, 1]])

    return fn(f, [None, 3, 4, 5]), {"GATHER_ND"}


def select():
    def f(x, y):
        v2 = tf.where(x > 0.2, x, y[:, :1, :])  # SELECT_V2 with broadcasting
        v1 = tf.raw_ops.Select(condition=tf.reduce_sum(x, axis=[1, 2]) > 0.0, x=x, y=y)  # SELECT: rank-1 condition
        return v2, v1

    return fn(f, [None, 4, 5], [None, 4, 5]), {"SELECT", "SELECT_V2"}


def one_hot():
    def f(x):
        idx = tf.argmax(x, axis=-1, output_type=tf.int32) - 1  # some indices are -1: all off
        a = tf.one_hot(idx, 6, on_value=2.0, off_value=-0.5)
        b = tf.one_hot(idx, 4, axis=1)
        return a, b

    return fn(f, [None, 16, 5]), {"ONE_HOT"}


def cumsum():
    def f(x):
        return tf.math.cumsum(x, axis=1), tf.math.cumsum(x, axis=-1, exclusive=True, reverse=True)

    return fn(f, [None, 5, 4]), {"CUMSUM"}


def norms():
    def f(x):
        l2 = tf.math.l2_normalize(x, axis=-1)
        lrn = tf.nn.local_response_normalization(x, depth_radius=2, bias=1.5, alpha=0.3, beta=0.75)
        return l2, lrn

    return fn(f, [None, 3, 4, 7]), {"L2_NORMALIZATION", "LOCAL_RESPONSE_NORMALIZATION"}


def reverse():
    def f(x):
        return tf.reverse(x, axis=[1]), tf.reverse(x, axis=[-1]) * 2.0

    return fn(f, [None, 4, 6]), {"REVERSE_V2"}


def scatter_nd():
    idx = tf.constant([[1], [3], [1], [0]], tf.int32)  # index 1 twice: summed

    def f(x):
        return tf.scatter_nd(idx, x[0], [5, 6])

    return fn(f, [None, 4, 6]), {"SCATTER_ND"}


def space_batch():
    w = const((3, 3, 2, 4), 3, 0.3)

    def f(x):
        # A dilated convolution spelled out, with odd padding and crops (the activations in between keep the
        # converter from fusing the three back into one dilated CONV_2D).
        s = tf.nn.relu6(tf.space_to_batch_nd(x, [2, 2], [[2, 3], [2, 1]]))
        c = tf.nn.conv2d(s, w, 1, "VALID") * 0.5
        b = tf.compat.v1.batch_to_space_nd(c, [2, 2], [[0, 1], [1, 0]])
        return tf.nn.relu(b), tf.space_to_batch_nd(x, [3, 1], [[2, 1], [0, 0]])

    return fn(f, [1, 9, 7, 2]), {"SPACE_TO_BATCH_ND", "BATCH_TO_SPACE_ND"}


def shape_math():
    def f(x):
        n = tf.shape(x)[0]  # the free batch: SHAPE and STRIDED_SLICE stay in the file
        r = tf.cast(tf.range(n * 3), tf.float32)  # RANGE of a computed limit
        a = tf.cast(x * 10.0, tf.int32)
        fd, fm = tf.math.floordiv(a, 3), tf.math.floormod(a, -3)
        ff = tf.math.floormod(x, 0.3) + tf.math.floordiv(x, 0.3)
        ne = tf.not_equal(a, 2)
        logic = tf.logical_not(tf.logical_or(tf.logical_and(ne, x > 0.0), x < -0.5))
        return fd, fm, ff, tf.cast(logic, tf.float32) + tf.reduce_sum(r)

    return fn(f, [None, 6, 4]), {"RANGE", "FLOOR_DIV", "FLOOR_MOD", "NOT_EQUAL", "LOGICAL_AND", "LOGICAL_OR", "LOGICAL_NOT"}


def misc_math():
    def f(x, y):
        values, indices = tf.math.top_k(x, k=3)
        return tf.math.add_n([x, y, x * y]), tf.round(x * 3.0) + tf.sign(y - 0.1), values, indices

    return fn(f, [None, 4, 6], [None, 4, 6]), {"ADD_N", "ROUND", "SIGN", "TOPK_V2"}


# ----- real-shaped models --------------------------------------------------------------------------------

def transformer():
    """A Keras transformer block: MultiHeadAttention, LayerNorm, FFN, reshapes through tf.shape."""
    seq, dim, heads = 6, 16, 2
    x = tf.keras.Input((seq * dim,), name="tokens")

    class Block(tf.keras.layers.Layer):
        def __init__(self):
            super().__init__()
            self.mha = tf.keras.layers.MultiHeadAttention(heads, dim // heads)
            self.ln1 = tf.keras.layers.LayerNormalization(epsilon=1e-5)
            self.ln2 = tf.keras.layers.LayerNormalization(epsilon=1e-5)
            self.ff1 = tf.keras.layers.Dense(32, activation="gelu")
            self.ff2 = tf.keras.layers.Dense(dim)

        def call(self, t):
            h = tf.reshape(t, [tf.shape(t)[0], -1, dim])  # dynamic batch
            a = self.mha(h, h)
            h = self.ln1(h + a)
            h = self.ln2(h + self.ff2(self.ff1(h)))
            return tf.reshape(h, [tf.shape(h)[0], -1])

    return tf.keras.Model(x, Block()(x)), {"SHAPE", "BATCH_MATMUL", "SOFTMAX"}


def unet(name="unet"):
    """A small Keras U-Net: Conv2D, Conv2DTranspose, concatenated skips, a tf.shape-driven reshape."""
    L = tf.keras.layers
    x = tf.keras.Input((16, 16, 3), name="image")
    c1 = L.Conv2D(8, 3, padding="same", activation="relu")(x)
    p1 = L.MaxPooling2D(2)(c1)
    c2 = L.Conv2D(16, 3, padding="same", activation="relu")(p1)
    p2 = L.MaxPooling2D(2)(c2)
    b = L.Conv2D(16, 3, padding="same", activation="relu")(p2)
    u2 = L.Conv2DTranspose(16, 2, strides=2, padding="same")(b)
    c3 = L.Conv2D(16, 3, padding="same", activation="relu")(L.Concatenate()([u2, c2]))
    u1 = L.Conv2DTranspose(8, 3, strides=2, padding="same")(c3)
    c4 = L.Conv2D(8, 3, padding="same", activation="relu")(L.Concatenate()([u1, c1]))
    logits = L.Conv2D(4, 1)(c4)
    flat = L.Lambda(lambda t: tf.nn.softmax(tf.reshape(t, [tf.shape(t)[0], -1, 4]), axis=-1))(logits)
    return tf.keras.Model(x, flat, name=name), {"TRANSPOSE_CONV", "SHAPE", "CONCATENATION"}


# ----- conversion ----------------------------------------------------------------------------------------

def convert(model, kind=None):
    """Float; kind "f16": fp16 weights; "int8": int8 kernels with float I/O (QUANTIZE ... DEQUANTIZE chains)."""
    if isinstance(model, tf.keras.Model):
        conv = tf.lite.TFLiteConverter.from_keras_model(model)
        specs = [list(i.shape) for i in model.inputs]
    else:
        cf = model.get_concrete_function()
        conv = tf.lite.TFLiteConverter.from_concrete_functions([cf], model)
        specs = [list(i.shape) for i in cf.inputs]
    if kind == "f16":
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.target_spec.supported_types = [tf.float16]
    elif kind == "int8":
        conv.optimizations = [tf.lite.Optimize.DEFAULT]

        def rep():
            for i in range(8):
                yield [np.random.default_rng(i + 17 * k).standard_normal([1] + s[1:]).astype(np.float32) for k, s in enumerate(specs)]

        conv.representative_dataset = rep
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    return conv.convert()


def op_names(data):
    it = Interpreter(model_content=data)
    return sorted({d["op_name"] for d in it._get_ops_details()})


def main():
    os.makedirs(OUT, exist_ok=True)
    tf.keras.utils.set_random_seed(7)
    jobs = [
        ("shape_reshape", shape_reshape, None),
        ("pack_unpack", pack_unpack, None),
        ("split", split, None),
        ("fill_broadcast", fill_broadcast, None),
        ("zeros_like", zeros_like, None),
        ("transpose_conv", transpose_conv, None),
        ("gather_nd", gather_nd, None),
        ("select", select, None),
        ("one_hot", one_hot, None),
        ("cumsum", cumsum, None),
        ("norms", norms, None),
        ("reverse", reverse, None),
        ("scatter_nd", scatter_nd, None),
        ("space_batch", space_batch, None),
        ("split_int8", split, "int8"),
        ("shape_math", shape_math, None),
        ("misc_math", misc_math, None),
        ("transformer", transformer, None),
        ("transformer_f16", transformer, "f16"),
        ("unet", unet, None),
        ("unet_f16", unet, "f16"),
    ]
    only = set(os.environ.get("ONLY", "").split(",")) - {""}
    missing = []
    for name, make, kind in jobs:
        if only and name not in only:
            continue
        tf.keras.utils.set_random_seed(7)
        model, want = make()
        if kind == "f16":
            want = want | {"DEQUANTIZE"}
        elif kind == "int8":
            want = want | {"QUANTIZE", "DEQUANTIZE"}
        data = convert(model, kind)
        ops = op_names(data)
        with open(os.path.join(OUT, name + ".tflite"), "wb") as f:
            f.write(data)
        print(f"{name}: {len(data)} bytes: {' '.join(ops)}")
        if not want <= set(ops):
            missing.append(f"{name} lacks {sorted(want - set(ops))}")
    if missing:
        sys.exit("; ".join(missing))


if __name__ == "__main__":
    main()
