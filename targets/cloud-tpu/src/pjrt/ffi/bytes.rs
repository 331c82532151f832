//! Byte views of host data: the element types whose bytes may be handed to the plugin as they are.

/// Element types whose values are plain bytes: every bit pattern is a valid value and there is no padding.
///
/// # Safety
/// Implementors must be `Copy` types without padding for which every bit pattern is valid.
pub(crate) unsafe trait Plain: Copy {}
// SAFETY: primitive integers and IEEE floats: no padding, all bit patterns valid.
unsafe impl Plain for u8 {}
// SAFETY: as above.
unsafe impl Plain for i8 {}
// SAFETY: as above.
unsafe impl Plain for i16 {}
// SAFETY: as above.
unsafe impl Plain for i32 {}
// SAFETY: as above.
unsafe impl Plain for i64 {}
// SAFETY: as above.
unsafe impl Plain for f32 {}
// SAFETY: as above.
unsafe impl Plain for f64 {}
// SAFETY: `half::f16` is `repr(transparent)` over `u16`.
unsafe impl Plain for half::f16 {}
// SAFETY: `half::bf16` is `repr(transparent)` over `u16`.
unsafe impl Plain for half::bf16 {}

/// The bytes of `v`.
pub(crate) fn bytes_of<T: Plain>(v: &[T]) -> &[u8] {
    // SAFETY: `T: Plain` has no padding, so all `size_of_val(v)` bytes are initialised; u8 has alignment 1.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

/// The bytes of `v`, writable.
pub(crate) fn bytes_of_mut<T: Plain>(v: &mut [T]) -> &mut [u8] {
    // SAFETY: as in `bytes_of`, and any bytes written form valid `T`s because every bit pattern is valid.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

/// The bytes of a bool slice (Rust `bool` is one byte, 0 or 1, like PJRT's PRED).
pub(crate) fn bytes_of_bools(v: &[bool]) -> &[u8] {
    // SAFETY: `bool` is one initialised byte with value 0 or 1; reading it as `u8` is always valid.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), v.len()) }
}
