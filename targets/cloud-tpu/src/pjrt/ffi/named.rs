//! Strings and `PJRT_NamedValue`s across the boundary: copies of plugin-owned strings and named values, and
//! named values laid out for the C API.

use super::*;

/// Copies a (pointer, length) string owned by the plugin.
///
/// # Safety
/// `p` must be null or point to `n` readable bytes.
pub(super) unsafe fn copy_str(p: *const c_char, n: usize) -> String {
    if p.is_null() || n == 0 {
        return String::new();
    }
    // SAFETY: guaranteed by the caller.
    String::from_utf8_lossy(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), n) }).into_owned()
}

/// A copied `PJRT_NamedValue`.
#[derive(Clone, Debug, PartialEq)]
pub enum NamedValue {
    /// A string.
    String(String),
    /// An integer.
    Int64(i64),
    /// A list of integers.
    Int64List(Vec<i64>),
    /// A float.
    Float(f32),
    /// A boolean.
    Bool(bool),
}

/// Copies `n` named values.
///
/// # Safety
/// `p` must be null or point to `n` valid `PJRT_NamedValue`s whose strings and arrays are readable.
pub(super) unsafe fn read_named_values(p: *const PJRT_NamedValue, n: usize) -> Vec<(String, NamedValue)> {
    if p.is_null() {
        return Vec::new();
    }
    // SAFETY: guaranteed by the caller.
    let items = unsafe { std::slice::from_raw_parts(p, n) };
    items
        .iter()
        .map(|nv| {
            // SAFETY: per the caller's guarantee, the name and the union member selected by `type_` are valid.
            unsafe {
                let name = copy_str(nv.name, nv.name_size);
                let value = match nv.type_ {
                    NAMED_STRING => NamedValue::String(copy_str(nv.value.string_value, nv.value_size)),
                    NAMED_INT64 => NamedValue::Int64(nv.value.int64_value),
                    NAMED_INT64_LIST => {
                        let a = nv.value.int64_array_value;
                        NamedValue::Int64List(if a.is_null() {
                            Vec::new()
                        } else {
                            std::slice::from_raw_parts(a, nv.value_size).to_vec()
                        })
                    }
                    NAMED_FLOAT => NamedValue::Float(nv.value.float_value),
                    NAMED_BOOL => NamedValue::Bool(ptr::addr_of!(nv.value).cast::<u8>().read() != 0),
                    other => NamedValue::String(format!("<unknown PJRT_NamedValue type {other}>")),
                };
                (name, value)
            }
        })
        .collect()
}

/// Named values laid out for the C API; keeps the strings and arrays they point to alive.
pub(crate) struct NamedValues {
    pub(super) raw: Vec<PJRT_NamedValue>,
    pub(super) _names: Vec<Vec<u8>>,
    pub(super) _strings: Vec<Vec<u8>>,
    pub(super) _lists: Vec<Vec<i64>>,
}

/// Moves `v` into `store` and returns its (pointer, length): the heap block of `v` does not move when `store`
/// grows, so the pointer stays valid as long as `store` lives.
fn keep<T>(store: &mut Vec<Vec<T>>, v: Vec<T>) -> (*const T, usize) {
    let r = (v.as_ptr(), v.len());
    store.push(v);
    r
}

impl NamedValues {
    pub(crate) fn new(items: &[(String, NamedValue)]) -> NamedValues {
        let mut names = Vec::new();
        let mut strings = Vec::new();
        let mut lists = Vec::new();
        let mut raw = Vec::new();
        for (name, value) in items {
            let mut nv = PJRT_NamedValue::new();
            let (p, n) = keep(&mut names, name.as_bytes().to_vec());
            (nv.name, nv.name_size) = (p.cast(), n);
            nv.value_size = 1;
            match value {
                NamedValue::String(s) => {
                    let (p, n) = keep(&mut strings, s.as_bytes().to_vec());
                    (nv.type_, nv.value.string_value, nv.value_size) = (NAMED_STRING, p.cast(), n);
                }
                NamedValue::Int64(i) => (nv.type_, nv.value.int64_value) = (NAMED_INT64, *i),
                NamedValue::Int64List(l) => {
                    let (p, n) = keep(&mut lists, l.clone());
                    (nv.type_, nv.value.int64_array_value, nv.value_size) = (NAMED_INT64_LIST, p, n);
                }
                NamedValue::Float(f) => (nv.type_, nv.value.float_value) = (NAMED_FLOAT, *f),
                NamedValue::Bool(b) => (nv.type_, nv.value.bool_value) = (NAMED_BOOL, *b),
            }
            raw.push(nv);
        }
        // The Vec<u8>/Vec<i64> heap blocks do not move when the outer vectors grow, so the pointers stay valid.
        NamedValues { raw, _names: names, _strings: strings, _lists: lists }
    }
    pub(super) fn ptr(&self) -> *const PJRT_NamedValue {
        if self.raw.is_empty() {
            ptr::null()
        } else {
            self.raw.as_ptr()
        }
    }
}
