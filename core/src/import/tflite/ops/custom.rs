//! MediaPipe's custom operators (`mediapipe/util/tflite/operations/`), which its published models use and which
//! LiteRT itself cannot run: a table from the custom code name to an import function, looked up for `CUSTOM`
//! operators. Each imports as a composition of IR ops that computes what MediaPipe's kernel computes.

use super::{mediapipe, nn, ImportFn, OpIn};
use crate::format::tflite::schema;
use crate::import::tflite::importer::{Fused, Importer};
use crate::ir::ValueId;
use crate::Result;

/// The custom ops this importer knows, by their custom code.
pub(super) const OPS: &[(&str, ImportFn)] = &[
    ("Convolution2DTransposeBias", transpose_conv_bias),
    ("Landmarks2TransformMatrix", mediapipe::landmarks_to_transform_matrix),
    ("TransformTensorBilinear", mediapipe::transform_tensor_bilinear),
    ("TransformLandmarks", mediapipe::transform_landmarks),
];

/// `TfLitePadding` values as MediaPipe's kernels read them from their custom options.
const PADDING_UNKNOWN: i32 = 0;
const PADDING_SAME: i32 = 1;
const PADDING_VALID: i32 = 2;

/// The little-endian i32 fields at the start of `bytes` (a C struct the converter wrote as custom options).
fn c_struct_i32s<const N: usize>(imp: &Importer, bytes: &[u8], what: &str) -> Result<[i32; N]> {
    if bytes.len() < 4 * N {
        return Err(imp.invalid(format!(
            "custom options are {} bytes; {what} needs {} (re-export the model with MediaPipe's converter)",
            bytes.len(),
            4 * N
        )));
    }
    Ok(std::array::from_fn(|i| i32::from_le_bytes(bytes[4 * i..4 * i + 4].try_into().expect("4 bytes"))))
}

/// Convolution2DTransposeBias (mediapipe/util/tflite/operations/transpose_conv_bias.cc): inputs (input NHWC,
/// weights OHWI, bias [O]); custom options the C struct `TfLiteTransposeConvParams {padding, stride_width,
/// stride_height}`. The kernel sizes its output itself: with SAME padding `p = max(0, k - (in - 1) % s - 1)`
/// (VALID, or any other value: `p = 0`), the output is `s·(in - 1) + k - p` and starts `p / 2` into the full
/// transposed convolution: a ConvTranspose with bias, pads `[p / 2, p - p / 2]`.
fn transpose_conv_bias(imp: &mut Importer, o: &OpIn) -> Result<ValueId> {
    let base = &o.base;
    if o.ins.len() != 3 {
        return Err(imp.invalid(format!("has {} inputs; Convolution2DTransposeBias takes 3 (input, weights, bias)", o.ins.len())));
    }
    let x = imp.value(imp.req(o, 0)?)?;
    let w = imp.value(imp.req(o, 1)?)?;
    let b = imp.value(imp.req(o, 2)?)?;
    let options = schema::to_vec(o.op.custom_options());
    let [padding, sw, sh] = c_struct_i32s::<3>(imp, &options, "TfLiteTransposeConvParams {padding, stride_width, stride_height}")?;
    if !matches!(padding, PADDING_UNKNOWN | PADDING_SAME | PADDING_VALID) {
        return Err(imp.invalid(format!("padding {padding} is not a TfLitePadding value (0 unknown, 1 SAME, 2 VALID)")));
    }
    let [sw, sh] = imp.positive([sw, sh], "strides")?;
    let (xs, ws, bs) = (imp.shape(x), imp.shape(w), imp.shape(b));
    if xs.len() != 4 || ws.len() != 4 || bs.len() != 1 {
        return Err(imp.invalid(format!("expects a 4-D input and filter and a 1-D bias, got {xs:?}, {ws:?} and {bs:?}")));
    }
    if ws[3] != xs[3] || bs[0] != ws[0] {
        return Err(imp.invalid(format!("filter {ws:?} (OHWI) does not fit the input {xs:?} and the bias {bs:?}")));
    }
    for v in [x, w, b] {
        if imp.g.value(v).quant.is_some() || !imp.g.value(v).dtype.is_float() {
            return Err(imp.unsupported("Convolution2DTransposeBias on non-float tensors (MediaPipe's kernel is float32 only)"));
        }
    }
    let mut pads = [0usize; 4];
    for (i, (inp, k, s)) in [(xs[1], ws[1], sh), (xs[2], ws[2], sw)].into_iter().enumerate() {
        if inp == 0 || k == 0 {
            return Err(imp.invalid(format!("empty input or kernel: input {xs:?}, filter {ws:?}")));
        }
        let p = if padding == PADDING_SAME { k.saturating_sub((inp - 1) % s + 1) } else { 0 };
        pads[i] = p / 2;
        pads[2 + i] = p - p / 2;
    }
    nn::conv_transpose_nhwc(imp, base, [x, w], Some(b), [sh, sw], pads, vec![0, 0], Fused::None)
}
