"""TensorFlow's post-training int8 quantization as the peer for tpu-sdk's quantizer.

usage:
  compare_tf_quantization.py make DIR       build the Keras models, write per model NAME:
                                            NAME_float.tflite, NAME_tf_int8.tflite (TF's full-int8 converter,
                                            int8 inputs/outputs), NAME_cal.npy (the representative data, N on
                                            the first axis) and NAME_eval.npy (held-out samples); prints the names
  compare_tf_quantization.py eval DIR NAME  run NAME_float.tflite, NAME_tf_int8.tflite and NAME_ours.tflite
                                            (written by tpu-sdk) on NAME_eval.npy with LiteRT's reference
                                            kernels; prints JSON {"tf_sqnr_db", "ours_sqnr_db", "tf_max_abs",
                                            "ours_max_abs"} of each int8 model against the float model

Needs tensorflow (the converter and tf.lite.Interpreter). The Rust test targets/edgetpu/tests/tf_comparison.rs
drives it when TPU_SDK_TF_PYTHON names such a Python.
"""
import json
import os
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf  # noqa: E402

N_CAL, N_EVAL = 64, 16


def cnn():
    x = inp = tf.keras.Input((32, 32, 3), batch_size=1)
    x = tf.keras.layers.Conv2D(16, 3, strides=2, padding="same")(x)
    x = tf.keras.layers.BatchNormalization()(x)
    x = tf.keras.layers.ReLU(6.0)(x)
    x = tf.keras.layers.DepthwiseConv2D(3, padding="same", activation="relu")(x)
    x = tf.keras.layers.Conv2D(24, 1, activation="relu")(x)
    x = tf.keras.layers.MaxPooling2D(2)(x)
    x = tf.keras.layers.Conv2D(32, 3, padding="same", activation="relu")(x)
    x = tf.keras.layers.GlobalAveragePooling2D()(x)
    x = tf.keras.layers.Dense(10)(x)
    return tf.keras.Model(inp, tf.keras.layers.Softmax()(x))


def residual():
    x = inp = tf.keras.Input((24, 24, 8), batch_size=1)
    y = tf.keras.layers.Conv2D(8, 3, padding="same", activation="relu")(x)
    y = tf.keras.layers.Conv2D(8, 3, padding="same")(y)
    x = tf.keras.layers.ReLU()(tf.keras.layers.Add()([x, y]))
    x = tf.keras.layers.AveragePooling2D(2)(x)
    x = tf.keras.layers.Conv2D(16, 3, padding="valid", activation="relu")(x)
    x = tf.keras.layers.Flatten()(x)
    return tf.keras.Model(inp, tf.keras.layers.Dense(5)(x))


def mlp():
    x = inp = tf.keras.Input((20,), batch_size=1)
    x = tf.keras.layers.Dense(64, activation="relu")(x)
    x = tf.keras.layers.Dense(32, activation="relu")(x)
    return tf.keras.Model(inp, tf.keras.layers.Dense(4, activation="sigmoid")(x))


MODELS = {"cnn": cnn, "residual": residual, "mlp": mlp}


def make(out):
    os.makedirs(out, exist_ok=True)
    for i, (name, f) in enumerate(MODELS.items()):
        tf.keras.utils.set_random_seed(100 + i)
        m = f()
        # Non-trivial batch-norm statistics.
        for layer in m.layers:
            if isinstance(layer, tf.keras.layers.BatchNormalization):
                g, b, mu, var = layer.get_weights()
                rng = np.random.RandomState(i)
                layer.set_weights([rng.uniform(0.5, 1.5, g.shape), rng.normal(0, 0.1, b.shape), rng.normal(0, 0.1, mu.shape), rng.uniform(0.5, 1.5, var.shape)])
        shape = tuple(m.inputs[0].shape)
        rng = np.random.RandomState(1000 + i)
        cal = rng.normal(0, 1, (N_CAL,) + shape).astype(np.float32)
        ev = rng.normal(0, 1, (N_EVAL,) + shape).astype(np.float32)
        np.save(os.path.join(out, f"{name}_cal.npy"), cal)
        np.save(os.path.join(out, f"{name}_eval.npy"), ev)
        conv = tf.lite.TFLiteConverter.from_keras_model(m)
        open(os.path.join(out, f"{name}_float.tflite"), "wb").write(conv.convert())
        conv = tf.lite.TFLiteConverter.from_keras_model(m)
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.representative_dataset = lambda: ([s] for s in cal)
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        conv.inference_input_type = tf.int8
        conv.inference_output_type = tf.int8
        open(os.path.join(out, f"{name}_tf_int8.tflite"), "wb").write(conv.convert())
        print("MODEL", name, flush=True)


def run(path, x):
    it = tf.lite.Interpreter(model_path=path, experimental_op_resolver_type=tf.lite.experimental.OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    d = it.get_input_details()[0]
    o = it.get_output_details()[0]
    if d["dtype"] == np.int8:
        s, z = d["quantization"]
        x = np.clip(np.round(x / s) + z, -128, 127).astype(np.int8)
    it.set_tensor(d["index"], x.reshape(d["shape"]))
    it.invoke()
    y = it.get_tensor(o["index"])
    if o["dtype"] == np.int8:
        s, z = o["quantization"]
        y = (y.astype(np.float64) - z) * s
    return y.astype(np.float64).ravel()


def evaluate(out, name):
    ev = np.load(os.path.join(out, f"{name}_eval.npy"))
    p = lambda k: os.path.join(out, f"{name}_{k}.tflite")  # noqa: E731
    want = np.concatenate([run(p("float"), x) for x in ev])
    res = {}
    for k in ["tf_int8", "ours"]:
        got = np.concatenate([run(p(k), x) for x in ev])
        noise = np.sum((want - got) ** 2)
        res[k.replace("_int8", "") + "_sqnr_db"] = float(10 * np.log10(np.sum(want**2) / noise)) if noise > 0 else None
        res[k.replace("_int8", "") + "_max_abs"] = float(np.max(np.abs(want - got)))
    print("RESULT", json.dumps(res), flush=True)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "make":
        make(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "eval":
        evaluate(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
