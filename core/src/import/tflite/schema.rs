//! Read access to the TFLite flatbuffer schema (version 3, `schema.fbs` of TensorFlow Lite / LiteRT).
//!
//! The tables are transcribed by hand from the published `schema.fbs` in the style `flatc` generates for
//! Rust: a zero-copy wrapper over a [`flatbuffers::Table`] with one accessor per field, plus a
//! [`flatbuffers::Verifiable`] implementation so that [`parse_model`] can check an untrusted file (every
//! offset inside the buffer, strings valid UTF-8, vectors in bounds) before any accessor runs. Only the
//! tables and option tables tpu-sdk reads are transcribed; the other members of the `BuiltinOptions` union
//! are still verified as tables, so a file using them parses and its ops can be reported by name.
//!
//! Writing goes through [`super::builder`]. Field numbers (`slot`) are the declaration order in
//! `schema.fbs`; a union field takes two slots (its type first).

use flatbuffers::{Follow, ForwardsUOffset, InvalidFlatbuffer, Table, Vector, Verifiable, Verifier, VerifierOptions};

/// The file identifier of TFLite models, at bytes 4..8.
pub const FILE_IDENTIFIER: &str = "TFL3";

/// The vtable offset of field number `slot`.
pub const fn voffset(slot: u16) -> u16 {
    4 + 2 * slot
}

// ---------------------------------------------------------------------------------------------------------
// Table accessor generation.

macro_rules! fb_ret {
    ($lt:lifetime, scalar, $ty:ty) => { $ty };
    ($lt:lifetime, vector, $ty:ty) => { Option<Vector<$lt, $ty>> };
    ($lt:lifetime, string, $ty:ty) => { Option<&$lt str> };
    ($lt:lifetime, table, $ty:ident) => { Option<$ty<$lt>> };
    ($lt:lifetime, tables, $ty:ident) => { Option<Vector<$lt, ForwardsUOffset<$ty<$lt>>>> };
    ($lt:lifetime, union, $ty:ident) => { Option<Table<$lt>> };
}

macro_rules! fb_get {
    ($lt:lifetime, $tab:expr, $slot:expr, scalar, $ty:ty, $def:expr) => {
        // SAFETY: the table was verified (see `parse_model`), so the slot holds a `$ty`.
        unsafe { $tab.get::<$ty>(voffset($slot), Some($def)).unwrap_or($def) }
    };
    ($lt:lifetime, $tab:expr, $slot:expr, vector, $ty:ty, $def:expr) => {
        // SAFETY: verified as a vector of `$ty`.
        unsafe { $tab.get::<ForwardsUOffset<Vector<$lt, $ty>>>(voffset($slot), None) }
    };
    ($lt:lifetime, $tab:expr, $slot:expr, string, $ty:ty, $def:expr) => {
        // SAFETY: verified as a string.
        unsafe { $tab.get::<ForwardsUOffset<&$lt str>>(voffset($slot), None) }
    };
    ($lt:lifetime, $tab:expr, $slot:expr, table, $ty:ident, $def:expr) => {
        // SAFETY: verified as a `$ty` table.
        unsafe { $tab.get::<ForwardsUOffset<$ty<$lt>>>(voffset($slot), None) }
    };
    ($lt:lifetime, $tab:expr, $slot:expr, tables, $ty:ident, $def:expr) => {
        // SAFETY: verified as a vector of `$ty` tables.
        unsafe { $tab.get::<ForwardsUOffset<Vector<$lt, ForwardsUOffset<$ty<$lt>>>>>(voffset($slot), None) }
    };
    ($lt:lifetime, $tab:expr, $slot:expr, union, $ty:ident, $def:expr) => {
        // SAFETY: verified as a table of the type the union's type field names.
        unsafe { $tab.get::<ForwardsUOffset<Table<$lt>>>(voffset($slot), None) }
    };
}

macro_rules! fb_verify {
    ($lt:lifetime, $t:expr, $name:expr, $slot:expr, scalar, $ty:ty) => {
        $t.visit_field::<$ty>($name, voffset($slot), false)?
    };
    ($lt:lifetime, $t:expr, $name:expr, $slot:expr, vector, $ty:ty) => {
        $t.visit_field::<ForwardsUOffset<Vector<$lt, $ty>>>($name, voffset($slot), false)?
    };
    ($lt:lifetime, $t:expr, $name:expr, $slot:expr, string, $ty:ty) => {
        $t.visit_field::<ForwardsUOffset<&str>>($name, voffset($slot), false)?
    };
    ($lt:lifetime, $t:expr, $name:expr, $slot:expr, table, $ty:ident) => {
        $t.visit_field::<ForwardsUOffset<$ty>>($name, voffset($slot), false)?
    };
    ($lt:lifetime, $t:expr, $name:expr, $slot:expr, tables, $ty:ident) => {
        $t.visit_field::<ForwardsUOffset<Vector<$lt, ForwardsUOffset<$ty>>>>($name, voffset($slot), false)?
    };
    ($lt:lifetime, $t:expr, $name:expr, $slot:expr, union, $ty:ident) => {
        $t.visit_union::<u8, _>(concat!($name, "_type"), voffset($slot - 1), $name, voffset($slot), false, $ty)?
    };
}

macro_rules! fb_default {
    () => {
        Default::default()
    };
    ($d:expr) => {
        $d
    };
}

/// Declares a table: `slot name: kind<Type> [= default];` per field, where kind is `scalar`, `vector`
/// (of scalars), `string`, `table`, `tables` (vector of tables) or `union` (the type names the function
/// that verifies the union value; the type field is the slot before and is declared as a `scalar<u8>`).
macro_rules! fb_table {
    (
        $(#[$meta:meta])*
        $name:ident $(: union [$utype:expr])? {
            $( $(#[$fmeta:meta])* $slot:literal $field:ident : $kind:ident <$ty:tt> $(= $def:expr)? ; )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq)]
        pub struct $name<'a> {
            /// The underlying flatbuffer table.
            pub tab: Table<'a>,
        }

        impl<'a> Follow<'a> for $name<'a> {
            type Inner = $name<'a>;
            #[inline]
            unsafe fn follow(buf: &'a [u8], loc: usize) -> Self::Inner {
                $name { tab: Table::new(buf, loc) }
            }
        }

        #[allow(missing_docs)]
        impl<'a> $name<'a> {
            $(
                $(#[$fmeta])*
                #[inline]
                pub fn $field(&self) -> fb_ret!('a, $kind, $ty) {
                    fb_get!('a, self.tab, $slot, $kind, $ty, fb_default!($($def)?))
                }
            )*
        }

        impl Verifiable for $name<'_> {
            #[inline]
            fn run_verifier(v: &mut Verifier, pos: usize) -> Result<(), InvalidFlatbuffer> {
                let t = v.visit_table(pos)?;
                $( let t = fb_verify!('_, t, stringify!($field), $slot, $kind, $ty); )*
                t.finish();
                Ok(())
            }
        }

        $(
            impl<'a> OptionsTable<'a> for $name<'a> {
                const UNION_TYPE: u8 = $utype;
                fn from_table(tab: Table<'a>) -> Self {
                    $name { tab }
                }
            }
        )?
    };
}

/// A table whose fields are not read: only its vtable is checked. Used for union members and tables that
/// tpu-sdk only tests for presence (sparsity, variant sub-types, custom quantization).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AnyTable<'a> {
    /// The underlying flatbuffer table.
    pub tab: Table<'a>,
}

impl<'a> Follow<'a> for AnyTable<'a> {
    type Inner = AnyTable<'a>;
    #[inline]
    unsafe fn follow(buf: &'a [u8], loc: usize) -> Self::Inner {
        AnyTable { tab: Table::new(buf, loc) }
    }
}

impl Verifiable for AnyTable<'_> {
    fn run_verifier(v: &mut Verifier, pos: usize) -> Result<(), InvalidFlatbuffer> {
        v.visit_table(pos)?.finish();
        Ok(())
    }
}

/// A member of the `BuiltinOptions` union.
pub trait OptionsTable<'a>: Sized {
    /// Its discriminant in the union.
    const UNION_TYPE: u8;
    /// Wraps a table already verified as this type.
    fn from_table(tab: Table<'a>) -> Self;
}

// ---------------------------------------------------------------------------------------------------------
// Enums (as plain integer constants: files may carry values newer than this transcription).

/// `TensorType` values.
#[allow(missing_docs)]
pub mod tensor_type {
    pub const FLOAT32: i8 = 0;
    pub const FLOAT16: i8 = 1;
    pub const INT32: i8 = 2;
    pub const UINT8: i8 = 3;
    pub const INT64: i8 = 4;
    pub const STRING: i8 = 5;
    pub const BOOL: i8 = 6;
    pub const INT16: i8 = 7;
    pub const COMPLEX64: i8 = 8;
    pub const INT8: i8 = 9;
    pub const FLOAT64: i8 = 10;
    pub const COMPLEX128: i8 = 11;
    pub const UINT64: i8 = 12;
    pub const RESOURCE: i8 = 13;
    pub const VARIANT: i8 = 14;
    pub const UINT32: i8 = 15;
    pub const UINT16: i8 = 16;
    pub const INT4: i8 = 17;
    pub const BFLOAT16: i8 = 18;

    /// The schema name of a tensor type.
    pub fn name(t: i8) -> String {
        const NAMES: [&str; 19] = [
            "FLOAT32", "FLOAT16", "INT32", "UINT8", "INT64", "STRING", "BOOL", "INT16", "COMPLEX64", "INT8", "FLOAT64",
            "COMPLEX128", "UINT64", "RESOURCE", "VARIANT", "UINT32", "UINT16", "INT4", "BFLOAT16",
        ];
        usize::try_from(t).ok().and_then(|i| NAMES.get(i)).map(|s| s.to_string()).unwrap_or_else(|| format!("type {t}"))
    }
}

/// `Padding` values.
#[allow(missing_docs)]
pub mod padding {
    pub const SAME: i8 = 0;
    pub const VALID: i8 = 1;
}

/// `ActivationFunctionType` values.
#[allow(missing_docs)]
pub mod activation {
    pub const NONE: i8 = 0;
    pub const RELU: i8 = 1;
    pub const RELU_N1_TO_1: i8 = 2;
    pub const RELU6: i8 = 3;
    pub const TANH: i8 = 4;
    pub const SIGN_BIT: i8 = 5;

    /// The schema name of a fused activation.
    pub fn name(a: i8) -> String {
        match a {
            NONE => "NONE".into(),
            RELU => "RELU".into(),
            RELU_N1_TO_1 => "RELU_N1_TO_1".into(),
            RELU6 => "RELU6".into(),
            TANH => "TANH".into(),
            SIGN_BIT => "SIGN_BIT".into(),
            other => format!("activation {other}"),
        }
    }
}

/// `BuiltinOperator` values and their names.
pub mod builtin_operator {
    /// Codes `0..=207` in schema order; the index is the code.
    pub const NAMES: [&str; 208] = [
        "ADD", "AVERAGE_POOL_2D", "CONCATENATION", "CONV_2D", "DEPTHWISE_CONV_2D", "DEPTH_TO_SPACE", "DEQUANTIZE",
        "EMBEDDING_LOOKUP", "FLOOR", "FULLY_CONNECTED", "HASHTABLE_LOOKUP", "L2_NORMALIZATION", "L2_POOL_2D",
        "LOCAL_RESPONSE_NORMALIZATION", "LOGISTIC", "LSH_PROJECTION", "LSTM", "MAX_POOL_2D", "MUL", "RELU",
        "RELU_N1_TO_1", "RELU6", "RESHAPE", "RESIZE_BILINEAR", "RNN", "SOFTMAX", "SPACE_TO_DEPTH", "SVDF", "TANH",
        "CONCAT_EMBEDDINGS", "SKIP_GRAM", "CALL", "CUSTOM", "EMBEDDING_LOOKUP_SPARSE", "PAD",
        "UNIDIRECTIONAL_SEQUENCE_RNN", "GATHER", "BATCH_TO_SPACE_ND", "SPACE_TO_BATCH_ND", "TRANSPOSE", "MEAN", "SUB",
        "DIV", "SQUEEZE", "UNIDIRECTIONAL_SEQUENCE_LSTM", "STRIDED_SLICE", "BIDIRECTIONAL_SEQUENCE_RNN", "EXP",
        "TOPK_V2", "SPLIT", "LOG_SOFTMAX", "DELEGATE", "BIDIRECTIONAL_SEQUENCE_LSTM", "CAST", "PRELU", "MAXIMUM",
        "ARG_MAX", "MINIMUM", "LESS", "NEG", "PADV2", "GREATER", "GREATER_EQUAL", "LESS_EQUAL", "SELECT", "SLICE",
        "SIN", "TRANSPOSE_CONV", "SPARSE_TO_DENSE", "TILE", "EXPAND_DIMS", "EQUAL", "NOT_EQUAL", "LOG", "SUM", "SQRT",
        "RSQRT", "SHAPE", "POW", "ARG_MIN", "FAKE_QUANT", "REDUCE_PROD", "REDUCE_MAX", "PACK", "LOGICAL_OR",
        "ONE_HOT", "LOGICAL_AND", "LOGICAL_NOT", "UNPACK", "REDUCE_MIN", "FLOOR_DIV", "REDUCE_ANY", "SQUARE",
        "ZEROS_LIKE", "FILL", "FLOOR_MOD", "RANGE", "RESIZE_NEAREST_NEIGHBOR", "LEAKY_RELU", "SQUARED_DIFFERENCE",
        "MIRROR_PAD", "ABS", "SPLIT_V", "UNIQUE", "CEIL", "REVERSE_V2", "ADD_N", "GATHER_ND", "COS", "WHERE", "RANK",
        "ELU", "REVERSE_SEQUENCE", "MATRIX_DIAG", "QUANTIZE", "MATRIX_SET_DIAG", "ROUND", "HARD_SWISH", "IF", "WHILE",
        "NON_MAX_SUPPRESSION_V4", "NON_MAX_SUPPRESSION_V5", "SCATTER_ND", "SELECT_V2", "DENSIFY", "SEGMENT_SUM",
        "BATCH_MATMUL", "PLACEHOLDER_FOR_GREATER_OP_CODES", "CUMSUM", "CALL_ONCE", "BROADCAST_TO", "RFFT2D",
        "CONV_3D", "IMAG", "REAL", "COMPLEX_ABS", "HASHTABLE", "HASHTABLE_FIND", "HASHTABLE_IMPORT",
        "HASHTABLE_SIZE", "REDUCE_ALL", "CONV_3D_TRANSPOSE", "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE",
        "BROADCAST_ARGS", "RANDOM_STANDARD_NORMAL", "BUCKETIZE", "RANDOM_UNIFORM", "MULTINOMIAL", "GELU",
        "DYNAMIC_UPDATE_SLICE", "RELU_0_TO_1", "UNSORTED_SEGMENT_PROD", "UNSORTED_SEGMENT_MAX",
        "UNSORTED_SEGMENT_SUM", "ATAN2", "UNSORTED_SEGMENT_MIN", "SIGN", "BITCAST", "BITWISE_XOR", "RIGHT_SHIFT",
        "STABLEHLO_LOGISTIC", "STABLEHLO_ADD", "STABLEHLO_DIVIDE", "STABLEHLO_MULTIPLY", "STABLEHLO_MAXIMUM",
        "STABLEHLO_RESHAPE", "STABLEHLO_CLAMP", "STABLEHLO_CONCATENATE", "STABLEHLO_BROADCAST_IN_DIM",
        "STABLEHLO_CONVOLUTION", "STABLEHLO_SLICE", "STABLEHLO_CUSTOM_CALL", "STABLEHLO_REDUCE", "STABLEHLO_ABS",
        "STABLEHLO_AND", "STABLEHLO_COSINE", "STABLEHLO_EXPONENTIAL", "STABLEHLO_FLOOR", "STABLEHLO_LOG",
        "STABLEHLO_MINIMUM", "STABLEHLO_NEGATE", "STABLEHLO_OR", "STABLEHLO_POWER", "STABLEHLO_REMAINDER",
        "STABLEHLO_RSQRT", "STABLEHLO_SELECT", "STABLEHLO_SUBTRACT", "STABLEHLO_TANH", "STABLEHLO_SCATTER",
        "STABLEHLO_COMPARE", "STABLEHLO_CONVERT", "STABLEHLO_DYNAMIC_SLICE", "STABLEHLO_DYNAMIC_UPDATE_SLICE",
        "STABLEHLO_PAD", "STABLEHLO_IOTA", "STABLEHLO_DOT_GENERAL", "STABLEHLO_REDUCE_WINDOW", "STABLEHLO_SORT",
        "STABLEHLO_WHILE", "STABLEHLO_GATHER", "STABLEHLO_TRANSPOSE", "DILATE", "STABLEHLO_RNG_BIT_GENERATOR",
        "REDUCE_WINDOW", "STABLEHLO_COMPOSITE", "COMPLEX",
    ];

    /// The schema name of a builtin operator code (`BUILTIN_<code>` for codes newer than this table).
    pub fn name(code: i32) -> String {
        usize::try_from(code).ok().and_then(|i| NAMES.get(i)).map(|s| s.to_string()).unwrap_or_else(|| format!("BUILTIN_{code}"))
    }

    /// The code of a builtin operator name.
    pub fn code(name: &str) -> Option<i32> {
        NAMES.iter().position(|n| *n == name).map(|i| i as i32)
    }

    macro_rules! codes {
        ($($n:ident = $v:literal,)*) => { $( #[allow(missing_docs)] pub const $n: i32 = $v; )* };
    }
    codes! {
        ADD = 0, AVERAGE_POOL_2D = 1, CONCATENATION = 2, CONV_2D = 3, DEPTHWISE_CONV_2D = 4, DEPTH_TO_SPACE = 5,
        DEQUANTIZE = 6, FLOOR = 8, FULLY_CONNECTED = 9, L2_NORMALIZATION = 11, LOGISTIC = 14, LSTM = 16,
        MAX_POOL_2D = 17, MUL = 18, RELU = 19, RELU_N1_TO_1 = 20, RELU6 = 21, RESHAPE = 22, RESIZE_BILINEAR = 23,
        SOFTMAX = 25, SPACE_TO_DEPTH = 26, TANH = 28, CUSTOM = 32, PAD = 34, GATHER = 36, TRANSPOSE = 39, MEAN = 40,
        SUB = 41, DIV = 42, SQUEEZE = 43, UNIDIRECTIONAL_SEQUENCE_LSTM = 44, STRIDED_SLICE = 45, EXP = 47, SPLIT = 49,
        LOG_SOFTMAX = 50, BIDIRECTIONAL_SEQUENCE_LSTM = 52, CAST = 53, PRELU = 54, MAXIMUM = 55, ARG_MAX = 56,
        MINIMUM = 57, NEG = 59, PADV2 = 60, SLICE = 65, TRANSPOSE_CONV = 67, TILE = 69, EXPAND_DIMS = 70, LOG = 73,
        SUM = 74, SQRT = 75, RSQRT = 76, POW = 78, REDUCE_PROD = 81, REDUCE_MAX = 82, PACK = 83, UNPACK = 88,
        REDUCE_MIN = 89, SQUARE = 92, RESIZE_NEAREST_NEIGHBOR = 97, LEAKY_RELU = 98, SQUARED_DIFFERENCE = 99,
        MIRROR_PAD = 100, ABS = 101, SPLIT_V = 102, CEIL = 104, GATHER_ND = 107, ELU = 111, QUANTIZE = 114,
        HARD_SWISH = 117, BATCH_MATMUL = 126, LESS = 58, LESS_EQUAL = 63, GREATER = 61, GREATER_EQUAL = 62, EQUAL = 71,
        SIN = 66, COS = 108, ARG_MIN = 79, DENSIFY = 124, PLACEHOLDER_FOR_GREATER_OP_CODES = 127, CUMSUM = 128,
        GELU = 150,
    }
}

/// Discriminants of the `BuiltinOptions` union for the option tables transcribed here.
#[allow(missing_docs)]
pub mod builtin_options {
    pub const NONE: u8 = 0;
    pub const CONV_2D: u8 = 1;
    pub const DEPTHWISE_CONV_2D: u8 = 2;
    pub const POOL_2D: u8 = 5;
    pub const FULLY_CONNECTED: u8 = 8;
    pub const SOFTMAX: u8 = 9;
    pub const CONCATENATION: u8 = 10;
    pub const ADD: u8 = 11;
    pub const L2_NORM: u8 = 12;
    pub const RESIZE_BILINEAR: u8 = 15;
    pub const RESHAPE: u8 = 17;
    pub const SPACE_TO_DEPTH: u8 = 19;
    pub const MUL: u8 = 21;
    pub const PAD: u8 = 22;
    pub const GATHER: u8 = 23;
    pub const TRANSPOSE: u8 = 26;
    pub const REDUCER: u8 = 27;
    pub const SUB: u8 = 28;
    pub const DIV: u8 = 29;
    pub const SQUEEZE: u8 = 30;
    pub const STRIDED_SLICE: u8 = 32;
    pub const SPLIT: u8 = 35;
    pub const CAST: u8 = 37;
    pub const DEQUANTIZE: u8 = 38;
    pub const MAXIMUM_MINIMUM: u8 = 39;
    pub const PADV2: u8 = 43;
    pub const SLICE: u8 = 48;
    pub const TRANSPOSE_CONV: u8 = 49;
    pub const EXPAND_DIMS: u8 = 52;
    pub const PACK: u8 = 59;
    pub const UNPACK: u8 = 64;
    pub const RESIZE_NEAREST_NEIGHBOR: u8 = 74;
    pub const LEAKY_RELU: u8 = 75;
    pub const MIRROR_PAD: u8 = 77;
    pub const QUANTIZE: u8 = 89;
    pub const HARD_SWISH: u8 = 91;
    pub const DEPTH_TO_SPACE: u8 = 94;
    pub const BATCH_MATMUL: u8 = 101;
    pub const GELU: u8 = 116;
}

// ---------------------------------------------------------------------------------------------------------
// The model.

fb_table! {
    /// The root table.
    Model {
        0 version: scalar<u32>;
        1 operator_codes: tables<OperatorCode>;
        2 subgraphs: tables<SubGraph>;
        3 description: string<str>;
        4 buffers: tables<Buffer>;
        5 metadata_buffer: vector<i32>;
        6 metadata: tables<Metadata>;
        7 signature_defs: tables<SignatureDef>;
    }
}

fb_table! {
    /// An operator kind: a builtin code or a custom op name.
    OperatorCode {
        /// The builtin code when it is below 127 (older files only have this field).
        0 deprecated_builtin_code: scalar<i8>;
        1 custom_code: string<str>;
        2 version: scalar<i32> = 1;
        /// The builtin code (newer files; 0 in older ones).
        3 builtin_code: scalar<i32>;
    }
}

impl OperatorCode<'_> {
    /// The effective builtin code: `max(deprecated_builtin_code, builtin_code)`, as TFLite reads it.
    pub fn code(&self) -> i32 {
        (self.deprecated_builtin_code() as i32).max(self.builtin_code())
    }
    /// The op name: the builtin's schema name, or the custom code for `CUSTOM`.
    pub fn name(&self) -> String {
        let code = self.code();
        if code == builtin_operator::CUSTOM {
            format!("CUSTOM({})", self.custom_code().unwrap_or(""))
        } else {
            builtin_operator::name(code)
        }
    }
}

fb_table! {
    /// One graph: tensors, operators in execution order, inputs and outputs.
    SubGraph {
        0 tensors: tables<Tensor>;
        1 inputs: vector<i32>;
        2 outputs: vector<i32>;
        3 operators: tables<Operator>;
        4 name: string<str>;
    }
}

fb_table! {
    /// A tensor of a subgraph.
    Tensor {
        0 shape: vector<i32>;
        /// A [`tensor_type`] value.
        1 type_: scalar<i8>;
        /// Index into [`Model::buffers`]; 0 (the empty sentinel buffer) for tensors without data.
        2 buffer: scalar<u32>;
        3 name: string<str>;
        4 quantization: table<QuantizationParameters>;
        5 is_variable: scalar<bool>;
        6 sparsity: table<SparsityParameters>;
        /// The shape with -1 for unknown dimensions.
        7 shape_signature: vector<i32>;
        8 has_rank: scalar<bool>;
        9 variant_tensors: tables<AnyTable>;
    }
}

fb_table! {
    /// How a sparse constant is stored (see [`super::sparsity`]): the dims in traversal order (the original
    /// dims, then the block dims), which original dim each block dim splits, and per traversed dim its format.
    SparsityParameters {
        0 traversal_order: vector<i32>;
        1 block_map: vector<i32>;
        2 dim_metadata: tables<DimensionMetadata>;
    }
}

fb_table! {
    /// One traversed dim of a sparse tensor: dense (`dense_size` entries) or CSR (`array_segments` and
    /// `array_indices`, each a [`sparse_index_vector`] union member).
    DimensionMetadata {
        /// A [`dimension_type`] value.
        0 format: scalar<i8>;
        1 dense_size: scalar<i32>;
        /// The [`sparse_index_vector`] type of `array_segments`.
        2 array_segments_type: scalar<u8>;
        3 array_segments: union<verify_sparse_index_vector>;
        /// The [`sparse_index_vector`] type of `array_indices`.
        4 array_indices_type: scalar<u8>;
        5 array_indices: union<verify_sparse_index_vector>;
    }
}

fb_table! {
    /// `SparseIndexVector` member 1.
    Int32Vector {
        0 values: vector<i32>;
    }
}

fb_table! {
    /// `SparseIndexVector` member 2.
    Uint16Vector {
        0 values: vector<u16>;
    }
}

fb_table! {
    /// `SparseIndexVector` member 3.
    Uint8Vector {
        0 values: vector<u8>;
    }
}

/// `DimensionType`.
#[allow(missing_docs)]
pub mod dimension_type {
    pub const DENSE: i8 = 0;
    pub const SPARSE_CSR: i8 = 1;
}

/// Discriminants of the `SparseIndexVector` union.
#[allow(missing_docs)]
pub mod sparse_index_vector {
    pub const INT32: u8 = 1;
    pub const UINT16: u8 = 2;
    pub const UINT8: u8 = 3;
}

/// Verifies a `SparseIndexVector` union value as the vector table its type names.
fn verify_sparse_index_vector(key: u8, v: &mut Verifier, pos: usize) -> Result<(), InvalidFlatbuffer> {
    match key {
        sparse_index_vector::INT32 => v.verify_union_variant::<ForwardsUOffset<Int32Vector>>("Int32Vector", pos),
        sparse_index_vector::UINT16 => v.verify_union_variant::<ForwardsUOffset<Uint16Vector>>("Uint16Vector", pos),
        sparse_index_vector::UINT8 => v.verify_union_variant::<ForwardsUOffset<Uint8Vector>>("Uint8Vector", pos),
        _ => v.verify_union_variant::<ForwardsUOffset<AnyTable>>("SparseIndexVector", pos),
    }
}

fb_table! {
    /// Affine quantization: `real = scale * (q - zero_point)`, per tensor or per `quantized_dimension`.
    QuantizationParameters {
        0 min: vector<f32>;
        1 max: vector<f32>;
        2 scale: vector<f32>;
        3 zero_point: vector<i64>;
        4 details_type: scalar<u8>;
        5 details: union<verify_any_union>;
        6 quantized_dimension: scalar<i32>;
    }
}

fb_table! {
    /// Raw data of a constant tensor (or metadata).
    Buffer {
        0 data: vector<u8>;
        /// For models over 2 GB: the data's offset from the start of the file (valid when > 1).
        1 offset: scalar<u64>;
        2 size: scalar<u64>;
    }
}

fb_table! {
    /// One operator application.
    Operator {
        0 opcode_index: scalar<u32>;
        /// Tensor indices; -1 for an absent optional input.
        1 inputs: vector<i32>;
        2 outputs: vector<i32>;
        /// A [`builtin_options`] discriminant.
        3 builtin_options_type: scalar<u8>;
        4 builtin_options: union<verify_builtin_options>;
        5 custom_options: vector<u8>;
        6 custom_options_format: scalar<i8>;
        7 mutating_variable_inputs: vector<bool>;
        8 intermediates: vector<i32>;
        9 large_custom_options_offset: scalar<u64>;
        10 large_custom_options_size: scalar<u64>;
        11 builtin_options_2_type: scalar<u8>;
        12 builtin_options_2: union<verify_any_union>;
    }
}

impl<'a> Operator<'a> {
    /// The builtin options as table type `T`, if the union holds a `T`.
    pub fn options<T: OptionsTable<'a>>(&self) -> Option<T> {
        if self.builtin_options_type() != T::UNION_TYPE {
            return None;
        }
        self.builtin_options().map(T::from_table)
    }
}

fb_table! {
    /// Named metadata pointing at a buffer.
    Metadata {
        0 name: string<str>;
        1 buffer: scalar<u32>;
    }
}

fb_table! {
    /// An alias name for a tensor in a signature.
    TensorMap {
        0 name: string<str>;
        1 tensor_index: scalar<u32>;
    }
}

fb_table! {
    /// A SavedModel signature: named inputs and outputs of a subgraph.
    SignatureDef {
        0 inputs: tables<TensorMap>;
        1 outputs: tables<TensorMap>;
        2 signature_key: string<str>;
        3 deprecated_tag: string<str>;
        4 subgraph_index: scalar<u32>;
    }
}

// ---------------------------------------------------------------------------------------------------------
// Builtin option tables.

fb_table! {
    /// CONV_2D options.
    Conv2DOptions: union [builtin_options::CONV_2D] {
        0 padding: scalar<i8>;
        1 stride_w: scalar<i32>;
        2 stride_h: scalar<i32>;
        3 fused_activation_function: scalar<i8>;
        4 dilation_w_factor: scalar<i32> = 1;
        5 dilation_h_factor: scalar<i32> = 1;
        6 quantized_bias_type: scalar<i8>;
    }
}

fb_table! {
    /// DEPTHWISE_CONV_2D options.
    DepthwiseConv2DOptions: union [builtin_options::DEPTHWISE_CONV_2D] {
        0 padding: scalar<i8>;
        1 stride_w: scalar<i32>;
        2 stride_h: scalar<i32>;
        3 depth_multiplier: scalar<i32>;
        4 fused_activation_function: scalar<i8>;
        5 dilation_w_factor: scalar<i32> = 1;
        6 dilation_h_factor: scalar<i32> = 1;
    }
}

fb_table! {
    /// TRANSPOSE_CONV options.
    TransposeConvOptions: union [builtin_options::TRANSPOSE_CONV] {
        0 padding: scalar<i8>;
        1 stride_w: scalar<i32>;
        2 stride_h: scalar<i32>;
        3 fused_activation_function: scalar<i8>;
        4 quantized_bias_type: scalar<i8>;
    }
}

fb_table! {
    /// AVERAGE_POOL_2D / MAX_POOL_2D / L2_POOL_2D options.
    Pool2DOptions: union [builtin_options::POOL_2D] {
        0 padding: scalar<i8>;
        1 stride_w: scalar<i32>;
        2 stride_h: scalar<i32>;
        3 filter_width: scalar<i32>;
        4 filter_height: scalar<i32>;
        5 fused_activation_function: scalar<i8>;
    }
}

fb_table! {
    /// FULLY_CONNECTED options.
    FullyConnectedOptions: union [builtin_options::FULLY_CONNECTED] {
        0 fused_activation_function: scalar<i8>;
        /// 0: DEFAULT, 1: SHUFFLED4x16INT8.
        1 weights_format: scalar<i8>;
        2 keep_num_dims: scalar<bool>;
        3 asymmetric_quantize_inputs: scalar<bool>;
        4 quantized_bias_type: scalar<i8>;
    }
}

fb_table! {
    /// SOFTMAX options.
    SoftmaxOptions: union [builtin_options::SOFTMAX] {
        0 beta: scalar<f32>;
    }
}

fb_table! {
    /// CONCATENATION options.
    ConcatenationOptions: union [builtin_options::CONCATENATION] {
        0 axis: scalar<i32>;
        1 fused_activation_function: scalar<i8>;
    }
}

fb_table! {
    /// ADD options.
    AddOptions: union [builtin_options::ADD] {
        0 fused_activation_function: scalar<i8>;
        1 pot_scale_int16: scalar<bool> = true;
    }
}

fb_table! {
    /// SUB options.
    SubOptions: union [builtin_options::SUB] {
        0 fused_activation_function: scalar<i8>;
        1 pot_scale_int16: scalar<bool> = true;
    }
}

fb_table! {
    /// MUL options.
    MulOptions: union [builtin_options::MUL] {
        0 fused_activation_function: scalar<i8>;
    }
}

fb_table! {
    /// DIV options.
    DivOptions: union [builtin_options::DIV] {
        0 fused_activation_function: scalar<i8>;
    }
}

fb_table! {
    /// L2_NORMALIZATION options.
    L2NormOptions: union [builtin_options::L2_NORM] {
        0 fused_activation_function: scalar<i8>;
    }
}

fb_table! {
    /// RESIZE_BILINEAR options.
    ResizeBilinearOptions: union [builtin_options::RESIZE_BILINEAR] {
        0 new_height: scalar<i32>;
        1 new_width: scalar<i32>;
        2 align_corners: scalar<bool>;
        3 half_pixel_centers: scalar<bool>;
    }
}

fb_table! {
    /// RESIZE_NEAREST_NEIGHBOR options.
    ResizeNearestNeighborOptions: union [builtin_options::RESIZE_NEAREST_NEIGHBOR] {
        0 align_corners: scalar<bool>;
        1 half_pixel_centers: scalar<bool>;
    }
}

fb_table! {
    /// RESHAPE options (the target shape when there is no shape input).
    ReshapeOptions: union [builtin_options::RESHAPE] {
        0 new_shape: vector<i32>;
    }
}

fb_table! {
    /// SPACE_TO_DEPTH options.
    SpaceToDepthOptions: union [builtin_options::SPACE_TO_DEPTH] {
        0 block_size: scalar<i32>;
    }
}

fb_table! {
    /// DEPTH_TO_SPACE options.
    DepthToSpaceOptions: union [builtin_options::DEPTH_TO_SPACE] {
        0 block_size: scalar<i32>;
    }
}

fb_table! {
    /// GATHER options.
    GatherOptions: union [builtin_options::GATHER] {
        0 axis: scalar<i32>;
        1 batch_dims: scalar<i32>;
    }
}

fb_table! {
    /// MEAN / SUM / REDUCE_* options.
    ReducerOptions: union [builtin_options::REDUCER] {
        0 keep_dims: scalar<bool>;
    }
}

fb_table! {
    /// SQUEEZE options.
    SqueezeOptions: union [builtin_options::SQUEEZE] {
        0 squeeze_dims: vector<i32>;
    }
}

fb_table! {
    /// STRIDED_SLICE options.
    StridedSliceOptions: union [builtin_options::STRIDED_SLICE] {
        0 begin_mask: scalar<i32>;
        1 end_mask: scalar<i32>;
        2 ellipsis_mask: scalar<i32>;
        3 new_axis_mask: scalar<i32>;
        4 shrink_axis_mask: scalar<i32>;
        5 offset: scalar<bool>;
    }
}

fb_table! {
    /// SPLIT options.
    SplitOptions: union [builtin_options::SPLIT] {
        0 num_splits: scalar<i32>;
    }
}

fb_table! {
    /// CAST options.
    CastOptions: union [builtin_options::CAST] {
        0 in_data_type: scalar<i8>;
        1 out_data_type: scalar<i8>;
    }
}

fb_table! {
    /// PACK options.
    PackOptions: union [builtin_options::PACK] {
        0 values_count: scalar<i32>;
        1 axis: scalar<i32>;
    }
}

fb_table! {
    /// UNPACK options.
    UnpackOptions: union [builtin_options::UNPACK] {
        0 num: scalar<i32>;
        1 axis: scalar<i32>;
    }
}

fb_table! {
    /// LEAKY_RELU options.
    LeakyReluOptions: union [builtin_options::LEAKY_RELU] {
        0 alpha: scalar<f32>;
    }
}

fb_table! {
    /// MIRROR_PAD options (mode 0: REFLECT, 1: SYMMETRIC).
    MirrorPadOptions: union [builtin_options::MIRROR_PAD] {
        0 mode: scalar<i8>;
    }
}

fb_table! {
    /// BATCH_MATMUL options.
    BatchMatMulOptions: union [builtin_options::BATCH_MATMUL] {
        0 adj_x: scalar<bool>;
        1 adj_y: scalar<bool>;
        2 asymmetric_quantize_inputs: scalar<bool>;
    }
}

fb_table! {
    /// GELU options.
    GeluOptions: union [builtin_options::GELU] {
        0 approximate: scalar<bool>;
    }
}

/// Verifies a union value of any type as a plain table (its fields are never read).
fn verify_any_union(_key: u8, v: &mut Verifier, pos: usize) -> Result<(), InvalidFlatbuffer> {
    v.verify_union_variant::<ForwardsUOffset<AnyTable>>("table", pos)
}

/// Verifies the `BuiltinOptions` union: transcribed option tables field by field, the others as tables.
fn verify_builtin_options(key: u8, v: &mut Verifier, pos: usize) -> Result<(), InvalidFlatbuffer> {
    macro_rules! by_key {
        ($($t:ident),*) => {
            match key {
                $( k if k == <$t as OptionsTable>::UNION_TYPE => v.verify_union_variant::<ForwardsUOffset<$t>>(stringify!($t), pos), )*
                _ => v.verify_union_variant::<ForwardsUOffset<AnyTable>>("BuiltinOptions", pos),
            }
        };
    }
    by_key!(
        Conv2DOptions,
        DepthwiseConv2DOptions,
        TransposeConvOptions,
        Pool2DOptions,
        FullyConnectedOptions,
        SoftmaxOptions,
        ConcatenationOptions,
        AddOptions,
        SubOptions,
        MulOptions,
        DivOptions,
        L2NormOptions,
        ResizeBilinearOptions,
        ResizeNearestNeighborOptions,
        ReshapeOptions,
        SpaceToDepthOptions,
        DepthToSpaceOptions,
        GatherOptions,
        ReducerOptions,
        SqueezeOptions,
        StridedSliceOptions,
        SplitOptions,
        CastOptions,
        PackOptions,
        UnpackOptions,
        LeakyReluOptions,
        MirrorPadOptions,
        BatchMatMulOptions,
        GeluOptions
    )
}

// ---------------------------------------------------------------------------------------------------------
// Parsing.

/// Why a byte string is not a readable TFLite model.
#[derive(Clone, Debug, PartialEq)]
pub enum ParseError {
    /// Shorter than a flatbuffer header.
    TooShort(usize),
    /// Bytes 4..8 are not `TFL3`.
    BadIdentifier([u8; 4]),
    /// The flatbuffer verifier rejected the file.
    Invalid(InvalidFlatbuffer),
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ParseError::TooShort(n) => write!(f, "{n} bytes is too short for a TFLite flatbuffer"),
            ParseError::BadIdentifier(id) => {
                write!(f, "not a TFLite model: file identifier is {:?}, expected \"{FILE_IDENTIFIER}\"", String::from_utf8_lossy(id))
            }
            ParseError::Invalid(e) => write!(f, "corrupt TFLite flatbuffer: {}", describe(e)),
        }
    }
}

impl std::error::Error for ParseError {}

/// A short description of a verifier error (the crate's own Display lists the whole trace).
fn describe(e: &InvalidFlatbuffer) -> String {
    use flatbuffers::ErrorTraceDetail as D;
    let (what, trace) = match e {
        InvalidFlatbuffer::RangeOutOfBounds { range, error_trace } => {
            (format!("bytes {}..{} lie outside the buffer", range.start, range.end), Some(error_trace))
        }
        InvalidFlatbuffer::SignedOffsetOutOfBounds { soffset, position, error_trace } => {
            (format!("offset {soffset} at byte {position} points outside the buffer"), Some(error_trace))
        }
        InvalidFlatbuffer::Unaligned { position, unaligned_type, error_trace } => {
            (format!("misaligned {unaligned_type} at byte {position}"), Some(error_trace))
        }
        InvalidFlatbuffer::Utf8Error { range, error_trace, .. } => {
            (format!("invalid UTF-8 in the string at bytes {}..{}", range.start, range.end), Some(error_trace))
        }
        InvalidFlatbuffer::MissingNullTerminator { range, error_trace } => {
            (format!("string at bytes {}..{} lacks its terminator", range.start, range.end), Some(error_trace))
        }
        InvalidFlatbuffer::InconsistentUnion { field, error_trace, .. } => {
            (format!("union {field} has a value without a type or a type without a value"), Some(error_trace))
        }
        InvalidFlatbuffer::MissingRequiredField { required, error_trace } => {
            (format!("required field {required} is missing"), Some(error_trace))
        }
        InvalidFlatbuffer::TooManyTables => ("too many tables".to_string(), None),
        InvalidFlatbuffer::ApparentSizeTooLarge => ("apparent size too large".to_string(), None),
        InvalidFlatbuffer::DepthLimitReached => ("tables nested too deeply".to_string(), None),
    };
    let path: Vec<String> = trace
        .map(|t| {
            t.as_ref()
                .iter()
                .rev()
                .map(|d| match d {
                    D::TableField { field_name, .. } => field_name.to_string(),
                    D::VectorElement { index, .. } => format!("[{index}]"),
                    D::UnionVariant { variant, .. } => format!("<{variant}>"),
                })
                .collect()
        })
        .unwrap_or_default();
    if path.is_empty() {
        what
    } else {
        format!("{what} (in Model.{})", path.join(".").replace(".[", "["))
    }
}

/// Checks the identifier and verifies the whole flatbuffer, then returns the root table.
///
/// Never panics on malformed input: truncated files, offsets that point outside the buffer, bad strings
/// and inconsistent unions all return an error.
pub fn parse_model(bytes: &[u8]) -> Result<Model<'_>, ParseError> {
    if bytes.len() < 8 {
        return Err(ParseError::TooShort(bytes.len()));
    }
    if &bytes[4..8] != FILE_IDENTIFIER.as_bytes() {
        let mut id = [0u8; 4];
        id.copy_from_slice(&bytes[4..8]);
        return Err(ParseError::BadIdentifier(id));
    }
    let opts = VerifierOptions { max_tables: 10_000_000, max_apparent_size: 1 << 40, ..Default::default() };
    flatbuffers::root_with_opts::<Model>(&opts, bytes).map_err(ParseError::Invalid)
}

/// Element `i` of an optional flatbuffer vector, or `None` when the vector is absent or too short.
pub fn get<'a, T: Follow<'a> + 'a>(v: Option<Vector<'a, T>>, i: usize) -> Option<T::Inner> {
    v.filter(|v| i < v.len()).map(|v| v.get(i))
}

/// An optional flatbuffer vector of scalars as a `Vec` (empty when absent).
pub fn to_vec<'a, T: Follow<'a, Inner = T> + 'a>(v: Option<Vector<'a, T>>) -> Vec<T> {
    v.map(|v| v.iter().collect()).unwrap_or_default()
}

/// The data of buffer `index`: the in-flatbuffer bytes, or for models over 2 GB the `offset`/`size` range of
/// the file. Empty for the sentinel buffer and for tensors without data.
pub fn buffer_data<'a>(model: &Model<'a>, file: &'a [u8], index: u32) -> Result<&'a [u8], String> {
    let buffers = model.buffers();
    let n = buffers.map(|b| b.len()).unwrap_or(0);
    let Some(b) = get(buffers, index as usize) else {
        return Err(format!("buffer index {index} is out of range ({n} buffers)"));
    };
    if let Some(d) = b.data() {
        if !d.is_empty() {
            return Ok(d.bytes());
        }
    }
    if b.offset() > 1 {
        let start = usize::try_from(b.offset()).map_err(|_| format!("buffer {index} offset is too large"))?;
        let size = usize::try_from(b.size()).map_err(|_| format!("buffer {index} size is too large"))?;
        let end = start.checked_add(size).ok_or_else(|| format!("buffer {index} range overflows"))?;
        return file
            .get(start..end)
            .ok_or_else(|| format!("buffer {index} (bytes {start}..{end}) lies outside the {}-byte file", file.len()));
    }
    Ok(&[])
}
