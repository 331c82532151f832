//! The schema's enums, as plain integer constants (files may carry values newer than this transcription).

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

