//! The schema's enums, as plain integer constants (files may carry values newer than this transcription).

/// Declares an enum's values as constants of type `$t`; with a doc line and a fallback word, also a `name`
/// function giving a value's schema name (`"<fallback> <value>"` for values newer than this transcription).
macro_rules! schema_values {
    ($t:ty; $($n:ident = $v:literal),* $(,)?) => { $( #[allow(missing_docs)] pub const $n: $t = $v; )* };
    (#[doc = $doc:literal] $t:ty, $fallback:literal; $($n:ident = $v:literal),* $(,)?) => {
        schema_values! { $t; $($n = $v),* }
        #[doc = $doc]
        pub fn name(v: $t) -> String {
            match v {
                $( $n => stringify!($n).to_string(), )*
                other => format!(concat!($fallback, " {}"), other),
            }
        }
    };
}

/// `TensorType` values.
#[allow(missing_docs)]
pub mod tensor_type {
    schema_values! {
        /// The schema name of a tensor type.
        i8, "type";
        FLOAT32 = 0, FLOAT16 = 1, INT32 = 2, UINT8 = 3, INT64 = 4, STRING = 5, BOOL = 6, INT16 = 7, COMPLEX64 = 8,
        INT8 = 9, FLOAT64 = 10, COMPLEX128 = 11, UINT64 = 12, RESOURCE = 13, VARIANT = 14, UINT32 = 15, UINT16 = 16,
        INT4 = 17, BFLOAT16 = 18,
    }
}

/// `Padding` values.
#[allow(missing_docs)]
pub mod padding {
    schema_values! {
        i8;
        SAME = 0, VALID = 1,
    }
}

/// `ActivationFunctionType` values.
#[allow(missing_docs)]
pub mod activation {
    schema_values! {
        /// The schema name of a fused activation.
        i8, "activation";
        NONE = 0, RELU = 1, RELU_N1_TO_1 = 2, RELU6 = 3, TANH = 4, SIGN_BIT = 5,
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

    schema_values! {
        i32;
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
        GELU = 150, SHAPE = 77, BATCH_TO_SPACE_ND = 37, SPACE_TO_BATCH_ND = 38, SELECT = 64, SELECT_V2 = 123,
        ONE_HOT = 85, LOCAL_RESPONSE_NORMALIZATION = 13, ZEROS_LIKE = 93, FILL = 94, REVERSE_V2 = 105,
        SCATTER_ND = 122, BROADCAST_TO = 130, UNSORTED_SEGMENT_PROD = 153, NOT_EQUAL = 72, LOGICAL_OR = 84,
        LOGICAL_AND = 86, LOGICAL_NOT = 87, FLOOR_DIV = 90, FLOOR_MOD = 95, RANGE = 96, RANK = 110, ADD_N = 106,
        TOPK_V2 = 48, ROUND = 116, SIGN = 158, UNIDIRECTIONAL_SEQUENCE_RNN = 35, IF = 118, WHILE = 119,
    }
}

/// Discriminants of the `BuiltinOptions` union for the option tables transcribed here.
#[allow(missing_docs)]
pub mod builtin_options {
    schema_values! {
        u8;
        NONE = 0, CONV_2D = 1, DEPTHWISE_CONV_2D = 2, POOL_2D = 5, FULLY_CONNECTED = 8, SOFTMAX = 9, CONCATENATION = 10,
        ADD = 11, L2_NORM = 12, RESIZE_BILINEAR = 15, RESHAPE = 17, SPACE_TO_DEPTH = 19, MUL = 21, PAD = 22,
        GATHER = 23, TRANSPOSE = 26, REDUCER = 27, SUB = 28, DIV = 29, SQUEEZE = 30, STRIDED_SLICE = 32, SPLIT = 35,
        CAST = 37, DEQUANTIZE = 38, MAXIMUM_MINIMUM = 39, PADV2 = 43, SLICE = 48, TRANSPOSE_CONV = 49, EXPAND_DIMS = 52,
        PACK = 59, UNPACK = 64, RESIZE_NEAREST_NEIGHBOR = 74, LEAKY_RELU = 75, MIRROR_PAD = 77, QUANTIZE = 89,
        HARD_SWISH = 91, DEPTH_TO_SPACE = 94, BATCH_MATMUL = 101, GELU = 116, LOCAL_RESPONSE_NORMALIZATION = 13,
        SHAPE = 55, ONE_HOT = 61, SPLIT_V = 79, CUMSUM = 102, UNIDIRECTIONAL_SEQUENCE_LSTM = 71, SEQUENCE_RNN = 31,
        IF = 92, WHILE = 93, BIDIRECTIONAL_SEQUENCE_LSTM = 69,
    }
}

/// `DimensionType`.
#[allow(missing_docs)]
pub mod dimension_type {
    schema_values! {
        i8;
        DENSE = 0, SPARSE_CSR = 1,
    }
}

/// Discriminants of the `SparseIndexVector` union.
#[allow(missing_docs)]
pub mod sparse_index_vector {
    schema_values! {
        u8;
        INT32 = 1, UINT16 = 2, UINT8 = 3,
    }
}

