"""Builds the Python package's test models with TensorFlow's converter (run with .venv-tf/bin/python from the
repository root; the files are committed, this script says how they were made):

- classifier_uint8.tflite: a small seeded-random conv classifier, 32x32x3 uint8 image in, 8 uint8 class scores
  out (a softmax), fully integer-quantized by the TF converter: the kind of model pycoral's
  examples/classify_image.py takes (it refuses inputs other than uint8). classifier_uint8.labels.txt: its labels.
- ssd_outputs.tflite: a float model shaped like an SSD model's TFLite_Detection_PostProcess outputs: image
  [1, 16, 16, 3] in; out boxes [1, 4, 4], classes [1, 4], scores [1, 4], count [1], read from the image's first
  25 values (so a test writes the detections it wants into the image).
"""

import os

import numpy as np
import tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))
tf.random.set_seed(7)
rng = np.random.default_rng(7)


def classifier():
    inp = tf.keras.Input((32, 32, 3))
    x = tf.keras.layers.Rescaling(1 / 127.5, offset=-1)(inp)
    x = tf.keras.layers.Conv2D(8, 3, strides=2, activation="relu")(x)
    x = tf.keras.layers.DepthwiseConv2D(3, activation="relu")(x)
    x = tf.keras.layers.Conv2D(16, 1, activation="relu")(x)
    x = tf.keras.layers.GlobalAveragePooling2D()(x)
    x = tf.keras.layers.Dense(8)(x)
    out = tf.keras.layers.Softmax()(x)
    m = tf.keras.Model(inp, out)

    def rep():
        for _ in range(32):
            yield [rng.uniform(0, 255, (1, 32, 32, 3)).astype(np.float32)]

    c = tf.lite.TFLiteConverter.from_keras_model(m)
    c.optimizations = [tf.lite.Optimize.DEFAULT]
    c.representative_dataset = rep
    c.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    c.inference_input_type = tf.uint8
    c.inference_output_type = tf.uint8
    with open(os.path.join(HERE, "classifier_uint8.tflite"), "wb") as f:
        f.write(c.convert())
    with open(os.path.join(HERE, "classifier_uint8.labels.txt"), "w") as f:
        f.write("".join(f"{i} class_{name}\n" for i, name in enumerate("abcdefgh")))


def ssd_outputs():
    @tf.function(input_signature=[tf.TensorSpec([1, 16, 16, 3], tf.float32, name="image")])
    def f(image):
        raw = tf.reshape(image, [1, 768])
        boxes = tf.reshape(raw[:, 0:16], [1, 4, 4])
        classes = raw[:, 16:20] + 0.0
        scores = raw[:, 20:24] + 0.0
        count = tf.reshape(raw[:, 24:25], [1])
        return boxes, classes, scores, count

    c = tf.lite.TFLiteConverter.from_concrete_functions([f.get_concrete_function()], f)
    with open(os.path.join(HERE, "ssd_outputs.tflite"), "wb") as fh:
        fh.write(c.convert())


if __name__ == "__main__":
    classifier()
    ssd_outputs()
