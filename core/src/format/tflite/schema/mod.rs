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

use flatbuffers::{Follow, InvalidFlatbuffer, Table, Vector, Verifiable, Verifier, VerifierOptions};

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

mod enums;
mod model;
mod options;

pub use enums::{activation, builtin_operator, builtin_options, dimension_type, padding, sparse_index_vector, tensor_type};
pub use model::*;
pub use options::*;

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
