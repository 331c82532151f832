//! The taps of a 2-D window that fall inside the input, per output pixel: what the channel-lane depthwise
//! kernels ([`super::depthwise_lanes`], `int8::depthwise_nhwc`) loop over, so that a pixel by the border skips its
//! taps over the padding (their products are 0) and no tap tests bounds. Built once when a kernel is prepared.

/// The window geometry of one spatial plane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::runtime::kernels) struct Window2 {
    /// Input and output height and width.
    pub ih: usize,
    pub iw: usize,
    pub oh: usize,
    pub ow: usize,
    /// Kernel size, strides, dilations, begin pads: (height, width).
    pub k: (usize, usize),
    pub s: (usize, usize),
    pub d: (usize, usize),
    pub pad: (usize, usize),
}

/// Per output pixel (row-major), its taps inside the input: pixel `i`'s are `taps[ends[i - 1]..ends[i]]`, each
/// `(input pixel · stride, tap index · stride)` for data laid out `[pixel][stride]` and weights `[tap][stride]`.
#[derive(Clone, Debug, Default)]
pub(in crate::runtime::kernels) struct PixelTaps {
    pub taps: Vec<(usize, usize)>,
    pub ends: Vec<usize>,
}

impl PixelTaps {
    pub(in crate::runtime::kernels) fn new(w: &Window2, stride: usize) -> PixelTaps {
        let mut t = PixelTaps { taps: Vec::with_capacity(w.oh * w.ow * w.k.0 * w.k.1), ends: Vec::with_capacity(w.oh * w.ow) };
        for oy in 0..w.oh {
            for ox in 0..w.ow {
                for ky in 0..w.k.0 {
                    let iy = (oy * w.s.0 + ky * w.d.0) as isize - w.pad.0 as isize;
                    if iy < 0 || iy >= w.ih as isize {
                        continue;
                    }
                    for kx in 0..w.k.1 {
                        let ix = (ox * w.s.1 + kx * w.d.1) as isize - w.pad.1 as isize;
                        if ix >= 0 && ix < w.iw as isize {
                            t.taps.push(((iy as usize * w.iw + ix as usize) * stride, (ky * w.k.1 + kx) * stride));
                        }
                    }
                }
                t.ends.push(t.taps.len());
            }
        }
        t
    }
}
