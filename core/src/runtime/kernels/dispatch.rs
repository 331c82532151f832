//! Dtype dispatch: run generic code once per call for the element type of a tensor.

/// Runs `$body` with the type alias `$T` bound to the float element type of `$dt`, else evaluates `$else`.
macro_rules! with_float {
    ($dt:expr, $T:ident => $body:expr, $else:expr) => {
        match $dt {
            $crate::ir::DType::F32 => {
                type $T = f32;
                $body
            }
            $crate::ir::DType::F64 => {
                type $T = f64;
                $body
            }
            $crate::ir::DType::F16 => {
                type $T = half::f16;
                $body
            }
            $crate::ir::DType::BF16 => {
                type $T = half::bf16;
                $body
            }
            _ => $else,
        }
    };
}
pub(super) use with_float;

/// Runs `$body` with `$T` bound to the integer element type of `$dt`, else evaluates `$else`.
macro_rules! with_int {
    ($dt:expr, $T:ident => $body:expr, $else:expr) => {
        match $dt {
            $crate::ir::DType::I8 => {
                type $T = i8;
                $body
            }
            $crate::ir::DType::U8 => {
                type $T = u8;
                $body
            }
            $crate::ir::DType::I16 => {
                type $T = i16;
                $body
            }
            $crate::ir::DType::I32 => {
                type $T = i32;
                $body
            }
            $crate::ir::DType::I64 => {
                type $T = i64;
                $body
            }
            _ => $else,
        }
    };
}
pub(super) use with_int;

/// Runs `$body` with `$T` bound to the element type of `$dt` (any dtype).
macro_rules! with_any {
    ($dt:expr, $T:ident => $body:expr) => {
        match $dt {
            $crate::ir::DType::Bool => {
                type $T = bool;
                $body
            }
            other => $crate::runtime::kernels::dispatch::with_float!(other, $T => $body, $crate::runtime::kernels::dispatch::with_int!(other, $T => $body, unreachable!("every dtype is bool, float or int"))),
        }
    };
}
pub(super) use with_any;
