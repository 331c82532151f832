"""Writes the TFLite control-flow fixtures of core/tests/rnn_models.rs, converted by TensorFlow's converter:

- rnn/keras3_recurrent.tflite: Keras 3 GRU, LSTM and SimpleRNN layers (Keras 3's recurrent layers convert to WHILE
  loops whose bodies read and write TensorArrays as GATHER and SLICE/CONCATENATION with run-time offsets);
- rnn/tf_cond_while.tflite: a tf.function with tf.cond (IF) and a tf.while_loop whose trip count depends on the
  data (WHILE).

    .venv-tf/bin/python core/tests/data/make_control_flow_tflite.py
"""
import os

import tensorflow as tf

DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rnn")


def keras3_recurrent():
    import keras
    keras.utils.set_random_seed(0)
    x = keras.Input((7, 5), batch_size=2, name="x")
    y = keras.layers.GRU(6, return_sequences=True)(x)
    y = keras.layers.LSTM(5, return_sequences=True)(y)
    y = keras.layers.SimpleRNN(4)(y)
    model = keras.Model(x, y)
    for w in model.weights:  # non-zero biases, so every gate's bias is exercised
        if "bias" in w.path:
            w.assign(tf.random.stateless_uniform(w.shape, seed=[1, len(w.path)], minval=-0.5, maxval=0.5))
    return tf.lite.TFLiteConverter.from_keras_model(model).convert()


def cond_while():
    @tf.function(input_signature=[tf.TensorSpec([3, 4], tf.float32, name="x")])
    def f(x):
        # IF: which branch depends on the data
        y = tf.cond(tf.reduce_sum(x) > 0.0, lambda: tf.nn.relu(x) * 2.0, lambda: tf.abs(x) - 1.0)
        # WHILE: halve until the largest magnitude is below 0.5 (at most 10 times)
        def cond(i, v):
            return tf.logical_and(i < 10, tf.reduce_max(tf.abs(v)) >= 0.5)

        def body(i, v):
            return i + 1, v * 0.5 + 0.01

        n, z = tf.while_loop(cond, body, [tf.constant(0), y])
        return {"y": z, "steps": n}

    c = tf.lite.TFLiteConverter.from_concrete_functions([f.get_concrete_function()], f)
    return c.convert()


if __name__ == "__main__":
    for name, make in [("keras3_recurrent.tflite", keras3_recurrent), ("tf_cond_while.tflite", cond_while)]:
        with open(os.path.join(DIR, name), "wb") as out:
            out.write(make())
        print("wrote", os.path.join(DIR, name))
