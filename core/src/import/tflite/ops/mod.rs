//! TFLite operators → core [`Op`](crate::ir::Op)s. One module per op family registers its builtin codes in a
//! table from code to import function ([`ImportFn`], or [`ImportManyFn`] for ops with several outputs);
//! [`Importer::import_op`] looks the operator's code up in them, runs the function on the operator's tensors,
//! and binds its results to the declared output tensors. `CUSTOM` operators are looked up by their custom code
//! in [`custom::OPS`] (MediaPipe's ops).

use super::importer::Importer;
use crate::format::tflite::schema;
use crate::ir::ValueId;
use crate::{Error, Result};

/// The builtin options of the operator as table type `$t`, or an `InvalidModel` error naming the type.
macro_rules! opts {
    ($imp:expr, $o:expr, $t:ty) => {
        $o.op.options::<$t>().ok_or_else(|| $imp.invalid(concat!("missing ", stringify!($t))))?
    };
}

mod array;
mod control_flow;
mod custom;
mod index;
mod math;
mod mediapipe;
mod nn;
mod quant;
mod recurrent;
mod shape;
mod space_batch;

/// Imports one operator of a known code; returns the IR value of its (single) output.
type ImportFn = fn(&mut Importer, &OpIn) -> Result<ValueId>;

/// Imports one operator with several outputs; returns the IR values of its outputs, in order.
type ImportManyFn = fn(&mut Importer, &OpIn) -> Result<Vec<ValueId>>;

/// The op tables of the families, each a list of (builtin code, import function).
const FAMILIES: [&[(i32, ImportFn)]; 8] =
    [nn::OPS, math::OPS, array::OPS, quant::OPS, shape::OPS, index::OPS, space_batch::OPS, recurrent::OPS];

/// The tables of the ops with several outputs.
const MULTI_OUTPUT: [&[(i32, ImportManyFn)]; 4] =
    [shape::MULTI_OUTPUT_OPS, index::MULTI_OUTPUT_OPS, control_flow::MULTI_OUTPUT_OPS, recurrent::MULTI_OUTPUT_OPS];

/// One operator as the import functions see it.
struct OpIn<'a> {
    /// Its builtin code.
    code: i32,
    /// The operator table (for its options).
    op: schema::Operator<'a>,
    /// Input tensor indices (-1: absent).
    ins: Vec<i32>,
    /// Output tensor indices (at least one).
    outs: Vec<i32>,
    /// The name of its first output tensor: the base for the names of the values it creates.
    base: String,
}

impl OpIn<'_> {
    /// Input tensor `k`, if present.
    fn input(&self, k: usize) -> Option<i32> {
        self.ins.get(k).copied().filter(|&t| t >= 0)
    }
}

impl<'a> Importer<'a> {
    /// Imports operator `index` of the subgraph.
    pub(super) fn import_op(&mut self, index: usize, op: schema::Operator<'a>) -> Result<()> {
        self.op_index = index;
        let codes = self.model.operator_codes();
        let n_codes = codes.map(|c| c.len()).unwrap_or(0);
        let code = schema::get(codes, op.opcode_index() as usize).ok_or_else(|| {
            Error::InvalidModel(format!("operator #{index}: opcode index {} is out of range ({n_codes} operator codes)", op.opcode_index()))
        })?;
        self.op_name = code.name();
        let custom = code.custom_code().filter(|_| code.code() == schema::builtin_operator::CUSTOM);
        let code = code.code();
        let ins = schema::to_vec(op.inputs());
        let outs = schema::to_vec(op.outputs());
        if outs.is_empty() {
            return Err(self.invalid("has no outputs"));
        }
        let base = self.tensor_name(outs[0]);
        let o = OpIn { code, op, ins, outs, base };
        let results = if let Some(name) = custom {
            let &(_, import) = custom::OPS.iter().find(|(n, _)| *n == name).ok_or_else(|| {
                let known: Vec<&str> = custom::OPS.iter().map(|(n, _)| *n).collect();
                Error::Unsupported(format!(
                    "operator #{index}: {} is not supported by the TFLite importer (custom ops it knows: {})",
                    self.op_name,
                    known.join(", ")
                ))
            })?;
            vec![import(self, &o)?]
        } else if let Some(&(_, import)) = FAMILIES.iter().flat_map(|ops| ops.iter()).find(|(c, _)| *c == code) {
            vec![import(self, &o)?]
        } else if let Some(&(_, import)) = MULTI_OUTPUT.iter().flat_map(|ops| ops.iter()).find(|(c, _)| *c == code) {
            import(self, &o)?
        } else {
            return Err(Error::Unsupported(format!("operator #{index}: {} is not supported by the TFLite importer", self.op_name)));
        };
        if o.outs.len() != results.len() {
            return Err(self.invalid(format!("has {} outputs, expected {}", o.outs.len(), results.len())));
        }
        for (&t, v) in o.outs.iter().zip(results) {
            self.bind(t, v)?;
        }
        Ok(())
    }

    /// Input tensor `k` of `o`, which the op requires.
    fn req(&self, o: &OpIn, k: usize) -> Result<i32> {
        o.input(k).ok_or_else(|| self.invalid(format!("input {k} is missing")))
    }
}
