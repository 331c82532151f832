"""The peer quantizer of the Edge TPU tests: onnxruntime's post-training static quantization (QDQ, int8
activations and weights, weights per channel, MinMax calibration) of an ONNX model with one input.

usage: ort_quantize_static.py MODEL.onnx DIR N_CAL N_EVAL
Calibrates on DIR/cal{i}.npy (i < N_CAL), runs the quantized model on DIR/eval{i}.npy (i < N_EVAL) and writes
DIR/ort_int8_eval{i}.npy (its first output). Needs onnxruntime.
"""
import os
import sys

import numpy as np
import onnxruntime as ort
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

model, d, n_cal, n_eval = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
name = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).get_inputs()[0].name


class Reader(CalibrationDataReader):
    def __init__(self):
        self.it = iter(range(n_cal))

    def get_next(self):
        i = next(self.it, None)
        return None if i is None else {name: np.load(os.path.join(d, f"cal{i}.npy"))}


out = os.path.join(d, "ort_int8.onnx")
quantize_static(model, out, Reader(), quant_format=QuantFormat.QDQ, per_channel=True, activation_type=QuantType.QInt8, weight_type=QuantType.QInt8)
so = ort.SessionOptions()
so.intra_op_num_threads = 1
sess = ort.InferenceSession(out, so, providers=["CPUExecutionProvider"])
for i in range(n_eval):
    y = sess.run(None, {name: np.load(os.path.join(d, f"eval{i}.npy"))})[0]
    np.save(os.path.join(d, f"ort_int8_eval{i}.npy"), np.ascontiguousarray(y))
