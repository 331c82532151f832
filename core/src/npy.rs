//! Reading and writing NumPy `.npy` files (format versions 1.0–3.0, little-endian, C order).

use crate::ir::{DType, Tensor, TensorData};
use crate::{Error, Result};

fn bad(msg: impl Into<String>) -> Error {
    Error::InvalidModel(format!("npy: {}", msg.into()))
}

fn descr_dtype(descr: &str) -> Result<DType> {
    Ok(match descr {
        "<f4" => DType::F32,
        "<f8" => DType::F64,
        "<f2" => DType::F16,
        "|i1" | "i1" => DType::I8,
        "|u1" | "u1" => DType::U8,
        "<i2" => DType::I16,
        "<i4" => DType::I32,
        "<i8" => DType::I64,
        "|b1" | "b1" => DType::Bool,
        other => return Err(Error::Unsupported(format!("npy dtype '{other}' (supported: f2 f4 f8 i1 u1 i2 i4 i8 b1, little-endian)"))),
    })
}

fn dtype_descr(d: DType) -> Result<&'static str> {
    Ok(match d {
        DType::F32 => "<f4",
        DType::F64 => "<f8",
        DType::F16 => "<f2",
        DType::I8 => "|i1",
        DType::U8 => "|u1",
        DType::I16 => "<i2",
        DType::I32 => "<i4",
        DType::I64 => "<i8",
        DType::Bool => "|b1",
        DType::BF16 => return Err(Error::Unsupported("bf16 has no .npy dtype; cast to f32 first".into())),
    })
}

/// Finds `'key': value` in the header dict and returns the raw value text.
fn header_field<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let k = format!("'{key}'");
    let start = header.find(&k)? + k.len();
    let rest = header[start..].trim_start().strip_prefix(':')?.trim_start();
    let end = if rest.starts_with('(') {
        rest.find(')')? + 1
    } else {
        rest.find([',', '}']).unwrap_or(rest.len())
    };
    Some(rest[..end].trim())
}

/// Parses `.npy` bytes into a tensor.
pub fn from_bytes(bytes: &[u8]) -> Result<Tensor> {
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err(bad("not a .npy file (missing \\x93NUMPY magic)"));
    }
    let major = bytes[6];
    let (hlen, hstart): (usize, usize) = match major {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 => {
            if bytes.len() < 12 {
                return Err(bad("truncated header"));
            }
            (u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize, 12)
        }
        v => return Err(bad(format!("unsupported format version {v}"))),
    };
    let hend = hstart.checked_add(hlen).filter(|&e| e <= bytes.len()).ok_or_else(|| bad("truncated header"))?;
    let header = std::str::from_utf8(&bytes[hstart..hend]).map_err(|_| bad("header is not text"))?;
    let descr = header_field(header, "descr").ok_or_else(|| bad("header has no 'descr'"))?.trim_matches(['\'', '"']);
    let dtype = descr_dtype(descr)?;
    if header_field(header, "fortran_order").is_some_and(|v| v.starts_with("True")) {
        return Err(Error::Unsupported("Fortran-order .npy arrays; save with np.ascontiguousarray".into()));
    }
    let shape_txt = header_field(header, "shape").ok_or_else(|| bad("header has no 'shape'"))?;
    let shape: Vec<usize> = shape_txt
        .trim_matches(['(', ')'])
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<usize>().map_err(|_| bad(format!("bad shape '{shape_txt}'"))))
        .collect::<Result<_>>()?;
    let n = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).ok_or_else(|| bad("shape overflows"))?;
    let body = &bytes[hend..];
    let need = n.checked_mul(dtype.size_bytes()).ok_or_else(|| bad("shape overflows"))?;
    if body.len() < need {
        return Err(bad(format!("truncated data: shape {shape:?} needs {need} bytes, file has {}", body.len())));
    }
    let body = &body[..need];
    let data = crate::format::decode_le(dtype, body);
    Ok(Tensor { shape, data })
}

/// Serialises a tensor as `.npy` (version 1.0) bytes.
pub fn to_bytes(t: &Tensor) -> Result<Vec<u8>> {
    let descr = dtype_descr(t.dtype())?;
    let shape = match t.shape.len() {
        0 => "()".to_string(),
        1 => format!("({},)", t.shape[0]),
        _ => format!("({})", t.shape.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    let total = 10 + header.len() + 1;
    header.push_str(&" ".repeat((64 - total % 64) % 64));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + t.len() * t.dtype().size_bytes());
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    match &t.data {
        TensorData::F32(v) => v.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        TensorData::F64(v) => v.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        TensorData::F16(v) => v.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        TensorData::BF16(_) => unreachable!("rejected above"),
        TensorData::I8(v) => out.extend(v.iter().map(|&x| x as u8)),
        TensorData::U8(v) => out.extend_from_slice(v),
        TensorData::I16(v) => v.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        TensorData::I32(v) => v.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        TensorData::I64(v) => v.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        TensorData::Bool(v) => out.extend(v.iter().map(|&x| x as u8)),
    }
    Ok(out)
}

/// Reads a `.npy` file.
pub fn read(path: &std::path::Path) -> Result<Tensor> {
    let bytes = std::fs::read(path).map_err(|source| Error::Io { path: path.display().to_string(), source })?;
    from_bytes(&bytes).map_err(|e| match e {
        Error::InvalidModel(m) => Error::InvalidModel(format!("{}: {m}", path.display())),
        other => other,
    })
}

/// Writes a `.npy` file atomically (temporary file in the same folder, then rename).
pub fn write(path: &std::path::Path, t: &Tensor) -> Result<()> {
    let bytes = to_bytes(t)?;
    let io = |source| Error::Io { path: path.display().to_string(), source };
    let tmp = path.with_extension(format!("npy.tmp{}", std::process::id()));
    std::fs::write(&tmp, &bytes).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io(e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_all_dtypes() {
        let ts = [
            Tensor::from_f32(vec![2, 3], vec![1.0, -2.5, 3.0, 4.0, 5.0, 6.0]),
            Tensor::from_i64(vec![3], vec![-1, 0, i64::MAX]),
            Tensor::new(vec![], TensorData::I8(vec![-7])).unwrap(),
            Tensor::new(vec![2, 0], TensorData::Bool(vec![])).unwrap(),
        ];
        for t in ts {
            let b = to_bytes(&t).unwrap();
            assert_eq!((10 + u16::from_le_bytes([b[8], b[9]]) as usize) % 64, 0, "header must be 64-byte aligned");
            assert_eq!(from_bytes(&b).unwrap(), t);
        }
    }

    #[test]
    fn reads_numpy_written_header() {
        // Header text exactly as numpy 1.x/2.x writes it for np.zeros((2,), np.float32).
        let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
        let mut h = header.to_string();
        h.push_str(&" ".repeat(128 - 10 - header.len() - 1));
        h.push('\n');
        let mut b = b"\x93NUMPY\x01\x00".to_vec();
        b.extend_from_slice(&(h.len() as u16).to_le_bytes());
        b.extend_from_slice(h.as_bytes());
        b.extend_from_slice(&[0; 8]);
        assert_eq!(from_bytes(&b).unwrap(), Tensor::from_f32(vec![2], vec![0.0, 0.0]));
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        let good = to_bytes(&Tensor::from_f32(vec![4], vec![1.0; 4])).unwrap();
        for cut in 0..good.len() {
            assert!(from_bytes(&good[..cut]).is_err(), "truncated at {cut} must fail");
        }
        assert!(from_bytes(b"random bytes that are not npy").is_err());
        let huge = String::from_utf8_lossy(&good).replace("(4,)", "(9999999999999999999,)").into_bytes();
        assert!(from_bytes(&huge).is_err());
    }
}
