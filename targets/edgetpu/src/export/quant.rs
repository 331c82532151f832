//! Export of QuantizeLinear and DequantizeLinear.

use tpu_sdk_core::format::tflite::schema::builtin_operator as bo;
use tpu_sdk_core::ir::Node;
use tpu_sdk_core::Result;

use super::node::required;
use super::Ex;

impl Ex<'_> {
    /// QuantizeLinear (`quantize`) or DequantizeLinear: QUANTIZE or DEQUANTIZE in the input's layout.
    pub(super) fn quantize(&mut self, n: &Node, quantize: bool) -> Result<()> {
        let g = self.g;
        let y = n.outputs[0];
        let x = required(n, 0)?;
        if g.value(y).quant.is_none() && quantize || g.value(x).quant.is_none() && !quantize {
            return Err(self.unsupported("quantize/dequantize whose int8 side has no quantization parameters"));
        }
        let p = self.layout(x);
        let xt = self.get(x, &p)?;
        let yt = self.out(y, p)?;
        let code = if quantize { bo::QUANTIZE } else { bo::DEQUANTIZE };
        self.op(code, 1, vec![xt], vec![yt], None);
        Ok(())
    }
}
