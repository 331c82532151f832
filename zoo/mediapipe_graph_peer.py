"""The peer for MediaPipe models that use MediaPipe's own custom ops (`Landmarks2TransformMatrix`,
`TransformTensorBilinear`, `TransformLandmarks`: face_landmark_with_attention.tflite), which LiteRT cannot run:
MediaPipe's runtime itself. Run by a Python that has the `mediapipe` wheel (0.10.14, numpy<2; the zoo keeps one in
`.cache/zoo/venv-mp`), it builds a `mediapipe.CalculatorGraph`:

    Matrix (the input tensor's values, row-major) → TensorConverterCalculator (a float tensor of the same bytes)
      → InferenceCalculator (CPU: the plain TFLite interpreter, no XNNPACK) with the op resolver of
        TfLiteCustomOpResolverCalculator (MediaPipe's kernels for its custom ops)
      → SplitTensorVectorCalculator → TensorsToFloatsCalculator per output

so the model sees exactly the given float values (the graph also returns the tensor it fed, which is checked).
One graph run per sample. Single-input float models only.

usage: python mediapipe_graph_peer.py MODEL.tflite INPUTS.npy OUT_DIR N_OUTPUTS
  INPUTS.npy: float32 samples stacked on a first axis, [N, *input shape] (or one sample of the input's shape,
  whose first dimension is 1). Writes OUT_DIR/output_K.npy, [N, number of values of output K] float32, in the
  model's output order.
"""
import os
import sys

import numpy as np


def graph_config(model, n_outputs):
    outs = " ".join(f'output_stream: "t{i}"' for i in range(n_outputs))
    ranges = " ".join(f"ranges {{ begin: {i} end: {i + 1} }}" for i in range(n_outputs))
    floats = "\n".join(f'node {{ calculator: "TensorsToFloatsCalculator" input_stream: "TENSORS:t{i}" '
                       f'output_stream: "FLOATS:f{i}" }}' for i in range(n_outputs))
    return f'''
input_stream: "matrix"
output_stream: "input_floats"
{" ".join(f'output_stream: "f{i}"' for i in range(n_outputs))}
node {{ calculator: "TfLiteCustomOpResolverCalculator" output_side_packet: "OP_RESOLVER:op_resolver" }}
node {{
  calculator: "TensorConverterCalculator" input_stream: "MATRIX:matrix" output_stream: "TENSORS:input_tensors"
  options {{ [mediapipe.TensorConverterCalculatorOptions.ext] {{
    zero_center: false use_custom_normalization: false row_major_matrix: true }} }}
}}
node {{ calculator: "TensorsToFloatsCalculator" input_stream: "TENSORS:input_tensors" output_stream: "FLOATS:input_floats" }}
node {{
  calculator: "InferenceCalculator" input_stream: "TENSORS:input_tensors" input_side_packet: "OP_RESOLVER:op_resolver"
  output_stream: "TENSORS:output_tensors"
  options {{ [mediapipe.InferenceCalculatorOptions.ext] {{ model_path: "{model}" delegate {{ tflite {{}} }} }} }}
}}
node {{
  calculator: "SplitTensorVectorCalculator" input_stream: "output_tensors" {outs}
  options {{ [mediapipe.SplitVectorCalculatorOptions.ext] {{ {ranges} }} }}
}}
{floats}
'''


def run(model, samples, n_outputs):
    """[outputs of each sample, flattened] by MediaPipe's runtime; `samples`: one input tensor each (float32)."""
    import mediapipe as mp
    from mediapipe.python import packet_creator, packet_getter
    g = mp.CalculatorGraph(graph_config=graph_config(os.path.abspath(model), n_outputs))
    streams = ["input_floats"] + [f"f{i}" for i in range(n_outputs)]
    got = {s: [] for s in streams}
    for s in streams:
        g.observe_output_stream(s, lambda _, p, s=s: got[s].append(np.array(packet_getter.get_float_list(p), np.float32)))
    g.start_run()
    for t, x in enumerate(samples):
        x = np.ascontiguousarray(x, np.float32)
        g.add_packet_to_input_stream("matrix", packet_creator.create_matrix(x.reshape(-1, x.shape[-1])).at(t))
    g.close()
    for s in streams:
        if len(got[s]) != len(samples):
            raise RuntimeError(f"MediaPipe's graph gave {len(got[s])} packets on {s} for {len(samples)} samples")
    for x, fed in zip(samples, got["input_floats"]):
        if not np.array_equal(np.asarray(x, np.float32).ravel(), fed):
            raise RuntimeError("the tensor MediaPipe fed the model differs from the sample")
    return [[got[f"f{i}"][t] for i in range(n_outputs)] for t in range(len(samples))]


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    model, inputs, out_dir, n = sys.argv[1:]
    xs = np.load(inputs).astype(np.float32)
    samples = [xs] if xs.shape[0] == 1 else [x[None] for x in xs]
    outs = run(model, samples, int(n))
    os.makedirs(out_dir, exist_ok=True)
    for i in range(int(n)):
        np.save(os.path.join(out_dir, f"output_{i}.npy"), np.stack([o[i] for o in outs]))
