//! The model's tables: the root, operator codes, subgraphs, tensors (with their quantization and sparsity),
//! buffers, operators, metadata and signatures.

use flatbuffers::{Follow, ForwardsUOffset, InvalidFlatbuffer, Table, Vector, Verifiable, Verifier};

use super::options::verify_builtin_options;
#[allow(unused_imports)] // named by the doc links
use super::{builtin_options, dimension_type, sparse_index_vector, tensor_type};
use super::{builtin_operator, voffset, AnyTable, OptionsTable};

fb_table! {
    /// The root table.
    Model {
        0 version: scalar<u32>; 1 operator_codes: tables<OperatorCode>; 2 subgraphs: tables<SubGraph>;
        3 description: string<str>; 4 buffers: tables<Buffer>; 5 metadata_buffer: vector<i32>;
        6 metadata: tables<Metadata>; 7 signature_defs: tables<SignatureDef>;
    }
}

fb_table! {
    /// An operator kind: a builtin code or a custom op name.
    OperatorCode {
        /// The builtin code when it is below 127 (older files only have this field).
        0 deprecated_builtin_code: scalar<i8>;
        1 custom_code: string<str>; 2 version: scalar<i32> = 1;
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
        0 tensors: tables<Tensor>; 1 inputs: vector<i32>; 2 outputs: vector<i32>; 3 operators: tables<Operator>;
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
        3 name: string<str>; 4 quantization: table<QuantizationParameters>; 5 is_variable: scalar<bool>;
        6 sparsity: table<SparsityParameters>;
        /// The shape with -1 for unknown dimensions.
        7 shape_signature: vector<i32>;
        8 has_rank: scalar<bool>; 9 variant_tensors: tables<AnyTable>;
    }
}

fb_table! {
    /// How a sparse constant is stored (see [`crate::format::tflite::sparsity`]): the dims in traversal order
    /// (the original dims, then the block dims), which original dim each block dim splits, and per traversed dim its format.
    SparsityParameters {
        0 traversal_order: vector<i32>; 1 block_map: vector<i32>; 2 dim_metadata: tables<DimensionMetadata>;
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
        0 min: vector<f32>; 1 max: vector<f32>; 2 scale: vector<f32>; 3 zero_point: vector<i64>;
        4 details_type: scalar<u8>; 5 details: union<verify_any_union>; 6 quantized_dimension: scalar<i32>;
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
        4 builtin_options: union<verify_builtin_options>; 5 custom_options: vector<u8>;
        6 custom_options_format: scalar<i8>; 7 mutating_variable_inputs: vector<bool>; 8 intermediates: vector<i32>;
        9 large_custom_options_offset: scalar<u64>; 10 large_custom_options_size: scalar<u64>;
        11 builtin_options_2_type: scalar<u8>; 12 builtin_options_2: union<verify_any_union>;
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
        0 name: string<str>; 1 buffer: scalar<u32>;
    }
}

fb_table! {
    /// An alias name for a tensor in a signature.
    TensorMap {
        0 name: string<str>; 1 tensor_index: scalar<u32>;
    }
}

fb_table! {
    /// A SavedModel signature: named inputs and outputs of a subgraph.
    SignatureDef {
        0 inputs: tables<TensorMap>; 1 outputs: tables<TensorMap>; 2 signature_key: string<str>;
        3 deprecated_tag: string<str>; 4 subgraph_index: scalar<u32>;
    }
}

/// Verifies a union value of any type as a plain table (its fields are never read).
fn verify_any_union(_key: u8, v: &mut Verifier, pos: usize) -> Result<(), InvalidFlatbuffer> {
    v.verify_union_variant::<ForwardsUOffset<AnyTable>>("table", pos)
}
