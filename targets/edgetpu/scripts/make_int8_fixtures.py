"""Writes the full-int8 TFLite fixtures of the int8 CPU runtime test (core/tests/tflite_int8.rs).

Small Keras models with seeded random weights, converted by TensorFlow's converter with a representative data
set to full int8 (TFLITE_BUILTINS_INT8): int8 inputs and outputs, and "_fio" variants with float inputs and
outputs (QUANTIZE / DEQUANTIZE at the edges). Only the models are written: the test draws random inputs and
asks LiteRT (test-support/litert_oracle.py) for the expected outputs at run time.

    /path/to/python-with-tensorflow targets/edgetpu/scripts/make_int8_fixtures.py [OUT_DIR [NAME...]]

OUT_DIR defaults to core/tests/data/int8; NAMEs (e.g. mobilenetv2_int8) restrict which files are written. Deterministic for a given TensorFlow version.
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np
import tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "..", "core", "tests", "data", "int8")
L = tf.keras.layers


class Fn(L.Layer):
    """Wraps a TensorFlow function as a Keras layer."""

    def __init__(self, fn, **kw):
        super().__init__(**kw)
        self.fn = fn

    def call(self, x):
        return self.fn(x)


def seeded(shape, seed, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def cnn():
    """Conv (relu6) → depthwise (relu6) → average pool → 1x1 conv → dense → softmax."""
    x = tf.keras.Input((16, 16, 3), batch_size=1, name="image")
    y = L.Conv2D(8, 3, strides=2, padding="same", activation=tf.nn.relu6)(x)
    y = L.DepthwiseConv2D(3, padding="same", activation=tf.nn.relu6)(y)
    y = L.AveragePooling2D(2)(y)
    y = L.Conv2D(12, 1, activation="relu")(y)
    y = L.Conv2D(6, 3, padding="valid", dilation_rate=1)(y)
    y = L.Flatten()(y)
    y = L.Dense(10)(y)
    y = L.Softmax()(y)
    return tf.keras.Model(x, y, name="cnn")


def mbv2():
    """A MobileNetV2 inverted-residual block (expand, depthwise stride 1 and 2, project, residual ADD)."""
    x = tf.keras.Input((12, 12, 8), batch_size=1, name="x")
    e = L.Conv2D(24, 1, activation=tf.nn.relu6)(x)
    d = L.DepthwiseConv2D(3, padding="same", activation=tf.nn.relu6)(e)
    p = L.Conv2D(8, 1)(d)
    r = L.Add()([x, p])
    e2 = L.Conv2D(16, 1, activation=tf.nn.relu6)(r)
    d2 = L.DepthwiseConv2D(3, strides=2, padding="same", depth_multiplier=2, activation=tf.nn.relu6)(e2)
    p2 = L.Conv2D(8, 1)(d2)
    return tf.keras.Model(x, [r, p2], name="mbv2")


def gap():
    """Conv then global average pooling (MEAN over H and W without keep_dims) and dense."""
    x = tf.keras.Input((6, 6, 4), batch_size=1, name="x")
    y = L.Conv2D(8, 3, padding="same")(x)
    y = L.GlobalAveragePooling2D()(y)
    return tf.keras.Model(x, L.Dense(3)(y), name="gap")


def opszoo():
    """Elementwise activations, MUL/SUB, CONCATENATION of differently scaled inputs, MEAN, nearest upsampling (TILE), PAD,
    MAX_POOL_2D, LEAKY_RELU, RELU, transposes and reshapes."""
    x = tf.keras.Input((8, 8, 4), batch_size=1, name="x")
    c = L.Conv2D(6, 3, padding="same")(x)
    hs = L.Activation(tf.keras.activations.hard_swish)(c)
    sg = L.Activation("sigmoid")(c)
    th = L.Activation("tanh")(c)
    m = L.Multiply()([sg, th])
    s = L.Subtract()([hs, m])
    lr = L.LeakyReLU(negative_slope=0.2)(s)
    rl = L.ReLU()(c)
    r6 = L.ReLU(max_value=6.0)(lr)
    cat = L.Concatenate()([lr, rl, r6, x])
    mp = L.MaxPooling2D(2)(cat)
    nn = L.UpSampling2D(2, interpolation="nearest")(mp)
    both = L.Add()([cat, nn])
    pad = L.ZeroPadding2D(((1, 0), (0, 1)))(both)
    mean = Fn(lambda v: tf.reduce_mean(v, axis=[1, 2], keepdims=True))(pad)
    sc = L.Multiply()([pad, mean])
    t = L.Permute((3, 1, 2))(sc)
    flat = L.Reshape((-1,))(t)
    d = L.Dense(7, activation="tanh")(flat)
    return tf.keras.Model(x, [d, sc], name="opszoo")


def resize():
    """RESIZE_BILINEAR and RESIZE_NEAREST_NEIGHBOR in their three coordinate modes (half_pixel_centers from
    tf.image.resize, align_corners, and neither), up and down, by non-integer factors."""
    x = tf.keras.Input((5, 7, 4), batch_size=1, name="x")
    c = L.Conv2D(6, 3, padding="same")(x)
    v1 = tf.compat.v1.image
    return tf.keras.Model(x, [
        Fn(lambda v: tf.image.resize(v, (9, 13), method="bilinear"))(c),
        Fn(lambda v: v1.resize_bilinear(v, (8, 11), align_corners=True))(c),
        Fn(lambda v: v1.resize_bilinear(v, (11, 6), align_corners=False, half_pixel_centers=False))(c),
        Fn(lambda v: tf.image.resize(v, (3, 4), method="bilinear"))(c),
        Fn(lambda v: tf.image.resize(v, (9, 13), method="nearest"))(c),
        Fn(lambda v: v1.resize_nearest_neighbor(v, (8, 11), align_corners=True))(c),
        Fn(lambda v: v1.resize_nearest_neighbor(v, (11, 6), align_corners=False, half_pixel_centers=False))(c),
    ], name="resize")


def mobilenetv2():
    """Keras' MobileNetV2 (width 0.35, 96x96 input, 10 classes, random weights): the benchmark model of
    bench/vs_litert.py and the largest model of the corpus."""
    return tf.keras.applications.MobileNetV2(input_shape=(96, 96, 3), alpha=0.35, weights=None, classes=10, classifier_activation="softmax")


def mlp():
    """Dense relu → dense logistic → dense → softmax."""
    x = tf.keras.Input((20,), batch_size=2, name="features")
    y = L.Dense(32, activation="relu")(x)
    y = L.Dense(16, activation="sigmoid")(y)
    y = L.Dense(5)(y)
    y = L.Softmax()(y)
    return tf.keras.Model(x, y, name="mlp")


def convert(model, int8_io):
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]

    def rep():
        for i in range(16):
            yield [seeded(tuple(d or 1 for d in t.shape), 1000 + i + 17 * k) for k, t in enumerate(model.inputs)]

    conv.representative_dataset = rep
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    if int8_io:
        conv.inference_input_type = tf.int8
        conv.inference_output_type = tf.int8
    return conv.convert()


def op_names(data):
    from tensorflow.lite.python import schema_py_generated as s

    m = s.ModelT.InitFromObj(s.Model.GetRootAsModel(data, 0))
    names = {v: k for k, v in s.BuiltinOperator.__dict__.items() if not k.startswith("_")}
    codes = [max(c.builtinCode, c.deprecatedBuiltinCode) for c in m.operatorCodes]
    return sorted({names.get(codes[o.opcodeIndex], "?") for o in m.subgraphs[0].operators})


def main():
    os.makedirs(OUT, exist_ok=True)
    tf.keras.utils.set_random_seed(11)
    nets = {"cnn": cnn(), "mbv2": mbv2(), "opszoo": opszoo(), "mlp": mlp(), "gap": gap(), "mobilenetv2": mobilenetv2(), "resize": resize()}
    jobs = [(n, True) for n in nets] + [("cnn", False), ("mlp", False)]
    only = sys.argv[2:]
    for net, int8_io in jobs:
        name = f"{net}_int8" if int8_io else f"{net}_int8_fio"
        if only and name not in only:
            continue
        data = convert(nets[net], int8_io)
        with open(os.path.join(OUT, name + ".tflite"), "wb") as f:
            f.write(data)
        print(f"{name}: {len(data)} bytes, ops {op_names(data)}")


if __name__ == "__main__":
    main()
