"""Writes core/tests/data/rnn/keras_lstm.tflite: a Keras 2 (tf_keras) model with an LSTM and a Bidirectional LSTM,
converted by TensorFlow's converter, which fuses them into UNIDIRECTIONAL_SEQUENCE_LSTM (the backward one between
REVERSE_V2s). Keras 3 LSTMs convert to WHILE loops instead, hence tf_keras (2.21, matching TensorFlow 2.21):

    pip install --no-deps --target .cache/tf-keras-2.21 tf-keras==2.21.0
    PYTHONPATH=.cache/tf-keras-2.21 .venv-tf/bin/python core/tests/data/make_rnn_tflite.py
"""
import os

import tensorflow as tf
import tf_keras as keras

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rnn", "keras_lstm.tflite")

keras.utils.set_random_seed(0)
x = keras.Input((9, 6), batch_size=2, name="x")
y = keras.layers.LSTM(8, return_sequences=True)(x)
y = keras.layers.Bidirectional(keras.layers.LSTM(5, return_sequences=True))(y)
y = keras.layers.LSTM(4)(y)
model = keras.Model(x, y)
# Non-zero biases (Keras starts them at 0, forget gate 1), so the gate reordering of every block is exercised.
for w in model.weights:
    if "bias" in w.name:
        w.assign(tf.random.stateless_uniform(w.shape, seed=[1, len(w.name)], minval=-0.5, maxval=0.5))
with open(OUT, "wb") as f:
    f.write(tf.lite.TFLiteConverter.from_keras_model(model).convert())
print("wrote", OUT)
