//! The builtin option tables tpu-sdk reads and writes (members of the `BuiltinOptions` union), one row each:
//! the struct name, its [`builtin_options`] discriminant, and its fields as [`fb_table!`] declares them.

use flatbuffers::{Follow, ForwardsUOffset, InvalidFlatbuffer, Table, Vector, Verifiable, Verifier};

use super::{builtin_options, voffset, AnyTable, OptionsTable};

/// Declares option tables (as [`fb_table!`], with the union discriminant `builtin_options::<DISC>`) and
/// `verify_builtin_options`, which verifies a `BuiltinOptions` value as the table its discriminant names:
/// the tables declared here field by field, the other members of the union as plain tables.
macro_rules! fb_options {
    ( $( $(#[$meta:meta])* $name:ident = $disc:ident { $($fields:tt)* } )* ) => {
        $( fb_table! { $(#[$meta])* $name: union [builtin_options::$disc] { $($fields)* } } )*

        /// Verifies the `BuiltinOptions` union: transcribed option tables field by field, the others as tables.
        pub(super) fn verify_builtin_options(key: u8, v: &mut Verifier, pos: usize) -> Result<(), InvalidFlatbuffer> {
            match key {
                $( builtin_options::$disc => v.verify_union_variant::<ForwardsUOffset<$name>>(stringify!($name), pos), )*
                _ => v.verify_union_variant::<ForwardsUOffset<AnyTable>>("BuiltinOptions", pos),
            }
        }
    };
}

fb_options! {
    /// CONV_2D options.
    Conv2DOptions = CONV_2D {
        0 padding: scalar<i8>; 1 stride_w: scalar<i32>; 2 stride_h: scalar<i32>; 3 fused_activation_function: scalar<i8>;
        4 dilation_w_factor: scalar<i32> = 1; 5 dilation_h_factor: scalar<i32> = 1; 6 quantized_bias_type: scalar<i8>;
    }
    /// DEPTHWISE_CONV_2D options.
    DepthwiseConv2DOptions = DEPTHWISE_CONV_2D {
        0 padding: scalar<i8>; 1 stride_w: scalar<i32>; 2 stride_h: scalar<i32>; 3 depth_multiplier: scalar<i32>;
        4 fused_activation_function: scalar<i8>; 5 dilation_w_factor: scalar<i32> = 1; 6 dilation_h_factor: scalar<i32> = 1;
    }
    /// TRANSPOSE_CONV options.
    TransposeConvOptions = TRANSPOSE_CONV {
        0 padding: scalar<i8>; 1 stride_w: scalar<i32>; 2 stride_h: scalar<i32>; 3 fused_activation_function: scalar<i8>;
        4 quantized_bias_type: scalar<i8>;
    }
    /// AVERAGE_POOL_2D / MAX_POOL_2D / L2_POOL_2D options.
    Pool2DOptions = POOL_2D {
        0 padding: scalar<i8>; 1 stride_w: scalar<i32>; 2 stride_h: scalar<i32>; 3 filter_width: scalar<i32>; 4 filter_height: scalar<i32>;
        5 fused_activation_function: scalar<i8>;
    }
    /// FULLY_CONNECTED options.
    FullyConnectedOptions = FULLY_CONNECTED {
        0 fused_activation_function: scalar<i8>;
        /// 0: DEFAULT, 1: SHUFFLED4x16INT8.
        1 weights_format: scalar<i8>;
        2 keep_num_dims: scalar<bool>; 3 asymmetric_quantize_inputs: scalar<bool>; 4 quantized_bias_type: scalar<i8>;
    }
    /// SOFTMAX options.
    SoftmaxOptions = SOFTMAX { 0 beta: scalar<f32>; }
    /// CONCATENATION options.
    ConcatenationOptions = CONCATENATION { 0 axis: scalar<i32>; 1 fused_activation_function: scalar<i8>; }
    /// ADD options.
    AddOptions = ADD { 0 fused_activation_function: scalar<i8>; 1 pot_scale_int16: scalar<bool> = true; }
    /// SUB options.
    SubOptions = SUB { 0 fused_activation_function: scalar<i8>; 1 pot_scale_int16: scalar<bool> = true; }
    /// MUL options.
    MulOptions = MUL { 0 fused_activation_function: scalar<i8>; }
    /// DIV options.
    DivOptions = DIV { 0 fused_activation_function: scalar<i8>; }
    /// L2_NORMALIZATION options.
    L2NormOptions = L2_NORM { 0 fused_activation_function: scalar<i8>; }
    /// RESIZE_BILINEAR options.
    ResizeBilinearOptions = RESIZE_BILINEAR {
        0 new_height: scalar<i32>; 1 new_width: scalar<i32>; 2 align_corners: scalar<bool>; 3 half_pixel_centers: scalar<bool>;
    }
    /// RESIZE_NEAREST_NEIGHBOR options.
    ResizeNearestNeighborOptions = RESIZE_NEAREST_NEIGHBOR { 0 align_corners: scalar<bool>; 1 half_pixel_centers: scalar<bool>; }
    /// RESHAPE options (the target shape when there is no shape input).
    ReshapeOptions = RESHAPE { 0 new_shape: vector<i32>; }
    /// SPACE_TO_DEPTH options.
    SpaceToDepthOptions = SPACE_TO_DEPTH { 0 block_size: scalar<i32>; }
    /// DEPTH_TO_SPACE options.
    DepthToSpaceOptions = DEPTH_TO_SPACE { 0 block_size: scalar<i32>; }
    /// GATHER options.
    GatherOptions = GATHER { 0 axis: scalar<i32>; 1 batch_dims: scalar<i32>; }
    /// MEAN / SUM / REDUCE_* options.
    ReducerOptions = REDUCER { 0 keep_dims: scalar<bool>; }
    /// SQUEEZE options.
    SqueezeOptions = SQUEEZE { 0 squeeze_dims: vector<i32>; }
    /// STRIDED_SLICE options.
    StridedSliceOptions = STRIDED_SLICE {
        0 begin_mask: scalar<i32>; 1 end_mask: scalar<i32>; 2 ellipsis_mask: scalar<i32>; 3 new_axis_mask: scalar<i32>;
        4 shrink_axis_mask: scalar<i32>; 5 offset: scalar<bool>;
    }
    /// SPLIT options.
    SplitOptions = SPLIT { 0 num_splits: scalar<i32>; }
    /// CAST options.
    CastOptions = CAST { 0 in_data_type: scalar<i8>; 1 out_data_type: scalar<i8>; }
    /// PACK options.
    PackOptions = PACK { 0 values_count: scalar<i32>; 1 axis: scalar<i32>; }
    /// UNPACK options.
    UnpackOptions = UNPACK { 0 num: scalar<i32>; 1 axis: scalar<i32>; }
    /// LEAKY_RELU options.
    LeakyReluOptions = LEAKY_RELU { 0 alpha: scalar<f32>; }
    /// MIRROR_PAD options (mode 0: REFLECT, 1: SYMMETRIC).
    MirrorPadOptions = MIRROR_PAD { 0 mode: scalar<i8>; }
    /// BATCH_MATMUL options.
    BatchMatMulOptions = BATCH_MATMUL { 0 adj_x: scalar<bool>; 1 adj_y: scalar<bool>; 2 asymmetric_quantize_inputs: scalar<bool>; }
    /// GELU options.
    GeluOptions = GELU { 0 approximate: scalar<bool>; }
    /// LOCAL_RESPONSE_NORMALIZATION options.
    LocalResponseNormalizationOptions = LOCAL_RESPONSE_NORMALIZATION {
        0 radius: scalar<i32>; 1 bias: scalar<f32>; 2 alpha: scalar<f32>; 3 beta: scalar<f32>;
    }
    /// SHAPE options (the output's tensor type).
    ShapeOptions = SHAPE { 0 out_type: scalar<i8>; }
    /// IF options: the subgraphs of the two branches.
    IfOptions = IF { 0 then_subgraph_index: scalar<i32>; 1 else_subgraph_index: scalar<i32>; }
    /// WHILE options: the condition and body subgraphs.
    WhileOptions = WHILE { 0 cond_subgraph_index: scalar<i32>; 1 body_subgraph_index: scalar<i32>; }
    /// ONE_HOT options.
    OneHotOptions = ONE_HOT { 0 axis: scalar<i32>; }
    /// SPLIT_V options.
    SplitVOptions = SPLIT_V { 0 num_splits: scalar<i32>; }
    /// CUMSUM options.
    CumsumOptions = CUMSUM { 0 exclusive: scalar<bool>; 1 reverse: scalar<bool>; }
    /// UNIDIRECTIONAL_SEQUENCE_RNN options (the `SequenceRNNOptions` table).
    SequenceRNNOptions = SEQUENCE_RNN {
        0 time_major: scalar<bool>; 1 fused_activation_function: scalar<i8>; 2 asymmetric_quantize_inputs: scalar<bool>;
    }
    /// BIDIRECTIONAL_SEQUENCE_LSTM options (`time_major` defaults to true here, unlike the unidirectional op).
    BidirectionalSequenceLSTMOptions = BIDIRECTIONAL_SEQUENCE_LSTM {
        0 fused_activation_function: scalar<i8>; 1 cell_clip: scalar<f32>; 2 proj_clip: scalar<f32>; 3 merge_outputs: scalar<bool>;
        4 time_major: scalar<bool> = true; 5 asymmetric_quantize_inputs: scalar<bool>;
    }
    /// UNIDIRECTIONAL_SEQUENCE_LSTM options.
    UnidirectionalSequenceLSTMOptions = UNIDIRECTIONAL_SEQUENCE_LSTM {
        0 fused_activation_function: scalar<i8>; 1 cell_clip: scalar<f32>; 2 proj_clip: scalar<f32>; 3 time_major: scalar<bool>;
        4 asymmetric_quantize_inputs: scalar<bool>; 5 diagonal_recurrent_tensors: scalar<bool>;
    }
}
