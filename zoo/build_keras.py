"""Keras models with seeded random weights → float TFLite and full-int8 TFLite by TensorFlow's own converter.

Run by the TensorFlow venv's Python (`.venv-tf`); `zoo/build.py` calls it. Weights are Keras' seeded initialisers;
BatchNorm statistics are then set from one training-mode pass over the calibration samples (momentum 0), so deep
networks keep activations in a sane range as pretrained ones do, instead of growing layer by layer.
"""
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402

import common  # noqa: E402


def _apps():
    import keras
    A = keras.applications
    s = (128, 128, 3)
    # logits, not softmax: random weights give near-uniform probabilities that int8 (scale 1/256) cannot tell
    # apart, which would make every int8 error ~1 and say nothing about the quantizer
    # name: (constructor, input shape without batch, input range)
    return {
        "keras_mobilenet": (lambda: A.MobileNet(input_shape=s, weights=None, classifier_activation=None), s, (-1, 1)),
        "keras_mobilenet_v2": (lambda: A.MobileNetV2(input_shape=s, weights=None, classifier_activation=None), s, (-1, 1)),
        "keras_mobilenet_v2_035_96": (lambda: A.MobileNetV2(input_shape=(96, 96, 3), alpha=0.35, weights=None, classifier_activation=None),
                                      (96, 96, 3), (-1, 1)),
        "keras_mobilenet_v3_small": (lambda: A.MobileNetV3Small(input_shape=s, weights=None, classifier_activation=None), s, (0, 255)),
        "keras_mobilenet_v3_large": (lambda: A.MobileNetV3Large(input_shape=s, weights=None, classifier_activation=None), s, (0, 255)),
        "keras_efficientnet_b0": (lambda: A.EfficientNetB0(input_shape=s, weights=None, classifier_activation=None), s, (0, 255)),
        "keras_resnet50": (lambda: A.ResNet50(input_shape=s, weights=None, classifier_activation=None), s, (-1, 1)),
        "keras_densenet121": (lambda: A.DenseNet121(input_shape=s, weights=None, classifier_activation=None), s, (-1, 1)),
        "keras_nasnet_mobile": (lambda: A.NASNetMobile(input_shape=s, weights=None, classifier_activation=None), s, (-1, 1)),
        "keras_transformer": (_transformer, (16, 64), (-1, 1)),
        "keras_unet": (_unet, (64, 64, 3), (-1, 1)),
    }


def _transformer():
    """One pre-norm transformer encoder block over 16 tokens of width 64, then a head that flattens with the
    dynamic `tf.reshape(x, [tf.shape(x)[0], -1])` idiom (SHAPE → STRIDED_SLICE → PACK → RESHAPE in TFLite)."""
    import keras
    import tensorflow as tf

    class FlattenDynamic(keras.layers.Layer):
        def call(self, x):
            return tf.reshape(x, tf.stack([tf.shape(x)[0], 16 * 64]))

    x = inp = keras.Input((16, 64))
    h = keras.layers.LayerNormalization()(x)
    h = keras.layers.MultiHeadAttention(num_heads=4, key_dim=16)(h, h)
    x = x + h
    h = keras.layers.LayerNormalization()(x)
    h = keras.layers.Dense(128, activation="gelu")(h)
    h = keras.layers.Dense(64)(h)
    x = x + h
    x = FlattenDynamic()(x)
    x = keras.layers.Dense(10, activation="softmax")(x)
    return keras.Model(inp, x)


def _unet():
    """A three-level U-Net whose decoder resizes to the skip connection's run-time size (`tf.shape(skip)[1:3]`),
    with transposed convolutions on the way up."""
    import keras
    import tensorflow as tf

    class ResizeLike(keras.layers.Layer):
        def call(self, x, like):
            return tf.image.resize(x, tf.shape(like)[1:3], method="bilinear")

    def block(x, c):
        x = keras.layers.Conv2D(c, 3, padding="same", use_bias=False)(x)
        x = keras.layers.BatchNormalization()(x)
        x = keras.layers.ReLU()(x)
        return keras.layers.Conv2D(c, 3, padding="same", activation="relu")(x)

    inp = keras.Input((64, 64, 3))
    e1 = block(inp, 16)
    e2 = block(keras.layers.MaxPooling2D()(e1), 32)
    e3 = block(keras.layers.MaxPooling2D()(e2), 64)
    d2 = keras.layers.Conv2DTranspose(32, 2, strides=2)(e3)
    d2 = block(keras.layers.Concatenate()([ResizeLike()(d2, e2), e2]), 32)
    d1 = keras.layers.UpSampling2D()(d2)
    d1 = block(keras.layers.Concatenate()([ResizeLike()(d1, e1), e1]), 16)
    out = keras.layers.Conv2D(2, 1, activation="sigmoid")(d1)
    return keras.Model(inp, out)


def _init_batchnorm(model, cal):
    import keras
    bns = [l for l in model._flatten_layers() if isinstance(l, keras.layers.BatchNormalization)]
    if not bns:
        return
    for l in bns:
        l.momentum = 0.0
    model(cal, training=True)


def _convert(saved, cal, int8):
    import tensorflow as tf
    conv = tf.lite.TFLiteConverter.from_saved_model(saved)
    if int8:
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.representative_dataset = lambda: ([cal[i:i + 1]] for i in range(len(cal)))
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        conv.inference_input_type = tf.int8
        conv.inference_output_type = tf.int8
    return conv.convert()


def build(name, ctor, shape, rng, log):
    import keras
    d = common.model_dir(name)
    os.makedirs(d, exist_ok=True)
    keras.utils.set_random_seed(0)
    model = ctor()
    cal = common.samples((1,) + shape, common.N_CAL, rng[0], rng[1], seed=1)
    x = common.samples((1,) + shape, 1, rng[0], rng[1], seed=2)
    _init_batchnorm(model, cal)
    saved = os.path.join(d, "saved_model")
    model.export(saved, verbose=False)  # a SavedModel with a batch-free signature
    with open(os.path.join(d, "model.tflite"), "wb") as f:
        f.write(_convert(saved, cal, int8=False))
    np.save(os.path.join(d, "input_0.npy"), x)
    np.save(os.path.join(d, "cal.npy"), cal)
    meta = {"name": name, "source": "keras.applications / custom Keras, seeded random weights",
            "format": "tflite", "family": "keras", "pretrained": False,
            "inputs": [{"shape": [1] + list(shape), "dtype": "float32", "range": list(rng)}]}
    try:
        with open(os.path.join(d, "peer_int8.tflite"), "wb") as f:
            f.write(_convert(saved, cal, int8=True))
    except Exception as e:  # the table records it; the float model is still useful
        os.remove(os.path.join(d, "peer_int8.tflite"))
        meta["peer_int8_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
        log(f"TF full-int8 conversion failed: {meta['peer_int8_error']}")
    import shutil
    shutil.rmtree(saved)
    common.mark_built(name, meta)


def main():
    apps = _apps()
    names = common.selected(list(apps))
    t0 = time.time()
    for i, name in enumerate(names, 1):
        if common.is_built(name):
            common.progress(i, len(names), name, "cached", t0)
            continue
        ctor, shape, rng = apps[name]
        try:
            build(name, ctor, shape, rng, lambda m: print(f"    {name}: {m}", flush=True))
            common.progress(i, len(names), name, "built", t0)
        except Exception as e:
            common.fail(name, e)


if __name__ == "__main__":
    main()
