"""Real photographs as calibration samples for the pretrained image models.

Uniform noise is a poor stand-in for what a pretrained detector or segmenter sees: a text detector answers noise with
an all-zero map, a selfie segmenter with no person, so the int8 error measured on noise says little. scikit-image's
wheel ships a handful of public-domain photographs (people, a cat, a rocket, motorcycles, printed and scene text,
...); `samples` cuts seeded random crops of them, resized to the model's input and scaled the way the model expects.
Only the wheel is fetched (`pip download --no-deps`), and only the image files are read from it.
"""
import io
import os
import zipfile

import numpy as np

import common

SKIMAGE = "scikit-image==0.26.0"
# colour photographs first, then greyscale ones (replicated to three channels when the model wants colour)
FILES = ["astronaut.png", "chelsea.png", "coffee.png", "rocket.jpg", "motorcycle_left.png", "motorcycle_right.png",
         "ihc.png", "retina.jpg", "hubble_deep_field.jpg", "page.png", "text.png", "camera.png", "coins.png",
         "brick.png", "gravel.png", "clock_motion.png"]
TAG = f"photos from {SKIMAGE} (seeded random crops)"
IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], np.float32)


def _photos():
    from PIL import Image
    import build_wheels
    whl = build_wheels.fetch_wheel(SKIMAGE)
    out = []
    with zipfile.ZipFile(whl) as z:
        for f in FILES:
            im = Image.open(io.BytesIO(z.read("skimage/data/" + f)))
            out.append(im.convert("RGB"))
    return out


def image_layout(shape):
    """("nhwc" | "nchw", height, width, channels) for a batch-1 image input, None for anything else."""
    if len(shape) != 4:
        return None
    if shape[3] in (1, 3) and shape[1] > 8 and shape[2] > 8:
        return "nhwc", shape[1], shape[2], shape[3]
    if shape[1] in (1, 3) and shape[2] > 8 and shape[3] > 8:
        return "nchw", shape[2], shape[3], shape[1]
    return None


def samples(shape, n, lo, hi, seed, norm=None):
    """`n` crops (batch axis first) for an input of `shape`: pixel values in [0, 1] mapped linearly onto [lo, hi], or
    ImageNet's mean/std normalisation when `norm` is "imagenet"."""
    from PIL import Image
    layout, h, w, c = image_layout(shape)
    rng = np.random.default_rng(seed)
    photos = _photos()
    out = np.empty((n, h, w, c), np.float32)
    for i in range(n):
        im = photos[i % len(photos)]
        W, H = im.size
        # a crop of 40-100% of the shorter side, with the model's aspect ratio, anywhere in the photo
        side = rng.uniform(0.4, 1.0)
        ch = int(min(H, W * h / w) * side)
        cw = max(1, int(ch * w / h))
        ch = max(1, min(ch, H))
        cw = min(cw, W)
        y0 = int(rng.integers(0, H - ch + 1))
        x0 = int(rng.integers(0, W - cw + 1))
        crop = im.crop((x0, y0, x0 + cw, y0 + ch)).resize((w, h), Image.BILINEAR)
        if rng.random() < 0.5:
            crop = crop.transpose(Image.FLIP_LEFT_RIGHT)
        x = np.asarray(crop, np.float32) / 255.0
        if c == 1:
            x = x.mean(axis=2, keepdims=True)
        if norm == "imagenet":
            x = (x - IMAGENET_MEAN[:c]) / IMAGENET_STD[:c]
        else:
            x = lo + x * (hi - lo)
        out[i] = x
    if layout == "nchw":
        out = out.transpose(0, 3, 1, 2)
    return np.ascontiguousarray(out)


def calibration(spec, n, seed):
    """Photographs for an image input, None when `spec` is not one (the caller keeps seeded noise)."""
    if spec.get("dtype", "float32") != "float32" or image_layout([1] + list(spec["shape"][1:])) is None:
        return None
    lo, hi = spec["range"]
    return samples(spec["shape"], n, lo, hi, seed, spec.get("norm"))


if __name__ == "__main__":
    # a quick look: python zoo/photos.py OUT.png writes a strip of 8 crops at 128x128
    import sys
    from PIL import Image
    x = samples([1, 128, 128, 3], 8, 0.0, 1.0, seed=common.N_CAL)
    Image.fromarray((np.concatenate(list(x), axis=1) * 255).astype(np.uint8)).save(sys.argv[1])
