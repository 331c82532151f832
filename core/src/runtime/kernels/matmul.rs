//! TODO: kernels of this op family (being written).

use super::{InferError, Inferred, Scratch, TypeInfo};
use crate::ir::{Op, Tensor};

pub fn infer(op: &Op, _inputs: &[Option<TypeInfo>]) -> Result<Inferred, InferError> {
    Err(InferError::Invalid(format!("{} is not implemented yet", op.name())))
}

pub fn eval(op: &Op, _inputs: &[Option<&Tensor>], _outputs: &mut [Tensor], _scratch: &mut Scratch) -> Result<(), String> {
    Err(format!("{} is not implemented yet", op.name()))
}
