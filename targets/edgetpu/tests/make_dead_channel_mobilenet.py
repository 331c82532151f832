"""A Keras MobileNetV2 (weights=None, seeded) with dead depthwise channels, converted to a float TFLite model by
TensorFlow's converter: the case of issue 13 ("LiteRT refuses the file: no_integer_overflow_from_quantization
... DEPTHWISE_CONV_2D failed to prepare").

usage: make_dead_channel_mobilenet.py DIR
  writes DIR/mnv2_dead.tflite (float, NHWC input 1x96x96x3) and DIR/samples.npy (8 calibration samples,
  N on the first axis) and prints what it zeroed.

The dead channels are made as training (or pruning) leaves them: in the first block's depthwise convolution
one channel's kernel is all zero, and in the third block's (block_2, which has a residual connection, so the
network stays alive) every channel has a kernel of 1e-9 and a
BatchNorm gamma of 1e-9, so that after TF folds BatchNorm into the kernel the whole depthwise output (RELU6)
is within ~1e-15 of zero: the tensor whose tiny scale made LiteRT refuse the int8 file. Needs
tensorflow (TPU_SDK_TF_PYTHON); targets/edgetpu/tests/int8_litert.rs drives it.
"""
import os
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf  # noqa: E402


def main(out):
    tf.keras.utils.set_random_seed(13)
    m = tf.keras.applications.MobileNetV2(input_shape=(96, 96, 3), alpha=0.35, weights=None, classes=10)
    dw = [l for l in m.layers if isinstance(l, tf.keras.layers.DepthwiseConv2D)]
    # Block 0: channel 3's kernel all zero.
    k = dw[0].get_weights()[0]
    k[:, :, 3, :] = 0.0
    dw[0].set_weights([k])
    # block_2: every channel tiny, its BatchNorm scale tiny too (beta 0: the output is ~0 but not exactly).
    k = dw[2].get_weights()[0]
    k[...] = 1e-9
    dw[2].set_weights([k])
    bn = m.get_layer(dw[2].name.replace("depthwise", "depthwise_BN"))
    gamma, beta, mean, var = bn.get_weights()
    gamma[:] = 1e-9
    bn.set_weights([gamma, np.zeros_like(beta), mean, var])
    conv = tf.lite.TFLiteConverter.from_keras_model(m)
    open(os.path.join(out, "mnv2_dead.tflite"), "wb").write(conv.convert())
    rng = np.random.default_rng(13)
    np.save(os.path.join(out, "samples.npy"), rng.uniform(-1.0, 1.0, (8, 1, 96, 96, 3)).astype(np.float32))
    print(f"zeroed: {dw[0].name} channel 3; {dw[2].name} all channels (kernel 1e-9, BN gamma 1e-9)")


if __name__ == "__main__":
    main(sys.argv[1])
