//! Writing TFLite models: an owned description of a model (`*T` structs, like flatc's object API) that
//! [`ModelT::to_bytes`] serialises into a `TFL3` flatbuffer.
//!
//! Builtin options are written generically ([`OptionsT`]: the union discriminant and a list of fields by
//! slot), with constructors for the common option tables, so any op of the schema can be written.

use flatbuffers::{FlatBufferBuilder, ForwardsUOffset, Push, PushAlignment, UnionWIPOffset, Vector, WIPOffset};

use super::schema::{builtin_operator, builtin_options, voffset, FILE_IDENTIFIER};

/// A model to write.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ModelT {
    /// Schema version (3).
    pub version: u32,
    /// Operator kinds; operators refer to them by index.
    pub operator_codes: Vec<OperatorCodeT>,
    /// Subgraphs; the first is the main graph.
    pub subgraphs: Vec<SubGraphT>,
    /// Free-text description.
    pub description: Option<String>,
    /// Buffers; buffer 0 must be the empty sentinel.
    pub buffers: Vec<BufferT>,
    /// Named metadata.
    pub metadata: Vec<MetadataT>,
    /// Signatures.
    pub signature_defs: Vec<SignatureDefT>,
}

/// An operator kind.
#[derive(Clone, Debug, PartialEq)]
pub struct OperatorCodeT {
    /// Builtin code (see [`builtin_operator`]).
    pub builtin_code: i32,
    /// Custom op name, for `CUSTOM`.
    pub custom_code: Option<String>,
    /// Op version.
    pub version: i32,
}

impl OperatorCodeT {
    /// A builtin op at `version`.
    pub fn builtin(code: i32, version: i32) -> OperatorCodeT {
        OperatorCodeT { builtin_code: code, custom_code: None, version }
    }
}

/// A subgraph.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SubGraphT {
    /// Tensors.
    pub tensors: Vec<TensorT>,
    /// Input tensor indices.
    pub inputs: Vec<i32>,
    /// Output tensor indices.
    pub outputs: Vec<i32>,
    /// Operators in execution order.
    pub operators: Vec<OperatorT>,
    /// Name.
    pub name: Option<String>,
}

/// A tensor.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TensorT {
    /// Shape.
    pub shape: Vec<i32>,
    /// A `tensor_type` value.
    pub type_: i8,
    /// Buffer index (0: no data).
    pub buffer: u32,
    /// Name.
    pub name: String,
    /// Quantization parameters.
    pub quantization: Option<QuantizationT>,
    /// Shape with -1 for unknown dims (written when present).
    pub shape_signature: Option<Vec<i32>>,
    /// Variable tensor.
    pub is_variable: bool,
}

/// Affine quantization parameters.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QuantizationT {
    /// Calibration minimum (optional).
    pub min: Vec<f32>,
    /// Calibration maximum (optional).
    pub max: Vec<f32>,
    /// Scales.
    pub scale: Vec<f32>,
    /// Zero points.
    pub zero_point: Vec<i64>,
    /// Quantized dimension for per-axis parameters.
    pub quantized_dimension: i32,
}

/// An operator.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OperatorT {
    /// Index into [`ModelT::operator_codes`].
    pub opcode_index: u32,
    /// Input tensor indices (-1: absent).
    pub inputs: Vec<i32>,
    /// Output tensor indices.
    pub outputs: Vec<i32>,
    /// Builtin options (`None`: the union is left empty).
    pub builtin_options: Option<OptionsT>,
    /// Custom options bytes.
    pub custom_options: Option<Vec<u8>>,
    /// Intermediate tensors (written when non-empty: the integer LSTM's gate and hidden parameters).
    pub intermediates: Vec<i32>,
}

/// A buffer.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BufferT {
    /// Data (16-byte aligned in the file).
    pub data: Vec<u8>,
}

/// Named metadata.
#[derive(Clone, Debug, PartialEq)]
pub struct MetadataT {
    /// Name.
    pub name: String,
    /// Buffer index.
    pub buffer: u32,
}

/// A signature.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SignatureDefT {
    /// (alias, tensor index) of inputs.
    pub inputs: Vec<(String, u32)>,
    /// (alias, tensor index) of outputs.
    pub outputs: Vec<(String, u32)>,
    /// Key (e.g. `serving_default`).
    pub signature_key: String,
    /// Subgraph index.
    pub subgraph_index: u32,
}

/// One field value of an options table.
#[derive(Clone, Debug, PartialEq)]
pub enum FieldT {
    /// bool scalar.
    Bool(bool),
    /// byte scalar (enums).
    I8(i8),
    /// int scalar.
    I32(i32),
    /// float scalar.
    F32(f32),
    /// `[int]` vector.
    VecI32(Vec<i32>),
}

/// A builtin options table: its union discriminant and fields by slot (unset fields take the default).
#[derive(Clone, Debug, PartialEq)]
pub struct OptionsT {
    /// Discriminant in the `BuiltinOptions` union (see [`builtin_options`]).
    pub union_type: u8,
    /// (slot, value) pairs.
    pub fields: Vec<(u16, FieldT)>,
}

#[allow(missing_docs)]
impl OptionsT {
    /// An options table with no fields set.
    pub fn new(union_type: u8) -> OptionsT {
        OptionsT { union_type, fields: Vec::new() }
    }
    /// Sets field `slot`.
    pub fn with(mut self, slot: u16, v: FieldT) -> OptionsT {
        self.fields.push((slot, v));
        self
    }
    pub fn conv2d(padding: i8, stride_w: i32, stride_h: i32, act: i8, dil_w: i32, dil_h: i32) -> OptionsT {
        use FieldT::*;
        OptionsT::new(builtin_options::CONV_2D)
            .with(0, I8(padding))
            .with(1, I32(stride_w))
            .with(2, I32(stride_h))
            .with(3, I8(act))
            .with(4, I32(dil_w))
            .with(5, I32(dil_h))
    }
    #[allow(clippy::too_many_arguments)]
    pub fn depthwise_conv2d(padding: i8, stride_w: i32, stride_h: i32, multiplier: i32, act: i8, dil_w: i32, dil_h: i32) -> OptionsT {
        use FieldT::*;
        OptionsT::new(builtin_options::DEPTHWISE_CONV_2D)
            .with(0, I8(padding))
            .with(1, I32(stride_w))
            .with(2, I32(stride_h))
            .with(3, I32(multiplier))
            .with(4, I8(act))
            .with(5, I32(dil_w))
            .with(6, I32(dil_h))
    }
    pub fn pool2d(padding: i8, stride_w: i32, stride_h: i32, filter_w: i32, filter_h: i32, act: i8) -> OptionsT {
        use FieldT::*;
        OptionsT::new(builtin_options::POOL_2D)
            .with(0, I8(padding))
            .with(1, I32(stride_w))
            .with(2, I32(stride_h))
            .with(3, I32(filter_w))
            .with(4, I32(filter_h))
            .with(5, I8(act))
    }
    pub fn fully_connected(act: i8, keep_num_dims: bool) -> OptionsT {
        OptionsT::new(builtin_options::FULLY_CONNECTED).with(0, FieldT::I8(act)).with(2, FieldT::Bool(keep_num_dims))
    }
    pub fn softmax(beta: f32) -> OptionsT {
        OptionsT::new(builtin_options::SOFTMAX).with(0, FieldT::F32(beta))
    }
    pub fn concatenation(axis: i32, act: i8) -> OptionsT {
        OptionsT::new(builtin_options::CONCATENATION).with(0, FieldT::I32(axis)).with(1, FieldT::I8(act))
    }
    /// ADD, SUB, MUL or DIV options (by the op's builtin code) with a fused activation.
    pub fn arithmetic(op_code: i32, act: i8) -> OptionsT {
        let t = match op_code {
            builtin_operator::SUB => builtin_options::SUB,
            builtin_operator::MUL => builtin_options::MUL,
            builtin_operator::DIV => builtin_options::DIV,
            _ => builtin_options::ADD,
        };
        OptionsT::new(t).with(0, FieldT::I8(act))
    }
    pub fn reshape(new_shape: Vec<i32>) -> OptionsT {
        OptionsT::new(builtin_options::RESHAPE).with(0, FieldT::VecI32(new_shape))
    }
    pub fn reducer(keep_dims: bool) -> OptionsT {
        OptionsT::new(builtin_options::REDUCER).with(0, FieldT::Bool(keep_dims))
    }
    pub fn squeeze(dims: Vec<i32>) -> OptionsT {
        OptionsT::new(builtin_options::SQUEEZE).with(0, FieldT::VecI32(dims))
    }
    pub fn gather(axis: i32) -> OptionsT {
        OptionsT::new(builtin_options::GATHER).with(0, FieldT::I32(axis))
    }
    pub fn resize_bilinear(align_corners: bool, half_pixel_centers: bool) -> OptionsT {
        OptionsT::new(builtin_options::RESIZE_BILINEAR).with(2, FieldT::Bool(align_corners)).with(3, FieldT::Bool(half_pixel_centers))
    }
    pub fn resize_nearest(align_corners: bool, half_pixel_centers: bool) -> OptionsT {
        OptionsT::new(builtin_options::RESIZE_NEAREST_NEIGHBOR).with(0, FieldT::Bool(align_corners)).with(1, FieldT::Bool(half_pixel_centers))
    }
    pub fn strided_slice(begin_mask: i32, end_mask: i32, shrink_axis_mask: i32) -> OptionsT {
        OptionsT::new(builtin_options::STRIDED_SLICE).with(0, FieldT::I32(begin_mask)).with(1, FieldT::I32(end_mask)).with(4, FieldT::I32(shrink_axis_mask))
    }
    pub fn batch_matmul(adj_x: bool, adj_y: bool) -> OptionsT {
        OptionsT::new(builtin_options::BATCH_MATMUL).with(0, FieldT::Bool(adj_x)).with(1, FieldT::Bool(adj_y))
    }
}

/// A byte pushed with 16-byte alignment of the vector it belongs to (`Buffer.data` has `force_align: 16`).
#[derive(Clone, Copy)]
struct Aligned16(u8);

impl Push for Aligned16 {
    type Output = u8;
    unsafe fn push(&self, dst: &mut [u8], _written_len: usize) {
        dst[0] = self.0;
    }
    fn size() -> usize {
        1
    }
    fn alignment() -> PushAlignment {
        PushAlignment::new(16)
    }
}

type Off<T> = WIPOffset<T>;
type TableOff = Off<flatbuffers::TableFinishedWIPOffset>;

fn vec_of_tables<'b>(fbb: &mut FlatBufferBuilder<'b>, items: &[TableOff]) -> Off<Vector<'b, ForwardsUOffset<flatbuffers::TableFinishedWIPOffset>>> {
    fbb.create_vector(items)
}

fn opt_string<'b>(fbb: &mut FlatBufferBuilder<'b>, s: &Option<String>) -> Option<Off<&'b str>> {
    s.as_ref().map(|s| fbb.create_string(s))
}

impl ModelT {
    /// Serialises the model into a `TFL3` flatbuffer.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut fbb = FlatBufferBuilder::with_capacity(1024 + self.buffers.iter().map(|b| b.data.len() + 32).sum::<usize>());
        // Buffers first: the large data ends up at the end of the file, as TFLite's converter writes it.
        let buffers: Vec<TableOff> = self
            .buffers
            .iter()
            .map(|b| {
                let data = if b.data.is_empty() {
                    None
                } else {
                    let v: Vec<Aligned16> = b.data.iter().map(|&x| Aligned16(x)).collect();
                    Some(fbb.create_vector(&v))
                };
                let t = fbb.start_table();
                if let Some(d) = data {
                    fbb.push_slot_always(voffset(0), d);
                }
                fbb.end_table(t)
            })
            .collect();
        let buffers = vec_of_tables(&mut fbb, &buffers);

        let codes: Vec<TableOff> = self
            .operator_codes
            .iter()
            .map(|c| {
                let custom = opt_string(&mut fbb, &c.custom_code);
                let t = fbb.start_table();
                let deprecated = c.builtin_code.min(builtin_operator::PLACEHOLDER_FOR_GREATER_OP_CODES) as i8;
                if let Some(s) = custom {
                    fbb.push_slot_always(voffset(1), s);
                }
                fbb.push_slot::<i32>(voffset(3), c.builtin_code, 0);
                fbb.push_slot::<i32>(voffset(2), c.version, 1);
                fbb.push_slot::<i8>(voffset(0), deprecated, 0);
                fbb.end_table(t)
            })
            .collect();
        let codes = vec_of_tables(&mut fbb, &codes);

        let subgraphs: Vec<TableOff> = self.subgraphs.iter().map(|sg| write_subgraph(&mut fbb, sg)).collect();
        let subgraphs = vec_of_tables(&mut fbb, &subgraphs);
        let description = opt_string(&mut fbb, &self.description);

        let metadata: Vec<TableOff> = self
            .metadata
            .iter()
            .map(|m| {
                let name = fbb.create_string(&m.name);
                let t = fbb.start_table();
                fbb.push_slot_always(voffset(0), name);
                fbb.push_slot::<u32>(voffset(1), m.buffer, 0);
                fbb.end_table(t)
            })
            .collect();
        let metadata = (!metadata.is_empty()).then(|| vec_of_tables(&mut fbb, &metadata));

        let sigs: Vec<TableOff> = self
            .signature_defs
            .iter()
            .map(|s| {
                let ins = tensor_maps(&mut fbb, &s.inputs);
                let outs = tensor_maps(&mut fbb, &s.outputs);
                let key = fbb.create_string(&s.signature_key);
                let t = fbb.start_table();
                fbb.push_slot_always(voffset(0), ins);
                fbb.push_slot_always(voffset(1), outs);
                fbb.push_slot_always(voffset(2), key);
                fbb.push_slot::<u32>(voffset(4), s.subgraph_index, 0);
                fbb.end_table(t)
            })
            .collect();
        let sigs = (!sigs.is_empty()).then(|| vec_of_tables(&mut fbb, &sigs));

        let t = fbb.start_table();
        fbb.push_slot::<u32>(voffset(0), self.version, 0);
        fbb.push_slot_always(voffset(1), codes);
        fbb.push_slot_always(voffset(2), subgraphs);
        if let Some(d) = description {
            fbb.push_slot_always(voffset(3), d);
        }
        fbb.push_slot_always(voffset(4), buffers);
        if let Some(m) = metadata {
            fbb.push_slot_always(voffset(6), m);
        }
        if let Some(s) = sigs {
            fbb.push_slot_always(voffset(7), s);
        }
        let root = fbb.end_table(t);
        fbb.finish(root, Some(FILE_IDENTIFIER));
        fbb.finished_data().to_vec()
    }
}

fn tensor_maps<'b>(fbb: &mut FlatBufferBuilder<'b>, list: &[(String, u32)]) -> Off<Vector<'b, ForwardsUOffset<flatbuffers::TableFinishedWIPOffset>>> {
    let items: Vec<TableOff> = list
        .iter()
        .map(|(n, i)| {
            let name = fbb.create_string(n);
            let t = fbb.start_table();
            fbb.push_slot_always(voffset(0), name);
            fbb.push_slot::<u32>(voffset(1), *i, 0);
            fbb.end_table(t)
        })
        .collect();
    fbb.create_vector(&items)
}

fn write_subgraph(fbb: &mut FlatBufferBuilder, sg: &SubGraphT) -> TableOff {
    let tensors: Vec<TableOff> = sg
        .tensors
        .iter()
        .map(|t| {
            let shape = fbb.create_vector(&t.shape);
            let name = fbb.create_string(&t.name);
            let quant = t.quantization.as_ref().map(|q| {
                let min = (!q.min.is_empty()).then(|| fbb.create_vector(&q.min));
                let max = (!q.max.is_empty()).then(|| fbb.create_vector(&q.max));
                let scale = fbb.create_vector(&q.scale);
                let zp = fbb.create_vector(&q.zero_point);
                let tt = fbb.start_table();
                if let Some(m) = min {
                    fbb.push_slot_always(voffset(0), m);
                }
                if let Some(m) = max {
                    fbb.push_slot_always(voffset(1), m);
                }
                fbb.push_slot_always(voffset(2), scale);
                fbb.push_slot_always(voffset(3), zp);
                fbb.push_slot::<i32>(voffset(6), q.quantized_dimension, 0);
                fbb.end_table(tt)
            });
            let sig = t.shape_signature.as_ref().map(|s| fbb.create_vector(s));
            let tt = fbb.start_table();
            fbb.push_slot_always(voffset(0), shape);
            fbb.push_slot::<u32>(voffset(2), t.buffer, 0);
            fbb.push_slot_always(voffset(3), name);
            if let Some(q) = quant {
                fbb.push_slot_always(voffset(4), q);
            }
            if let Some(s) = sig {
                fbb.push_slot_always(voffset(7), s);
            }
            fbb.push_slot::<i8>(voffset(1), t.type_, 0);
            fbb.push_slot::<bool>(voffset(5), t.is_variable, false);
            fbb.end_table(tt)
        })
        .collect();
    let tensors = fbb.create_vector(&tensors);
    let inputs = fbb.create_vector(&sg.inputs);
    let outputs = fbb.create_vector(&sg.outputs);
    let ops: Vec<TableOff> = sg
        .operators
        .iter()
        .map(|op| {
            let ins = fbb.create_vector(&op.inputs);
            let outs = fbb.create_vector(&op.outputs);
            let opts = op.builtin_options.as_ref().map(|o| (o.union_type, write_options(fbb, o)));
            let custom = op.custom_options.as_ref().map(|c| fbb.create_vector(c));
            let intermediates = (!op.intermediates.is_empty()).then(|| fbb.create_vector(&op.intermediates));
            let t = fbb.start_table();
            fbb.push_slot::<u32>(voffset(0), op.opcode_index, 0);
            fbb.push_slot_always(voffset(1), ins);
            fbb.push_slot_always(voffset(2), outs);
            if let Some((ty, o)) = opts {
                fbb.push_slot_always(voffset(4), o);
                fbb.push_slot_always::<u8>(voffset(3), ty);
            }
            if let Some(c) = custom {
                fbb.push_slot_always(voffset(5), c);
            }
            if let Some(i) = intermediates {
                fbb.push_slot_always(voffset(8), i);
            }
            fbb.end_table(t)
        })
        .collect();
    let ops = fbb.create_vector(&ops);
    let name = opt_string(fbb, &sg.name);
    let t = fbb.start_table();
    fbb.push_slot_always(voffset(0), tensors);
    fbb.push_slot_always(voffset(1), inputs);
    fbb.push_slot_always(voffset(2), outputs);
    fbb.push_slot_always(voffset(3), ops);
    if let Some(n) = name {
        fbb.push_slot_always(voffset(4), n);
    }
    fbb.end_table(t)
}

fn write_options(fbb: &mut FlatBufferBuilder, o: &OptionsT) -> Off<UnionWIPOffset> {
    let vecs: Vec<Option<Off<Vector<i32>>>> = o
        .fields
        .iter()
        .map(|(_, f)| match f {
            FieldT::VecI32(v) => Some(fbb.create_vector(v)),
            _ => None,
        })
        .collect();
    let t = fbb.start_table();
    for ((slot, f), v) in o.fields.iter().zip(vecs) {
        let vo = voffset(*slot);
        // Always written (even at the default) so that readers with other defaults agree.
        match f {
            FieldT::Bool(b) => fbb.push_slot_always::<bool>(vo, *b),
            FieldT::I8(x) => fbb.push_slot_always::<i8>(vo, *x),
            FieldT::I32(x) => fbb.push_slot_always::<i32>(vo, *x),
            FieldT::F32(x) => fbb.push_slot_always::<f32>(vo, *x),
            FieldT::VecI32(_) => {
                if let Some(v) = v {
                    fbb.push_slot_always(vo, v)
                }
            }
        }
    }
    fbb.end_table(t).as_union_value()
}
