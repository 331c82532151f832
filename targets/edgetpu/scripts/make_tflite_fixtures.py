"""Writes the TFLite test fixtures of tpu-sdk-edgetpu with TensorFlow's converter and LiteRT.

For each model NAME it writes into the output directory (default: ../tests/data):
  NAME.tflite        the converted model (small: seeded random weights)
  NAME.input_K.npy   seeded inputs
  NAME.output_K.npy  LiteRT's outputs on those inputs (reference kernels), the oracle the Rust tests use

Requires tensorflow-cpu and ai-edge-litert (see targets/edgetpu/README.md). Deterministic: re-running it
gives the same models and reference outputs.

    python targets/edgetpu/scripts/make_tflite_fixtures.py [OUT_DIR]
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter, OpResolverType

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "data")


def seeded(shape, seed, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def convnet():
    """Conv (SAME, stride 2, relu), depthwise (VALID, relu6, multiplier 2), pooling, dilated conv, dense."""
    x = tf.keras.Input((16, 16, 3), batch_size=1, name="image")
    y = tf.keras.layers.Conv2D(8, 3, strides=2, padding="same", activation="relu")(x)
    y = tf.keras.layers.DepthwiseConv2D(3, padding="valid", depth_multiplier=2, activation=tf.nn.relu6)(y)
    y = tf.keras.layers.MaxPooling2D(2, strides=1, padding="same")(y)
    y = tf.keras.layers.Conv2D(6, 3, dilation_rate=2, padding="same", activation="tanh")(y)
    y = tf.keras.layers.AveragePooling2D(3, strides=2, padding="same")(y)
    y = tf.keras.layers.Conv2D(4, 1, padding="valid")(y)
    y = tf.keras.layers.Flatten()(y)
    y = tf.keras.layers.Dense(10)(y)
    y = tf.keras.layers.Softmax()(y)
    return tf.keras.Model(x, y, name="convnet")


def opsnet():
    """Elementwise, shape and resize ops on two inputs."""
    a = tf.keras.Input((8, 8, 4), batch_size=1, name="a")
    b = tf.keras.Input((4,), batch_size=1, name="b")

    class Ops(tf.keras.layers.Layer):
        def build(self, _):
            self.w = self.add_weight(shape=(4, 5), initializer="glorot_uniform", name="w")
            self.c = self.add_weight(shape=(1, 1, 1, 4), initializer="random_normal", name="c")

        def call(self, inputs):
            a, b = inputs
            s = a * self.c + tf.reshape(b, (1, 1, 1, 4))
            s = s - tf.reduce_mean(s, axis=[1, 2], keepdims=True)
            s = s / (1.0 + tf.abs(s))
            h = tf.nn.relu6(s + 3.0) * s / 6.0  # hard swish pattern
            up = tf.compat.v1.image.resize_bilinear(h, (12, 12), half_pixel_centers=True)
            nn = tf.compat.v1.image.resize_nearest_neighbor(h, (16, 16))
            up = tf.nn.max_pool2d(up, 3, 1, "VALID")[:, :8, :8, :]
            cat = tf.concat([up, nn[:, ::2, ::2, :], tf.sigmoid(h), tf.tanh(h)], axis=3)
            p = tf.pad(cat, [[0, 0], [1, 1], [2, 0], [0, 0]])
            t = tf.transpose(p, [0, 3, 1, 2])
            sl = t[:, 1:13:2, 2:, :]
            g = tf.gather(sl, [0, 3, 1], axis=1)
            m = tf.matmul(g, tf.transpose(g, [0, 1, 3, 2]))
            flat = tf.reshape(m, (1, -1))[:, :4]
            d = tf.matmul(flat, self.w)
            return tf.squeeze(tf.reshape(d, (1, 1, 5)), axis=1), tf.reduce_max(m, axis=[2, 3])

    outs = Ops()([a, b])
    return tf.keras.Model([a, b], list(outs), name="opsnet")


def convert(model, kind, calib_inputs=None):
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    if kind == "f16":
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.target_spec.supported_types = [tf.float16]
    elif kind == "int8":
        conv.optimizations = [tf.lite.Optimize.DEFAULT]

        def rep():
            for i in range(8):
                yield [seeded(t.shape, 1000 + i + 17 * k) for k, t in enumerate(calib_inputs)]

        conv.representative_dataset = rep
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        conv.inference_input_type = tf.int8
        conv.inference_output_type = tf.int8
    return conv.convert()


def run_litert(model_bytes, inputs):
    it = Interpreter(model_content=model_bytes, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), inputs):
        it.set_tensor(d["index"], x)
    it.invoke()
    return [it.get_tensor(d["index"]) for d in it.get_output_details()]


def main():
    os.makedirs(OUT, exist_ok=True)
    tf.keras.utils.set_random_seed(7)
    nets = {"convnet": convnet(), "opsnet": opsnet()}
    jobs = [("convnet", "f32"), ("convnet", "f16"), ("opsnet", "f32"), ("convnet", "int8")]
    for net, kind in jobs:
        model = nets[net]
        name = f"{net}_{kind}"
        data = convert(model, kind, model.inputs)
        it = Interpreter(model_content=data)
        details = it.get_input_details()
        inputs = []
        for k, d in enumerate(details):
            x = seeded(d["shape"], 100 + k)
            if d["dtype"] == np.int8:
                s, z = d["quantization"]
                x = np.clip(np.round(x / s) + z, -128, 127).astype(np.int8)
            inputs.append(x)
        outputs = run_litert(data, inputs)
        with open(os.path.join(OUT, name + ".tflite"), "wb") as f:
            f.write(data)
        for k, x in enumerate(inputs):
            np.save(os.path.join(OUT, f"{name}.input_{k}.npy"), x)
        for k, y in enumerate(outputs):
            np.save(os.path.join(OUT, f"{name}.output_{k}.npy"), y)
        print(f"{name}: {len(data)} bytes, inputs {[x.shape for x in inputs]}, outputs {[y.shape for y in outputs]}")


if __name__ == "__main__":
    main()
