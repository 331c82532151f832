"""Writes into core/tests/data/rnn/, with TensorFlow's converter and full integer quantization (a representative
dataset, int8 input and output), whose UNIDIRECTIONAL_SEQUENCE_LSTMs are LiteRT's integer "8x8_16" LSTM (int8
weights per gate, int32 biases, int16 cell state, five intermediates):

* keras_lstm_int8.tflite: the Keras 2 (tf_keras) LSTM stack of make_rnn_tflite.py (an LSTM, a Bidirectional
  LSTM, an LSTM returning its last step), same weights;
* keras_lstm1.tflite and keras_lstm1_int8.tflite: one Keras LSTM returning its sequence, float and int8.

    pip install --no-deps --target .cache/tf-keras-2.21 tf-keras==2.21.0
    PYTHONPATH=.cache/tf-keras-2.21 .venv-tf/bin/python core/tests/data/make_rnn_int8_tflite.py
"""
import os

import numpy as np
import tensorflow as tf
import tf_keras as keras

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rnn")



def representative():
    rng = np.random.default_rng(0)
    for _ in range(32):
        yield [rng.uniform(-1, 1, (2, 9, 6)).astype(np.float32)]


def write(model, name, int8):
    c = tf.lite.TFLiteConverter.from_keras_model(model)
    if int8:
        c.optimizations = [tf.lite.Optimize.DEFAULT]
        c.representative_dataset = representative
        c.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        c.inference_input_type = tf.int8
        c.inference_output_type = tf.int8
    path = os.path.join(OUT, name)
    with open(path, "wb") as f:
        f.write(c.convert())
    print("wrote", path)


def random_biases(model):
    # Non-zero biases (Keras starts them at 0, forget gate 1), as make_rnn_tflite.py does.
    for w in model.weights:
        if "bias" in w.name:
            w.assign(tf.random.stateless_uniform(w.shape, seed=[1, len(w.name)], minval=-0.5, maxval=0.5))


keras.utils.set_random_seed(0)
x = keras.Input((9, 6), batch_size=2, name="x")
y = keras.layers.LSTM(8, return_sequences=True)(x)
y = keras.layers.Bidirectional(keras.layers.LSTM(5, return_sequences=True))(y)
y = keras.layers.LSTM(4)(y)
stack = keras.Model(x, y)
random_biases(stack)
write(stack, "keras_lstm_int8.tflite", True)

keras.utils.set_random_seed(1)
x = keras.Input((9, 6), batch_size=2, name="x")
one = keras.Model(x, keras.layers.LSTM(8, return_sequences=True)(x))
random_biases(one)
write(one, "keras_lstm1.tflite", False)
write(one, "keras_lstm1_int8.tflite", True)
