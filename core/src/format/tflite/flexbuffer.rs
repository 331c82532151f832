//! A reader for the FlexBuffers map that custom TFLite operators carry as custom options (MediaPipe's
//! converter writes them with `flexbuffers::Builder`): the root map's entries whose values are scalars or
//! vectors of numbers. Every read is bounds-checked; malformed bytes are an error, never a panic.
//!
//! The format (flatbuffers' `flexbuffers.h`): the last byte is the root's byte width, the byte before it the
//! root's packed type (`type << 2 | log2(bit width)`), and before that the root value. Values that are not
//! inline scalars are unsigned offsets back from where they are stored. A vector stores its length in the
//! `width` bytes before its first element; an untyped vector (and a map, which is one) follows its elements
//! with one packed type byte per element; a map also stores, before its length, the offset and byte width of
//! its (sorted) keys vector, whose elements are offsets to NUL-terminated strings.

/// A value of the map (what custom options hold).
#[derive(Clone, Debug, PartialEq)]
pub enum FlexValue {
    Null,
    Int(i64),
    UInt(u64),
    Float(f64),
    Bool(bool),
    String(String),
    /// A vector whose elements are all numbers (typed, or untyped with number elements).
    Numbers(Vec<f64>),
    /// Anything else (a nested map, a blob): its FlexBuffers type code.
    Other(u8),
}

impl FlexValue {
    /// The value as an integer, if it is one (or a float holding an integer).
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            FlexValue::Int(v) => Some(v),
            FlexValue::UInt(v) => i64::try_from(v).ok(),
            FlexValue::Bool(b) => Some(b as i64),
            FlexValue::Float(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Some(f as i64),
            _ => None,
        }
    }

    /// The value as a number.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            FlexValue::Int(v) => Some(v as f64),
            FlexValue::UInt(v) => Some(v as f64),
            FlexValue::Float(f) => Some(f),
            FlexValue::Bool(b) => Some(b as i64 as f64),
            _ => None,
        }
    }

    /// The value as a vector of integers.
    pub fn as_i64s(&self) -> Option<Vec<i64>> {
        match self {
            FlexValue::Numbers(v) => v.iter().map(|&f| (f.fract() == 0.0 && f.abs() < 9.0e15).then_some(f as i64)).collect(),
            _ => None,
        }
    }
}

// FlexBuffers type codes
const NULL: u8 = 0;
const INT: u8 = 1;
const UINT: u8 = 2;
const FLOAT: u8 = 3;
const KEY: u8 = 4;
const STRING: u8 = 5;
const INDIRECT_INT: u8 = 6;
const INDIRECT_UINT: u8 = 7;
const INDIRECT_FLOAT: u8 = 8;
const MAP: u8 = 9;
const VECTOR: u8 = 10;
const VECTOR_INT: u8 = 11;
const VECTOR_UINT: u8 = 12;
const VECTOR_FLOAT: u8 = 13;
const VECTOR_BOOL: u8 = 36;
const BOOL: u8 = 26;

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn bytes(&self, at: usize, width: usize) -> Result<&[u8], String> {
        at.checked_add(width)
            .and_then(|end| self.0.get(at..end))
            .ok_or_else(|| format!("reads {width} bytes at offset {at}, past the end of the {} bytes", self.0.len()))
    }
    fn uint(&self, at: usize, width: usize) -> Result<u64, String> {
        let b = self.bytes(at, width)?;
        Ok(match width {
            1 => b[0] as u64,
            2 => u16::from_le_bytes([b[0], b[1]]) as u64,
            4 => u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as u64,
            8 => u64::from_le_bytes(b.try_into().expect("8 bytes")),
            w => return Err(format!("byte width {w}")),
        })
    }
    fn int(&self, at: usize, width: usize) -> Result<i64, String> {
        let u = self.uint(at, width)?;
        let shift = 64 - 8 * width as u32;
        Ok(((u << shift) as i64) >> shift)
    }
    fn float(&self, at: usize, width: usize) -> Result<f64, String> {
        let u = self.uint(at, width)?;
        match width {
            4 => Ok(f32::from_bits(u as u32) as f64),
            8 => Ok(f64::from_bits(u)),
            w => Err(format!("a float of {w} bytes")),
        }
    }
    /// The position an offset stored at `at` (`width` bytes) points back to.
    fn target(&self, at: usize, width: usize) -> Result<usize, String> {
        let off = self.uint(at, width)?;
        usize::try_from(off).ok().and_then(|o| at.checked_sub(o)).ok_or_else(|| format!("offset {off} at {at} points before the buffer"))
    }
    /// The length of the vector at `p` with element width `width`, checked against the buffer.
    fn len(&self, p: usize, width: usize, per_element: usize) -> Result<usize, String> {
        let at = p.checked_sub(width).ok_or("a vector length before the buffer")?;
        let n = self.uint(at, width)?;
        let n = usize::try_from(n).ok().filter(|&n| n.checked_mul(per_element).is_some_and(|b| b <= self.0.len())).ok_or_else(|| format!("vector length {n} exceeds the buffer"))?;
        Ok(n)
    }
    fn cstr(&self, at: usize) -> Result<String, String> {
        let rest = self.0.get(at..).ok_or("a string past the end")?;
        let end = rest.iter().position(|&b| b == 0).ok_or("an unterminated key")?;
        String::from_utf8(rest[..end].to_vec()).map_err(|_| "a key that is not UTF-8".to_string())
    }

    /// The value of packed type `packed` stored at `at` in a parent of byte width `width`.
    fn value(&self, at: usize, width: usize, packed: u8) -> Result<FlexValue, String> {
        let ty = packed >> 2;
        let child = 1usize << (packed & 3);
        Ok(match ty {
            NULL => FlexValue::Null,
            INT => FlexValue::Int(self.int(at, width)?),
            UINT => FlexValue::UInt(self.uint(at, width)?),
            FLOAT => FlexValue::Float(self.float(at, width)?),
            BOOL => FlexValue::Bool(self.uint(at, width)? != 0),
            INDIRECT_INT => FlexValue::Int(self.int(self.target(at, width)?, child)?),
            INDIRECT_UINT => FlexValue::UInt(self.uint(self.target(at, width)?, child)?),
            INDIRECT_FLOAT => FlexValue::Float(self.float(self.target(at, width)?, child)?),
            STRING => {
                let p = self.target(at, width)?;
                let n = self.len(p, child, 1)?;
                FlexValue::String(String::from_utf8_lossy(self.bytes(p, n)?).into_owned())
            }
            VECTOR_INT | VECTOR_UINT | VECTOR_FLOAT | VECTOR_BOOL => {
                let p = self.target(at, width)?;
                let n = self.len(p, child, child)?;
                let mut v = Vec::with_capacity(n);
                for i in 0..n {
                    let e = p + i * child;
                    v.push(match ty {
                        VECTOR_INT => self.int(e, child)? as f64,
                        VECTOR_FLOAT => self.float(e, child)?,
                        _ => self.uint(e, child)? as f64,
                    });
                }
                FlexValue::Numbers(v)
            }
            VECTOR => {
                let p = self.target(at, width)?;
                let n = self.len(p, child, child + 1)?;
                let mut v = Vec::with_capacity(n);
                for i in 0..n {
                    let t = self.uint(p + n * child + i, 1)? as u8;
                    // inline numbers only (no recursion into nested values)
                    if !matches!(t >> 2, INT | UINT | FLOAT | BOOL) {
                        return Ok(FlexValue::Other(VECTOR));
                    }
                    v.push(self.value(p + i * child, child, t)?.as_f64().expect("a number"));
                }
                FlexValue::Numbers(v)
            }
            other => FlexValue::Other(other),
        })
    }
}

/// The entries of the FlexBuffers map `bytes` holds at its root, in key order.
pub fn read_map(bytes: &[u8]) -> Result<Vec<(String, FlexValue)>, String> {
    let r = Reader(bytes);
    if bytes.len() < 3 {
        return Err(format!("{} bytes are too short for a FlexBuffers root", bytes.len()));
    }
    let root_width = bytes[bytes.len() - 1] as usize;
    let packed = bytes[bytes.len() - 2];
    if !matches!(root_width, 1 | 2 | 4 | 8) {
        return Err(format!("root byte width {root_width}"));
    }
    let at = (bytes.len() - 2).checked_sub(root_width).ok_or("the root value is cut off")?;
    if packed >> 2 != MAP {
        return Err(format!("the root is of FlexBuffers type {}, not a map", packed >> 2));
    }
    let width = 1usize << (packed & 3);
    let p = r.target(at, root_width)?;
    let n = r.len(p, width, width + 1)?;
    let meta = p.checked_sub(3 * width).ok_or("a map header before the buffer")?;
    let keys = r.target(meta, width)?;
    let key_width = r.uint(meta + width, width)? as usize;
    if !matches!(key_width, 1 | 2 | 4 | 8) {
        return Err(format!("keys byte width {key_width}"));
    }
    if r.len(keys, key_width, key_width)? != n {
        return Err("the map has different numbers of keys and values".into());
    }
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let key = r.cstr(r.target(keys + i * key_width, key_width)?)?;
        let t = r.uint(p + n * width + i, 1)? as u8;
        if t >> 2 == KEY {
            return Err(format!("the value of '{key}' is a key"));
        }
        out.push((key, r.value(p + i * width, width, t)?));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `{"a": 3, "b": 1.5f32, "c": [1, -2] (int16)}` as flexbuffers' builder writes it.
    fn sample() -> Vec<u8> {
        let mut b = Vec::new();
        // keys
        b.extend(b"a\0b\0c\0"); // 0..6
        // typed int16 vector [1, -2]: length (2 bytes) then elements
        b.extend(2u16.to_le_bytes()); // 6..8
        let vec_at = b.len(); // 8
        b.extend(1i16.to_le_bytes());
        b.extend((-2i16).to_le_bytes()); // ..12
        // keys vector (width 1): length then offsets to the strings
        b.push(3); // 12
        let keys_at = b.len(); // 13
        for (i, k) in [0usize, 2, 4].iter().enumerate() {
            b.push((keys_at + i - k) as u8);
        }
        // map (width 4): keys offset, keys width, length, values, types
        let meta = b.len(); // 16
        b.extend(((meta - keys_at) as u32).to_le_bytes());
        b.extend(1u32.to_le_bytes());
        b.extend(3u32.to_le_bytes());
        let map_at = b.len();
        b.extend(3i32.to_le_bytes());
        b.extend(1.5f32.to_bits().to_le_bytes());
        b.extend(((map_at + 8 - vec_at) as u32).to_le_bytes());
        b.extend([INT << 2 | 2, FLOAT << 2 | 2, VECTOR_INT << 2 | 1]);
        let root_at = b.len();
        b.push((root_at - map_at) as u8);
        b.push(MAP << 2 | 2);
        b.push(1);
        b
    }

    #[test]
    fn reads_a_map_of_scalars_and_a_typed_vector() {
        let m = read_map(&sample()).unwrap();
        assert_eq!(m, vec![("a".into(), FlexValue::Int(3)), ("b".into(), FlexValue::Float(1.5)), ("c".into(), FlexValue::Numbers(vec![1.0, -2.0]))]);
        assert_eq!(m[2].1.as_i64s(), Some(vec![1, -2]));
    }

    #[test]
    fn truncated_or_garbled_bytes_are_errors() {
        let s = sample();
        for cut in 0..s.len() {
            let _ = read_map(&s[cut..]); // never panics
            let _ = read_map(&s[..cut]);
        }
        for i in 0..s.len() {
            for x in [0u8, 1, 0x7f, 0xff] {
                let mut t = s.clone();
                t[i] = x;
                let _ = read_map(&t);
            }
        }
        assert!(read_map(&[]).is_err());
        assert!(read_map(&[1, 2, 4]).is_err());
    }
}
