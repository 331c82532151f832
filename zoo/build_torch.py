"""PyTorch architectures with seeded random weights → ONNX (`torch.onnx.export`), in the zoo's own venv.

Run by `.cache/zoo/venv-torch/bin/python` (torch, torchvision, onnx, onnxscript; transformers for the HF models);
`zoo/build.py` creates that venv and calls this. BatchNorm statistics come from one training-mode pass over the
calibration samples (momentum 1), as in build_keras.py. Detection models are exported as backbone + head at a fixed
size (their box decoding and NMS are host-side post-processing); segmentation models return their "out" map.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402

import common  # noqa: E402


def _det_head(ctor, **kw):
    """backbone + head of a torchvision detector: features → (box regression, class logits) per anchor."""
    import torch
    import torchvision.models.detection as D

    class Head(torch.nn.Module):
        def __init__(self):
            super().__init__()
            m = getattr(D, ctor)(weights=None, weights_backbone=None, **kw)
            self.backbone, self.head = m.backbone, m.head

        def forward(self, x):
            f = self.backbone(x)
            f = list(f.values()) if isinstance(f, dict) else [f]
            out = self.head(f)
            return tuple(out[k] for k in sorted(out))
    return Head


def _seg(ctor):
    import torch
    import torchvision.models.segmentation as S

    class Seg(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = getattr(S, ctor)(weights=None, weights_backbone=None, aux_loss=False)

        def forward(self, x):
            return self.m(x)["out"]
    return Seg


def _yolo():
    """A YOLOv8-style detector: Conv-BN-SiLU, C2f (channel Split + bottlenecks + Concat), SPPF, a PAN neck and a
    decoupled head (box and class branches per level), outputs concatenated as [1, 4 + classes, anchors]."""
    import torch
    from torch import nn

    class Conv(nn.Sequential):
        def __init__(self, i, o, k=1, s=1):
            super().__init__(nn.Conv2d(i, o, k, s, k // 2, bias=False), nn.BatchNorm2d(o), nn.SiLU())

    class Bottleneck(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.a, self.b = Conv(c, c, 3), Conv(c, c, 3)

        def forward(self, x):
            return x + self.b(self.a(x))

    class C2f(nn.Module):
        def __init__(self, i, o, n=1):
            super().__init__()
            self.c = o // 2
            self.cv1, self.cv2 = Conv(i, 2 * self.c), Conv((2 + n) * self.c, o)
            self.m = nn.ModuleList(Bottleneck(self.c) for _ in range(n))

        def forward(self, x):
            y = list(self.cv1(x).split((self.c, self.c), 1))
            for m in self.m:
                y.append(m(y[-1]))
            return self.cv2(torch.cat(y, 1))

    class SPPF(nn.Module):
        def __init__(self, i, o):
            super().__init__()
            self.cv1, self.cv2, self.m = Conv(i, i // 2), Conv(i * 2, o), nn.MaxPool2d(5, 1, 2)

        def forward(self, x):
            x = self.cv1(x)
            y1 = self.m(x)
            y2 = self.m(y1)
            return self.cv2(torch.cat([x, y1, y2, self.m(y2)], 1))

    class Yolo(nn.Module):
        def __init__(self, nc=20, w=(16, 32, 64, 128, 256)):
            super().__init__()
            self.nc = nc
            self.stem = nn.Sequential(Conv(3, w[0], 3, 2), Conv(w[0], w[1], 3, 2), C2f(w[1], w[1]))
            self.p3 = nn.Sequential(Conv(w[1], w[2], 3, 2), C2f(w[2], w[2], 2))
            self.p4 = nn.Sequential(Conv(w[2], w[3], 3, 2), C2f(w[3], w[3], 2))
            self.p5 = nn.Sequential(Conv(w[3], w[4], 3, 2), C2f(w[4], w[4]), SPPF(w[4], w[4]))
            self.up = nn.Upsample(scale_factor=2, mode="nearest")
            self.n4, self.n3 = C2f(w[4] + w[3], w[3]), C2f(w[3] + w[2], w[2])
            self.d3, self.m4 = Conv(w[2], w[2], 3, 2), C2f(w[2] + w[3], w[3])
            self.d4, self.m5 = Conv(w[3], w[3], 3, 2), C2f(w[3] + w[4], w[4])
            self.box = nn.ModuleList(nn.Sequential(Conv(c, 64, 3), Conv(64, 64, 3), nn.Conv2d(64, 64, 1))
                                     for c in (w[2], w[3], w[4]))
            self.cls = nn.ModuleList(nn.Sequential(Conv(c, 64, 3), Conv(64, 64, 3), nn.Conv2d(64, nc, 1))
                                     for c in (w[2], w[3], w[4]))
            self.proj = nn.Parameter(torch.arange(16, dtype=torch.float32), requires_grad=False)

        def forward(self, x):
            p3 = self.p3(self.stem(x))
            p4 = self.p4(p3)
            p5 = self.p5(p4)
            n4 = self.n4(torch.cat([self.up(p5), p4], 1))
            n3 = self.n3(torch.cat([self.up(n4), p3], 1))
            m4 = self.m4(torch.cat([self.d3(n3), n4], 1))
            m5 = self.m5(torch.cat([self.d4(m4), p5], 1))
            outs = []
            for f, b, c in zip((n3, m4, m5), self.box, self.cls):
                bb = b(f).flatten(2)  # [1, 64, A]: 4 sides × 16 bins (distribution focal loss)
                a = bb.shape[-1]
                dist = bb.view(bb.shape[0], 4, 16, a).softmax(2)
                side = (dist * self.proj.view(1, 1, 16, 1)).sum(2)  # [1, 4, A]
                outs.append(torch.cat([side, c(f).flatten(2).sigmoid()], 1))
            return torch.cat(outs, 2)
    return Yolo


def _hf(kind):
    """Small Hugging Face transformers built from configs (seeded random weights), traced with fixed shapes."""
    import torch
    import transformers as T

    class Wrap(torch.nn.Module):
        def __init__(self):
            super().__init__()
            if kind == "bert":
                self.m = T.BertModel(T.BertConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                                                  intermediate_size=512, vocab_size=1000))
            elif kind == "distilbert":
                self.m = T.DistilBertModel(T.DistilBertConfig(dim=128, n_layers=2, n_heads=4, hidden_dim=512,
                                                              vocab_size=1000))
            elif kind == "gpt2":
                self.m = T.GPT2Model(T.GPT2Config(n_embd=128, n_layer=2, n_head=4, vocab_size=1000, n_positions=64))
            elif kind == "vit":
                self.m = T.ViTModel(T.ViTConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                                                intermediate_size=512, image_size=64, patch_size=8))
            elif kind == "whisper_encoder":
                self.m = T.WhisperModel(T.WhisperConfig(
                    d_model=128, pad_token_id=0, bos_token_id=0, eos_token_id=1, decoder_start_token_id=0, encoder_layers=2, encoder_attention_heads=4,
                                                        decoder_layers=1, decoder_attention_heads=4,
                                                        encoder_ffn_dim=256, decoder_ffn_dim=256, num_mel_bins=80,
                                                        max_source_positions=100, vocab_size=1000)).encoder
            elif kind == "llama":
                self.m = T.LlamaModel(T.LlamaConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                                                    num_key_value_heads=2, intermediate_size=256, vocab_size=1000))
            elif kind == "qwen2":
                self.m = T.Qwen2Model(T.Qwen2Config(hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                                                    num_key_value_heads=2, intermediate_size=256, vocab_size=1000))

        def forward(self, x):
            if kind in ("vit",):
                return self.m(pixel_values=x).last_hidden_state
            if kind == "whisper_encoder":
                return self.m(input_features=x).last_hidden_state
            if kind in ("llama", "qwen2", "gpt2"):
                return self.m(input_ids=x, use_cache=False).last_hidden_state
            return self.m(input_ids=x).last_hidden_state
    return Wrap


def f32(shape, lo=-1.0, hi=1.0):
    return {"name": "x", "shape": shape, "dtype": "float32", "range": [lo, hi]}


def ids(shape):
    return {"name": "x", "shape": shape, "dtype": "int64", "range": [0, 1000]}


IMG = f32([1, 3, 128, 128])


def models():
    import torchvision.models as M
    tv = lambda c, **kw: (lambda: getattr(M, c)(weights=None, **kw))  # noqa: E731
    return {
        "tv_resnet18": (tv("resnet18"), IMG),
        "tv_resnet50": (tv("resnet50"), IMG),
        "tv_mobilenet_v2": (tv("mobilenet_v2"), IMG),
        "tv_mobilenet_v3_small": (tv("mobilenet_v3_small"), IMG),
        "tv_mobilenet_v3_large": (tv("mobilenet_v3_large"), IMG),
        "tv_efficientnet_b0": (tv("efficientnet_b0"), IMG),
        "tv_regnet_y_400mf": (tv("regnet_y_400mf"), IMG),
        "tv_convnext_tiny": (tv("convnext_tiny"), IMG),
        "tv_shufflenet_v2_x1_0": (tv("shufflenet_v2_x1_0"), IMG),
        "tv_squeezenet1_1": (tv("squeezenet1_1"), IMG),
        "tv_mnasnet1_0": (tv("mnasnet1_0"), IMG),
        "tv_densenet121": (tv("densenet121"), IMG),
        "tv_vit_b_16": (tv("vit_b_16", image_size=128), IMG),
        "tv_swin_t": (tv("swin_t"), IMG),
        "tv_ssdlite320_head": (_det_head("ssdlite320_mobilenet_v3_large"), f32([1, 3, 320, 320])),
        "tv_retinanet_head": (_det_head("retinanet_resnet50_fpn"), f32([1, 3, 256, 256])),
        "tv_fcos_head": (_det_head("fcos_resnet50_fpn"), f32([1, 3, 256, 256])),
        "tv_deeplabv3_mobilenet": (_seg("deeplabv3_mobilenet_v3_large"), IMG),
        "tv_fcn_resnet50": (_seg("fcn_resnet50"), IMG),
        "tv_lraspp_mobilenet": (_seg("lraspp_mobilenet_v3_large"), IMG),
        "yolo_c2f": (_yolo(), f32([1, 3, 256, 256], 0, 1)),
        "hf_bert": (_hf("bert"), ids([1, 32])),
        "hf_distilbert": (_hf("distilbert"), ids([1, 32])),
        "hf_gpt2": (_hf("gpt2"), ids([1, 32])),
        "hf_vit": (_hf("vit"), f32([1, 3, 64, 64])),
        "hf_whisper_encoder": (_hf("whisper_encoder"), f32([1, 80, 200])),
        "hf_llama": (_hf("llama"), ids([1, 32])),
        "hf_qwen2": (_hf("qwen2"), ids([1, 32])),
    }


def _init_batchnorm(model, cal):
    import torch
    bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    for m in bns:
        m.momentum = 1.0
    model.train()
    with torch.no_grad():
        model(cal)
    model.eval()


def export(model, x, path):
    import torch
    try:
        torch.onnx.export(model, (x,), path, opset_version=17, input_names=["x"], dynamo=False)
    except Exception:  # the TorchScript exporter refuses some models; the dynamo one is the default since 2.9
        torch.onnx.export(model, (x,), path, opset_version=18, input_names=["x"], dynamo=True,
                          external_data=False)


def build(name, ctor, spec):
    import torch
    d = common.model_dir(name)
    os.makedirs(d, exist_ok=True)
    torch.manual_seed(0)
    model = ctor()
    lo, hi = spec["range"]
    big = np.prod(spec["shape"]) > 100_000
    n = int(os.environ.get("ZOO_N_CAL_LARGE", "8")) if big else common.N_CAL
    cal = common.samples(spec["shape"], n, lo, hi, seed=1, dtype=spec["dtype"])
    x = common.samples(spec["shape"], 1, lo, hi, seed=2, dtype=spec["dtype"])
    model.eval()
    with torch.no_grad():  # zero-initialised layers (ViT's head) would make every output 0, and every check trivial
        for m in model.modules():
            if isinstance(m, (torch.nn.Linear, torch.nn.Conv2d)) and not m.weight.any():
                m.weight.normal_(0.0, 0.02)
    if spec["dtype"] == "float32":
        _init_batchnorm(model, torch.from_numpy(cal))
    with torch.no_grad():
        export(model, torch.from_numpy(x), os.path.join(d, "model.onnx"))
    np.save(os.path.join(d, "input_0.npy"), x)
    if spec["dtype"] == "float32":
        np.save(os.path.join(d, "cal.npy"), cal)
    common.mark_built(name, {"name": name, "source": "torchvision / transformers / zoo code, seeded random weights",
                             "format": "onnx", "family": "torch", "pretrained": False, "inputs": [spec]})


def main():
    import torch
    torch.set_num_threads(int(os.environ.get("ZOO_THREADS", "2")))
    ms = models()
    names = common.selected(list(ms))
    t0 = time.time()
    for i, name in enumerate(names, 1):
        if common.is_built(name):
            common.progress(i, len(names), name, "cached", t0)
            continue
        try:
            build(name, *ms[name])
            common.progress(i, len(names), name, "built", t0)
        except Exception as e:
            common.fail(name, e)


if __name__ == "__main__":
    main()
