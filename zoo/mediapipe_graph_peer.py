"""The peer for MediaPipe models that use MediaPipe's own custom ops (`Landmarks2TransformMatrix`,
`TransformTensorBilinear`, `TransformLandmarks`: face_landmark_with_attention.tflite), which LiteRT cannot run:
MediaPipe's runtime itself. Run by a Python that has the `mediapipe` wheel (0.10.14, numpy<2; the zoo keeps one in
`.cache/zoo/venv-mp`), it builds a `mediapipe.CalculatorGraph`:

    ImageFrame (SRGB) → ImageToTensorCalculator (model size, values in [0, 1])
      → InferenceCalculator (CPU, plain TFLite interpreter, no XNNPACK) with the op resolver of
        TfLiteCustomOpResolverCalculator (MediaPipe's kernels for its custom ops)
      → SplitTensorVectorCalculator → TensorsToFloatsCalculator per output (and one for the input tensor)

and writes the input tensor it fed the model (`input.npy`, float32 NHWC) and each output, flattened, in the model's
output order (`output_K.npy`). Feeding `input.npy` to another runtime and comparing gives the peer comparison.

usage: python mediapipe_graph_peer.py MODEL.tflite IMAGE OUT_DIR HEIGHT WIDTH N_OUTPUTS
  IMAGE: any picture (PNG/JPEG, resized to HEIGHT x WIDTH by ImageToTensorCalculator) or an .npy uint8 HxWx3 image.
"""
import os
import sys

import numpy as np


def graph_config(model, height, width, n_outputs):
    outs = " ".join(f'output_stream: "t{i}"' for i in range(n_outputs))
    ranges = " ".join(f"ranges {{ begin: {i} end: {i + 1} }}" for i in range(n_outputs))
    floats = "\n".join(f'node {{ calculator: "TensorsToFloatsCalculator" input_stream: "TENSORS:t{i}" '
                       f'output_stream: "FLOATS:f{i}" }}' for i in range(n_outputs))
    return f'''
input_stream: "image"
output_stream: "input_floats"
{" ".join(f'output_stream: "f{i}"' for i in range(n_outputs))}
node {{ calculator: "TfLiteCustomOpResolverCalculator" output_side_packet: "OP_RESOLVER:op_resolver" }}
node {{
  calculator: "ImageToTensorCalculator" input_stream: "IMAGE:image" output_stream: "TENSORS:input_tensors"
  options {{ [mediapipe.ImageToTensorCalculatorOptions.ext] {{
    output_tensor_width: {width} output_tensor_height: {height} keep_aspect_ratio: false
    output_tensor_float_range {{ min: 0.0 max: 1.0 }} }} }}
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


def run(model, image, height, width, n_outputs):
    """(input NHWC float32, [outputs flattened]) of MediaPipe's runtime on `image` (uint8 HxWx3)."""
    import mediapipe as mp
    from mediapipe.python import packet_creator, packet_getter
    g = mp.CalculatorGraph(graph_config=graph_config(os.path.abspath(model), height, width, n_outputs))
    got = {}
    for name in ["input_floats"] + [f"f{i}" for i in range(n_outputs)]:
        g.observe_output_stream(name, lambda s, p, name=name: got.__setitem__(name, np.array(packet_getter.get_float_list(p), np.float32)))
    g.start_run()
    frame = packet_creator.create_image_frame(data=np.ascontiguousarray(image, np.uint8), image_format=mp.ImageFormat.SRGB)
    g.add_packet_to_input_stream("image", frame.at(0))
    g.close()
    missing = [n for n in ["input_floats"] + [f"f{i}" for i in range(n_outputs)] if n not in got]
    if missing:
        raise RuntimeError(f"MediaPipe's graph produced no packet on {missing}")
    x = got["input_floats"].reshape(1, height, width, -1)
    return x, [got[f"f{i}"] for i in range(n_outputs)]


def load_image(path):
    if path.endswith(".npy"):
        return np.load(path)
    import cv2
    bgr = cv2.imread(path, cv2.IMREAD_COLOR)
    if bgr is None:
        raise ValueError(f"cannot read the image {path}")
    return bgr[:, :, ::-1]


if __name__ == "__main__":
    if len(sys.argv) != 7:
        sys.exit(__doc__)
    model, image, out_dir, h, w, n = sys.argv[1:]
    x, ys = run(model, load_image(image), int(h), int(w), int(n))
    os.makedirs(out_dir, exist_ok=True)
    np.save(os.path.join(out_dir, "input.npy"), x)
    for i, y in enumerate(ys):
        np.save(os.path.join(out_dir, f"output_{i}.npy"), y)
