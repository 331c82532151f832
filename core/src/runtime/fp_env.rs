//! The floating-point environment the CPU runtime computes in: subnormal numbers flushed to zero.
//!
//! Arithmetic on subnormal floats (below 1.2e-38 in f32) takes a microcode assist on Intel cores, tens to hundreds
//! of times the cost of a normal FMA. Activations decaying into that range are common (SiLU and sigmoid of large
//! negative values, exponentials in softmax): a YOLOv8-style detector fed `tpu-sdk bench`'s random inputs ran
//! 120 ms instead of 34 ms on a Sapphire Rapids core, its 3×3 convolutions at scalar speed. TensorFlow
//! (`ScopedFlushDenormal`) and LiteRT compute with them flushed; so does the CPU runtime: [`Session`] runs set
//! FTZ (results) and DAZ (operands) in MXCSR on x86-64 and FZ in FPCR on aarch64 for the calling thread, restored
//! afterwards, and the thread pools tpu-sdk makes (the CLI's, the Python package's) set them on their workers
//! with [`flush_denormals`] as the start handler. A library user running sessions inside a rayon pool of their
//! own can do the same. Results change only where a value would have been subnormal.
//!
//! [`Session`]: super::Session

/// Sets flush-to-zero on the calling thread for good (a thread pool's start handler).
pub fn flush_denormals() {
    imp::write(imp::read() | imp::FLUSH);
}

/// Flush-to-zero on the calling thread while it lives; the previous setting comes back when it is dropped.
#[derive(Debug)]
pub struct FlushDenormals {
    prev: imp::Word,
}

impl FlushDenormals {
    /// Sets flush-to-zero on this thread.
    #[allow(clippy::new_without_default)]
    pub fn new() -> FlushDenormals {
        let prev = imp::read();
        if prev & imp::FLUSH != imp::FLUSH {
            imp::write(prev | imp::FLUSH);
        }
        FlushDenormals { prev }
    }
}

impl Drop for FlushDenormals {
    fn drop(&mut self) {
        if self.prev & imp::FLUSH != imp::FLUSH {
            imp::write(self.prev);
        }
    }
}

/// Turns flush-to-zero on or off for the calling thread for good (a worker adopting its caller's setting).
pub(crate) fn set_flush(on: bool) {
    let w = imp::read();
    let v = if on { w | imp::FLUSH } else { w & !imp::FLUSH };
    if v != w {
        imp::write(v);
    }
}

/// Whether flush-to-zero is on for the calling thread (false where the architecture has no such control here).
pub fn denormals_flushed() -> bool {
    imp::FLUSH != 0 && imp::read() & imp::FLUSH == imp::FLUSH
}

// The control registers are read and written with inline assembly (`stmxcsr`/`ldmxcsr`, `mrs`/`msr fpcr`), as
// Rust's documentation of the deprecated `_mm_setcsr` advises. Safety: each instruction reads or writes only the
// calling thread's floating-point control register (and, for MXCSR, the 4-byte word its operand points to, a
// live local); the bits changed are the denormal controls, which make no operation trap or change its rounding.
#[cfg(target_arch = "x86_64")]
mod imp {
    pub type Word = u32;
    /// MXCSR: FTZ (bit 15) and DAZ (bit 6).
    pub const FLUSH: Word = (1 << 15) | (1 << 6);

    pub fn read() -> Word {
        let mut v: Word = 0;
        // SAFETY: see the comment above the module; `v` is a live, aligned local.
        unsafe { std::arch::asm!("stmxcsr [{}]", in(reg) &mut v as *mut Word, options(nostack, preserves_flags)) };
        v
    }

    pub fn write(v: Word) {
        // SAFETY: see the comment above the module; `v` is a live, aligned local.
        unsafe { std::arch::asm!("ldmxcsr [{}]", in(reg) &v as *const Word, options(nostack, preserves_flags, readonly)) };
    }
}

#[cfg(target_arch = "aarch64")]
mod imp {
    pub type Word = u64;
    /// FPCR: FZ (bit 24).
    pub const FLUSH: Word = 1 << 24;

    pub fn read() -> Word {
        let v: Word;
        // SAFETY: see the comment above the module.
        unsafe { std::arch::asm!("mrs {}, fpcr", out(reg) v, options(nomem, nostack, preserves_flags)) };
        v
    }

    pub fn write(v: Word) {
        // SAFETY: see the comment above the module.
        unsafe { std::arch::asm!("msr fpcr, {}", in(reg) v, options(nomem, nostack, preserves_flags)) };
    }
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
mod imp {
    pub type Word = u32;
    pub const FLUSH: Word = 0;
    pub fn read() -> Word {
        0
    }
    pub fn write(_: Word) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subnormal_results_are_flushed_inside_the_guard_and_not_after() {
        let tiny = std::hint::black_box(1.0e-30f32);
        let before = denormals_flushed();
        {
            let _g = FlushDenormals::new();
            if imp::FLUSH != 0 {
                assert!(denormals_flushed());
                // 1e-30 · 1e-10 = 1e-40 is subnormal in f32: flushed to zero
                assert_eq!(std::hint::black_box(tiny) * std::hint::black_box(1.0e-10f32), 0.0);
            }
        }
        assert_eq!(denormals_flushed(), before, "the guard restores the thread's setting");
        if !before {
            assert!(std::hint::black_box(tiny) * std::hint::black_box(1.0e-10f32) > 0.0, "gradual underflow again");
        }
    }
}
