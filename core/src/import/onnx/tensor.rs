//! `TensorProto` → [`Tensor`]: element types, the typed data fields, `raw_data` and external data files.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Component, Path};

use half::{bf16, f16};

use super::proto::{data_type as dt, tensor_proto, TensorProto};
use crate::ir::{DType, Tensor, TensorData};
use crate::{Error, Result};

/// The name of an ONNX element type, for messages.
pub fn elem_type_name(t: i32) -> String {
    let s = match t {
        0 => "UNDEFINED",
        1 => "FLOAT",
        2 => "UINT8",
        3 => "INT8",
        4 => "UINT16",
        5 => "INT16",
        6 => "INT32",
        7 => "INT64",
        8 => "STRING",
        9 => "BOOL",
        10 => "FLOAT16",
        11 => "DOUBLE",
        12 => "UINT32",
        13 => "UINT64",
        14 => "COMPLEX64",
        15 => "COMPLEX128",
        16 => "BFLOAT16",
        17 => "FLOAT8E4M3FN",
        18 => "FLOAT8E4M3FNUZ",
        19 => "FLOAT8E5M2",
        20 => "FLOAT8E5M2FNUZ",
        21 => "UINT4",
        22 => "INT4",
        23 => "FLOAT4E2M1",
        24 => "FLOAT8E8M0",
        25 => "UINT2",
        26 => "INT2",
        27 => "FLOAT6E2M3",
        28 => "FLOAT6E3M2",
        _ => return format!("data type {t}"),
    };
    s.to_string()
}

/// Maps an ONNX element type to a core dtype; `None` for types the SDK does not support.
pub fn dtype_of(t: i32) -> Option<DType> {
    Some(match t {
        dt::FLOAT => DType::F32,
        dt::UINT8 => DType::U8,
        dt::INT8 => DType::I8,
        dt::INT16 => DType::I16,
        dt::INT32 => DType::I32,
        dt::INT64 => DType::I64,
        dt::BOOL => DType::Bool,
        dt::FLOAT16 => DType::F16,
        dt::DOUBLE => DType::F64,
        dt::BFLOAT16 => DType::BF16,
        _ => return None,
    })
}

/// Like [`dtype_of`], with an `Unsupported` error that says what carries the type (`what` is, for example,
/// "tensor 'w'").
pub fn dtype_for(t: i32, what: &str) -> Result<DType> {
    dtype_of(t).ok_or_else(|| {
        if t == dt::UNDEFINED {
            Error::InvalidModel(format!("{what} has no element type"))
        } else {
            Error::Unsupported(format!("{what} has element type {}, which tpu-sdk does not support", elem_type_name(t)))
        }
    })
}

/// Validated dims of a tensor proto and their element count.
fn shape_of(dims: &[i64], what: &str) -> Result<(Vec<usize>, usize)> {
    let mut shape = Vec::with_capacity(dims.len().min(64));
    let mut n: usize = 1;
    for &d in dims {
        let u = usize::try_from(d).map_err(|_| Error::InvalidModel(format!("{what} has a negative dimension {d}")))?;
        n = n.checked_mul(u).ok_or_else(|| Error::InvalidModel(format!("{what} has shape {dims:?}, too many elements")))?;
        shape.push(u);
    }
    Ok((shape, n))
}

/// Converts a tensor proto, reading external data relative to `base_dir`.
///
/// `what` names the tensor in errors ("initializer 'w'", "attribute 'value' of node 'c'").
pub fn to_tensor(t: &TensorProto, base_dir: Option<&Path>, what: &str) -> Result<Tensor> {
    let ty = t.data_type.unwrap_or(dt::UNDEFINED);
    let dtype = dtype_for(ty, what)?;
    if t.segment.is_some() {
        return Err(Error::Unsupported(format!("{what} is a segment of a larger tensor")));
    }
    let (shape, n) = shape_of(&t.dims, what)?;
    let size = dtype.size_bytes();
    let nbytes = n.checked_mul(size).ok_or_else(|| Error::InvalidModel(format!("{what} is too large")))?;
    let data = if t.data_location == Some(tensor_proto::EXTERNAL) {
        let bytes = read_external(t, base_dir, nbytes, what)?;
        crate::format::decode_le(dtype, &bytes)
    } else if let Some(raw) = &t.raw_data {
        if raw.len() != nbytes {
            return Err(Error::InvalidModel(format!(
                "{what} has {} bytes of raw data, expected {nbytes} for {} {:?}",
                raw.len(),
                dtype,
                shape
            )));
        }
        crate::format::decode_le(dtype, raw)
    } else {
        from_typed_fields(t, dtype, n, what)?
    };
    Ok(Tensor { shape, data })
}

fn count_error(what: &str, field: &str, got: usize, want: usize) -> Error {
    Error::InvalidModel(format!("{what} has {got} values in {field}, expected {want}"))
}

/// Data from `float_data`, `int32_data`, `int64_data` or `double_data`.
fn from_typed_fields(t: &TensorProto, dtype: DType, n: usize, what: &str) -> Result<TensorData> {
    let check = |field: &str, got: usize| if got == n { Ok(()) } else { Err(count_error(what, field, got, n)) };
    Ok(match dtype {
        DType::F32 => {
            check("float_data", t.float_data.len())?;
            TensorData::F32(t.float_data.clone())
        }
        DType::F64 => {
            check("double_data", t.double_data.len())?;
            TensorData::F64(t.double_data.clone())
        }
        DType::I64 => {
            check("int64_data", t.int64_data.len())?;
            TensorData::I64(t.int64_data.clone())
        }
        _ => {
            check("int32_data", t.int32_data.len())?;
            let v = &t.int32_data;
            match dtype {
                DType::I32 => TensorData::I32(v.clone()),
                DType::I16 => TensorData::I16(v.iter().map(|&x| x as i16).collect()),
                DType::I8 => TensorData::I8(v.iter().map(|&x| x as i8).collect()),
                DType::U8 => TensorData::U8(v.iter().map(|&x| x as u8).collect()),
                DType::Bool => TensorData::Bool(v.iter().map(|&x| x != 0).collect()),
                DType::F16 => TensorData::F16(v.iter().map(|&x| f16::from_bits(x as u16)).collect()),
                DType::BF16 => TensorData::BF16(v.iter().map(|&x| bf16::from_bits(x as u16)).collect()),
                DType::F32 | DType::F64 | DType::I64 => unreachable!("handled above"),
            }
        }
    })
}

/// Reads the bytes of an externally stored tensor: `location` (relative to the model's folder, never leaving
/// it), `offset` and `length` from `external_data`.
fn read_external(t: &TensorProto, base_dir: Option<&Path>, nbytes: usize, what: &str) -> Result<Vec<u8>> {
    let mut location = None;
    let mut offset: u64 = 0;
    let mut length: Option<u64> = None;
    for e in &t.external_data {
        let v = e.value.as_deref().unwrap_or("");
        let num = |key: &str| {
            v.trim().parse::<u64>().map_err(|_| Error::InvalidModel(format!("{what}: external data {key} '{v}' is not a number")))
        };
        match e.key.as_deref().unwrap_or("") {
            "location" => location = Some(v.to_string()),
            "offset" => offset = num("offset")?,
            "length" => length = Some(num("length")?),
            _ => {}
        }
    }
    let location = location.ok_or_else(|| Error::InvalidModel(format!("{what} is stored externally but has no location")))?;
    let rel = Path::new(&location);
    if location.is_empty() || !rel.components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir)) {
        return Err(Error::InvalidModel(format!(
            "{what}: external data location '{location}' must be a relative path inside the model's folder"
        )));
    }
    let base = base_dir.ok_or_else(|| {
        Error::InvalidModel(format!(
            "{what} is stored in external file '{location}', but the model's folder is not known (load it from a path)"
        ))
    })?;
    let path = base.join(rel);
    let io = |source| Error::Io { path: path.display().to_string(), source };
    let mut f = std::fs::File::open(&path).map_err(io)?;
    let file_len = f.metadata().map_err(io)?.len();
    let len = length.unwrap_or_else(|| file_len.saturating_sub(offset));
    if offset.checked_add(len).is_none_or(|end| end > file_len) {
        return Err(Error::InvalidModel(format!(
            "{what}: external data range {offset}..{} is outside '{location}' ({file_len} bytes)",
            offset.saturating_add(len)
        )));
    }
    if len != nbytes as u64 {
        return Err(Error::InvalidModel(format!("{what}: external data has {len} bytes, expected {nbytes}")));
    }
    f.seek(SeekFrom::Start(offset)).map_err(io)?;
    let mut buf = vec![0u8; nbytes];
    f.read_exact(&mut buf).map_err(io)?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proto(dims: Vec<i64>, ty: i32) -> TensorProto {
        TensorProto { dims, data_type: Some(ty), ..Default::default() }
    }

    #[test]
    fn decodes_raw_and_typed_data_and_rejects_bad_lengths() {
        let mut t = proto(vec![2], dt::FLOAT);
        t.raw_data = Some([1.5f32.to_le_bytes(), (-2.0f32).to_le_bytes()].concat());
        assert_eq!(to_tensor(&t, None, "t").unwrap(), Tensor::from_f32(vec![2], vec![1.5, -2.0]));
        t.raw_data.as_mut().unwrap().pop();
        let e = to_tensor(&t, None, "tensor 'w'").unwrap_err().to_string();
        assert!(e.contains("tensor 'w'") && e.contains("7 bytes"), "{e}");

        let mut h = proto(vec![], dt::FLOAT16);
        h.int32_data = vec![0x3c00];
        assert_eq!(to_tensor(&h, None, "h").unwrap().to_f64_vec(), vec![1.0]);
        let mut b = proto(vec![3], dt::BOOL);
        b.int32_data = vec![1, 0, 1];
        assert_eq!(to_tensor(&b, None, "b").unwrap().data, TensorData::Bool(vec![true, false, true]));
        let mut i = proto(vec![2, 2], dt::INT64);
        i.int64_data = vec![1, 2, 3];
        assert!(to_tensor(&i, None, "i").unwrap_err().to_string().contains("int64_data"));

        let s = proto(vec![1], dt::STRING);
        assert!(matches!(to_tensor(&s, None, "s"), Err(Error::Unsupported(m)) if m.contains("STRING") && m.contains("s")));
        let huge = proto(vec![i64::MAX, 4], dt::FLOAT);
        assert!(to_tensor(&huge, None, "x").is_err());
        let neg = proto(vec![-1], dt::FLOAT);
        assert!(to_tensor(&neg, None, "x").is_err());
    }

    #[test]
    fn reads_external_data_inside_the_model_folder_only() {
        let dir = std::env::temp_dir().join(format!("tpu_sdk_ext_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bytes: Vec<u8> = [7i64, 8, 9].iter().flat_map(|x| x.to_le_bytes()).collect();
        std::fs::write(dir.join("w.bin"), [vec![0u8; 4], bytes].concat()).unwrap();
        let kv = |k: &str, v: &str| super::super::proto::StringStringEntryProto { key: Some(k.into()), value: Some(v.into()) };
        let mut t = proto(vec![3], dt::INT64);
        t.data_location = Some(tensor_proto::EXTERNAL);
        t.external_data = vec![kv("location", "w.bin"), kv("offset", "4"), kv("length", "24")];
        assert_eq!(to_tensor(&t, Some(&dir), "t").unwrap().to_i64_vec(), vec![7, 8, 9]);
        t.external_data[2] = kv("length", "100");
        assert!(to_tensor(&t, Some(&dir), "t").unwrap_err().to_string().contains("outside"));
        t.external_data = vec![kv("location", "../w.bin")];
        assert!(to_tensor(&t, Some(&dir), "t").unwrap_err().to_string().contains("relative path"));
        t.external_data = vec![kv("location", "/etc/passwd")];
        assert!(to_tensor(&t, Some(&dir), "t").unwrap_err().to_string().contains("relative path"));
        t.external_data = vec![kv("location", "w.bin")];
        assert!(to_tensor(&t, None, "t").unwrap_err().to_string().contains("folder is not known"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
