"""Peer twins of MediaPipe models: a LiteRT-runnable twin of a model that uses MediaPipe's
`Convolution2DTransposeBias` custom op, and a dense twin of a sparse model for tf2onnx. Models with the attention
face mesh's custom ops (`RUNTIME_OPS`) have no twin: their peer is MediaPipe's runtime (zoo/mediapipe_graph_peer.py).

LiteRT has no kernel for MediaPipe's custom ops. `Convolution2DTransposeBias` (mediapipe/util/tflite/operations/
transpose_conv_bias.cc) is TFLite's own transposed convolution with a bias input, which the builtin TRANSPOSE_CONV
takes since TFLite 2.5 (op version 3): inputs (output_shape, weights OHWI, input, bias). The custom options are the
C struct `TfLiteTransposeConvParams {int32 padding (TfLitePadding: 1 SAME), stride_width, stride_height}`; MediaPipe's
kernel sizes the output as `s·(in − 1) + k − p` with `p = max(0, k − (in − 1) % s − 1)` for SAME (0 otherwise), and
TRANSPOSE_CONV given that output shape pads by exactly that `p` (its leading half first), so the twin computes the
same values with LiteRT's builtin kernel. Run by the oracle venv's Python (`.venv`: LiteRT's schema, flatbuffers).
"""
import os
import struct

import numpy as np


# MediaPipe's custom ops of the attention face mesh: no builtin twin computes them, so the peer of a model that uses
# them is MediaPipe's own runtime (zoo/mediapipe_graph_peer.py, in the Python of `runtime_python`)
RUNTIME_OPS = {"Landmarks2TransformMatrix", "TransformTensorBilinear", "TransformLandmarks"}


def needs_runtime(path):
    """Whether the TFLite file uses custom ops only MediaPipe's runtime runs."""
    return bool(has_custom_ops(path) & RUNTIME_OPS)


def runtime_python(cache):
    """The Python with the mediapipe wheel that runs zoo/mediapipe_graph_peer.py: $ZOO_MEDIAPIPE_PYTHON, else the
    zoo's venv `<cache>/venv-mp` (zoo/build_wheels.py makes it)."""
    return os.environ.get("ZOO_MEDIAPIPE_PYTHON") or os.path.join(cache, "venv-mp", "bin", "python")


def output_shapes(path):
    """The declared shapes of the model's outputs, in order (read from the file: LiteRT cannot load a model whose
    custom ops it lacks)."""
    from ai_edge_litert import schema_py_generated as s
    m = s.Model.GetRootAsModel(open(path, "rb").read(), 0)
    sg = m.Subgraphs(0)
    return [tuple(int(d) for d in sg.Tensors(sg.Outputs(i)).ShapeAsNumpy()) for i in range(sg.OutputsLength())]


def has_custom_ops(path):
    """The custom op names a TFLite file uses."""
    from ai_edge_litert import schema_py_generated as s
    buf = open(path, "rb").read()
    m = s.Model.GetRootAsModel(buf, 0)
    names = set()
    for i in range(m.OperatorCodesLength()):
        c = m.OperatorCodes(i)
        if max(c.BuiltinCode(), c.DeprecatedBuiltinCode()) == s.BuiltinOperator.CUSTOM and c.CustomCode():
            names.add(c.CustomCode().decode())
    return names


def builtin_twin(path):
    """The model's bytes with every Convolution2DTransposeBias rewritten to TRANSPOSE_CONV (+ bias); raises
    ValueError for a custom op it cannot rewrite."""
    import flatbuffers
    from ai_edge_litert import schema_py_generated as s
    m = s.ModelT.InitFromObj(s.Model.GetRootAsModel(open(path, "rb").read(), 0))
    tconv = None
    for k, c in enumerate(m.operatorCodes):
        if max(c.builtinCode, c.deprecatedBuiltinCode) == s.BuiltinOperator.TRANSPOSE_CONV and c.version >= 3:
            tconv = k
    if tconv is None:
        c = s.OperatorCodeT()
        c.builtinCode, c.deprecatedBuiltinCode, c.version = s.BuiltinOperator.TRANSPOSE_CONV, s.BuiltinOperator.TRANSPOSE_CONV, 3
        m.operatorCodes.append(c)
        tconv = len(m.operatorCodes) - 1
    for sg in m.subgraphs:
        for op in sg.operators:
            code = m.operatorCodes[op.opcodeIndex]
            if max(code.builtinCode, code.deprecatedBuiltinCode) != s.BuiltinOperator.CUSTOM:
                continue
            name = (code.customCode or b"").decode()
            if name != "Convolution2DTransposeBias":
                raise ValueError(f"no LiteRT twin for MediaPipe's custom op {name}")
            padding, sw, sh = struct.unpack("<3i", bytes(op.customOptions)[:12])
            x, w, b = [sg.tensors[t] for t in op.inputs]
            (n, ih, iw, _), (o, kh, kw, _) = x.shape, w.shape
            dims = []
            for i, k, st in ((ih, kh, sh), (iw, kw, sw)):
                p = max(0, k - (i - 1) % st - 1) if padding == 1 else 0
                dims.append(st * (i - 1) + k - p)
            buf = s.BufferT()
            buf.data = np.array([n, dims[0], dims[1], o], np.int32).tobytes()
            m.buffers.append(buf)
            t = s.TensorT()
            t.shape, t.type, t.buffer = np.array([4], np.int32), s.TensorType.INT32, len(m.buffers) - 1
            t.name = (sg.tensors[op.outputs[0]].name or b"tconv") + b"/output_shape"
            sg.tensors.append(t)
            opt = s.TransposeConvOptionsT()
            opt.padding = s.Padding.SAME if padding == 1 else s.Padding.VALID
            opt.strideW, opt.strideH = sw, sh
            op.opcodeIndex, op.inputs = tconv, [len(sg.tensors) - 1, op.inputs[1], op.inputs[0], op.inputs[2]]
            op.builtinOptionsType, op.builtinOptions = s.BuiltinOptions.TransposeConvOptions, opt
            op.customOptions = None
    fb = flatbuffers.Builder(1 << 20)
    fb.Finish(m.Pack(fb), file_identifier=b"TFL3")
    return bytes(fb.Output())


def has_densify(path):
    """Whether the TFLite file densifies sparse constants (DENSIFY ops, MediaPipe's `*_sparse` models)."""
    from ai_edge_litert import schema_py_generated as s
    m = s.Model.GetRootAsModel(open(path, "rb").read(), 0)
    return any(max(m.OperatorCodes(i).BuiltinCode(), m.OperatorCodes(i).DeprecatedBuiltinCode()) == s.BuiltinOperator.DENSIFY
               for i in range(m.OperatorCodesLength()))


def dense_twin(path):
    """The model's bytes with every sparse constant stored dense and its DENSIFY op removed (tf2onnx reads a sparse
    buffer as if it were dense and fails). The dense values are LiteRT's own: the DENSIFY outputs of one run with
    all tensors preserved, so the twin holds exactly the weights LiteRT computes with."""
    import flatbuffers
    from ai_edge_litert import schema_py_generated as s
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    # builtin kernels only: XNNPACK takes sparse weights itself and would leave the DENSIFY outputs unwritten
    it = Interpreter(path, experimental_preserve_all_tensors=True,
                     experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    it.allocate_tensors()
    for d in it.get_input_details():
        it.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
    it.invoke()
    m = s.ModelT.InitFromObj(s.Model.GetRootAsModel(open(path, "rb").read(), 0))
    if len(m.subgraphs) != 1:
        raise ValueError("a dense twin of a model with several subgraphs")
    sg = m.subgraphs[0]
    kept = []
    for op in sg.operators:
        code = m.operatorCodes[op.opcodeIndex]
        if max(code.builtinCode, code.deprecatedBuiltinCode) != s.BuiltinOperator.DENSIFY:
            kept.append(op)
            continue
        dense = it.get_tensor(op.outputs[0])
        buf = s.BufferT()
        buf.data = np.ascontiguousarray(dense).tobytes()
        m.buffers.append(buf)
        # the sparse input and the dense output both become the same dense constant
        for t in (op.inputs[0], op.outputs[0]):
            sg.tensors[t].buffer, sg.tensors[t].sparsity = len(m.buffers) - 1, None
            sg.tensors[t].shape = np.array(dense.shape, np.int32)
    sg.operators = kept
    fb = flatbuffers.Builder(1 << 20)
    fb.Finish(m.Pack(fb), file_identifier=b"TFL3")
    return bytes(fb.Output())


if __name__ == "__main__":
    import sys
    if len(sys.argv) != 3:
        sys.exit("usage: mediapipe_peer.py MODEL.tflite TWIN.tflite  (writes the LiteRT-runnable builtin twin)")
    data = builtin_twin(sys.argv[1])
    with open(sys.argv[2], "wb") as f:
        f.write(data)
