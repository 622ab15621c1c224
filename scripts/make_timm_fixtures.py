#!/usr/bin/env python3
"""make_timm_fixtures.py - small timm models and their logits, for tests/test_timm.c and
tests/e2e_timm.c (which need neither torch nor timm).

Run from the repository root with pip's torch, timm and safetensors (scripts/timm_venv.sh
makes such a venv):

    VENV/bin/python scripts/make_timm_fixtures.py

Writes, for each fixture NAME of FIXTURES below, into tests/fixtures/timm/:
    NAME.safetensors      the model's state_dict exactly as safetensors.torch.save_file
                          writes it (what the hub publishes), in the fixture's dtype
                          (F32, BF16 or F16; the weights are rounded to that dtype before
                          the logits are computed, so the file holds the model exactly)
    NAME.ref.safetensors  input.images_S (3, 3, S, S) and output.logits_S (3, 5) for each
                          evaluated size S (timm, float32, eval mode; sizes other than the
                          training size through dynamic_img_size=True); __metadata__:
                          "timm" = {"model": "vit" | "eva", "kwargs": {...}} (the spec
                          scripts/timm_convert.py reads), "call" = the constructor as Python,
                          "config" = the vitrain config that loads NAME.safetensors directly
                          (absent when only timm_convert.py can read it: 'ij' indexing),
                          "timm_version".
The models are tiny (width 32, 2 heads -> head dim 16, depth 2, patch 4, 16 px -> 4 x 4 grid,
MLP ratio 2, 5 classes) with every parameter randomised, so each tensor matters.

Checks run here (printed; the script fails if one fails):
  - each conventions-sensitive choice matters: the same weights with rope_grid_indexing 'ij'
    or timm's default temperature give logits far from the fixture's;
  - vitrain -> timm: scripts/timm_convert.py to-timm on the vitrain PE fixtures
    (tests/fixtures/vit_pe_*.safetensors, vit_tiny*.safetensors: references computed from
    position-encodings.md in float64), loaded into the printed timm model, reproduces their
    logits; the kinds without a timm equivalent are refused.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import safetensors.torch
import timm
import torch
from timm.models.eva import Eva
from timm.models.vision_transformer import VisionTransformer

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OUT = os.path.join(ROOT, "tests", "fixtures", "timm")
CONVERT = os.path.join(ROOT, "scripts", "timm_convert.py")

COMMON = dict(img_size=16, patch_size=4, in_chans=3, num_classes=5, embed_dim=32, depth=2, num_heads=2,
              mlp_ratio=2.0, qkv_bias=True)
MODEL_CFG = {"width": 32, "depth": 2, "heads": 2, "mlp_ratio": 2, "patch_size": 4, "img_size": 16,
             "in_chans": 3, "num_classes": 5}
ROPE_EVA = dict(use_abs_pos_emb=False, use_rot_pos_emb=True, rope_grid_indexing="xy", dynamic_img_size=True)

# name, model, kwargs beyond COMMON, stored dtype, evaluated sizes, vitrain config (None:
# only through timm_convert.py)
FIXTURES = [
    ("vit_ape", "vit", dict(global_pool="token"), torch.float32, [16],
     {"model": dict(MODEL_CFG, pool="token"), "pe": {"kind": "ape"}}),
    ("vit_ape_avg_bf16", "vit", dict(global_pool="avg", init_values=0.1), torch.bfloat16, [16],
     {"model": dict(MODEL_CFG, pool="avg", layer_scale=0.1), "pe": {"kind": "ape"}}),
    ("eva_rope_axial", "eva", dict(ROPE_EVA, attn_type="eva", init_values=0.1, global_pool="token",
                                   rope_type="cat", rope_temperature=100.0), torch.float32, [16, 24],
     {"model": dict(MODEL_CFG, pool="token", layer_scale=0.1), "pe": {"kind": "rope_axial", "theta": 100}}),
    ("eva_rope_mixed_f16", "eva", dict(ROPE_EVA, attn_type="rope", init_values=0.1, global_pool="avg",
                                       rope_type="mixed", rope_temperature=10.0), torch.float16, [16, 24],
     {"model": dict(MODEL_CFG, pool="avg", layer_scale=0.1), "pe": {"kind": "rope_mixed", "share": "none"}}),
    ("eva_rope_mixed_ape", "eva", dict(ROPE_EVA, attn_type="rope", init_values=0.1, global_pool="token",
                                       rope_type="mixed", use_abs_pos_emb=True, no_embed_class=True,
                                       dynamic_img_size=False), torch.float32, [16],
     {"model": dict(MODEL_CFG, pool="token", layer_scale=0.1),
      "pe": {"kind": "rope_mixed", "ape": "learned", "share": "none"}}),
    # Eva's defaults: 'ij' indexing, temperature 1e4: readable only through timm_convert.py.
    ("eva_rope_axial_ij", "eva", dict(use_rot_pos_emb=True, use_abs_pos_emb=False, attn_type="rope",
                                      global_pool="avg", dynamic_img_size=True), torch.float32, [16, 24], None),
    ("eva_rope_mixed_ij", "eva", dict(use_rot_pos_emb=True, use_abs_pos_emb=False, attn_type="rope",
                                      global_pool="token", rope_type="mixed"), torch.float32, [16], None),
]


def build(model, kwargs):
    cls = Eva if model == "eva" else VisionTransformer
    return cls(**COMMON, **kwargs).eval()


def randomize(m, gen):
    """Every parameter random (the logits then depend on each), magnitudes that keep the
    activations O(1)."""
    with torch.no_grad():
        for name, p in m.named_parameters():
            n = torch.randn(p.shape, generator=gen)
            if name == "rope.freqs":
                p.mul_(1 + 0.1 * n)
            elif name.endswith(("norm1.weight", "norm2.weight", "norm.weight")):
                p.copy_(1 + 0.2 * n)
            elif "gamma" in name:
                p.copy_(0.5 + 0.2 * n)
            elif name.endswith("weight") and p.ndim >= 2:
                p.copy_(n * (1.0 / p[0].numel()) ** 0.5)
            else:
                p.copy_(0.2 * n)


def round_to(m, dtype):
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(p.to(dtype).float())


def call_str(model, kwargs):
    cls = "timm.models.eva.Eva" if model == "eva" else "timm.models.vision_transformer.VisionTransformer"
    return f"{cls}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())})"


def logits(m, x):
    with torch.no_grad():
        return m(x).float()


def make(name, model, kwargs, dtype, sizes, config, seed):
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    m = build(model, kwargs)
    randomize(m, gen)
    round_to(m, dtype)
    sd = {k: v.detach().to(dtype).contiguous() for k, v in m.state_dict().items()}
    safetensors.torch.save_file(sd, os.path.join(OUT, name + ".safetensors"))
    ref, meta = {}, {}
    for S in sizes:
        x = torch.randn((3, 3, S, S), generator=gen)
        ref[f"input.images_{S}"] = x
        ref[f"output.logits_{S}"] = logits(m, x)
    kw = dict(COMMON, **kwargs)
    meta["timm"] = json.dumps({"model": model, "kwargs": kw})
    meta["call"] = call_str(model, kw)
    meta["timm_version"] = timm.__version__
    if config is not None:
        meta["config"] = json.dumps(config)
    safetensors.torch.save_file(ref, os.path.join(OUT, name + ".ref.safetensors"), metadata=meta)
    # Conventions-sensitive choices: the same weights under the other choice.
    if model == "eva" and kwargs.get("use_rot_pos_emb"):
        x = ref[f"input.images_{sizes[0]}"]
        base = ref[f"output.logits_{sizes[0]}"]
        for key, other in (("rope_grid_indexing", "ij" if kwargs.get("rope_grid_indexing") == "xy" else "xy"),
                           ("rope_temperature", 10000.0 if kwargs.get("rope_temperature") else 100.0)):
            if key == "rope_temperature" and kwargs.get("rope_type") == "mixed":
                continue
            alt = build(model, dict(kwargs, **{key: other}))
            alt.load_state_dict(m.state_dict())
            d = (logits(alt, x) - base).abs().max().item()
            print(f"  {name}: {key}={other!r} instead moves the logits by {d:.3g}")
            assert d > 1e-2, f"{name}: {key} does not change the logits: the fixture cannot tell them apart"
    print(f"{name}: {len(sd)} tensors {str(dtype).split('.')[-1]}, sizes {sizes}; {meta['call']}")


# ------------------------------------------------------------------ vitrain -> timm

# The vitrain fixtures' configs hold only the keys that differ from the defaults; the
# converter reads resolved configs, so every key it reads is stated here.
RESOLVED_MODEL = {"qkv_bias": True, "attention": "softmax", "in_chans": 3, "layer_scale": 0}
RESOLVED_PE = {"ape": "none", "positions": "index", "share": "none", "theta": 0, "coord_dim": 2,
               "train_img_size": 0, "block_size": 0}
OURS = [  # fixture, pe keys the defaults resolve to, expected: None = converts, else error text
    ("vit_tiny", {"kind": "ape", "ape": "learned"}, None),
    ("vit_tiny_avg", {"kind": "ape", "ape": "learned"}, None),
    ("vit_pe_ape_sincos", {}, None),
    ("vit_pe_rope_axial", {"theta": 100}, None),
    ("vit_pe_rope_mixed", {"theta": 10}, None),
    ("vit_pe_rope_mixed_ape", {"theta": 10, "share": "none"}, None),
    ("vit_pe_liere_commute", {"block_size": 2}, None),
    ("vit_pe_rope_mixed_res", {"theta": 10}, "no reference grid"),
    ("vit_pe_cayley", {"theta": 10}, "no equivalent"),
    ("vit_pe_circulant", {"theta": 10}, "no equivalent"),
    ("vit_pe_liere", {}, "no equivalent"),
    ("vit_pe_cayley_rgbd", {"theta": 10}, "RGB-D"),
]


def check_to_timm():
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for name, pe_extra, expect_error in OURS:
            t = safetensors.torch.load_file(os.path.join(ROOT, "tests", "fixtures", name + ".safetensors"))
            with open(os.path.join(ROOT, "tests", "fixtures", name + ".safetensors"), "rb") as f:
                hl = int.from_bytes(f.read(8), "little")
                cfg = json.loads(json.loads(f.read(hl))["__metadata__"]["config"])
            cfg.setdefault("pe", {})
            cfg["model"] = dict(RESOLVED_MODEL, **cfg["model"])
            pe = dict(RESOLVED_PE, **pe_extra)
            pe.update(cfg["pe"])
            if pe["kind"] == "liere_commute":
                pe.setdefault("positions", "normalized")
            cfg["pe"] = pe
            weights = {k: v for k, v in t.items() if not k.startswith(("input.", "output.", "grad.", "train."))}
            src = os.path.join(tmp, name + ".in.safetensors")
            safetensors.torch.save_file(weights, src, metadata={"config": json.dumps(cfg)})
            dst, spec = os.path.join(tmp, name + ".timm.safetensors"), os.path.join(tmp, name + ".json")
            r = subprocess.run([sys.executable, CONVERT, "to-timm", src, dst, "--spec", spec],
                               capture_output=True, text=True)
            if expect_error:
                assert r.returncode == 1 and expect_error in r.stderr, (name, r.returncode, r.stderr)
                print(f"  to-timm {name}: refused ({r.stderr.strip()})")
                continue
            assert r.returncode == 0, (name, r.stderr)
            with open(spec) as f:
                s = json.load(f)
            kw = dict(s["kwargs"])
            x = t["input.images"]
            if x.shape[-1] != kw["img_size"]:
                kw["dynamic_img_size"] = True
            m = build_exact(s["model"], kw)
            m.load_state_dict(safetensors.torch.load_file(dst), strict=True)
            d = (logits(m, x) - t["output.logits"]).abs().max().item()
            scale = t["output.logits"].abs().max().item()
            worst = max(worst, d / scale)
            print(f"  to-timm {name}: max |timm - reference| {d:.3g} (max |logit| {scale:.3g})")
            assert d <= 1e-4 * max(scale, 1), f"{name}: timm disagrees with the reference by {d}"
    print(f"vitrain -> timm: worst relative logit difference {worst:.3g}")


def build_exact(model, kw):
    cls = Eva if model == "eva" else VisionTransformer
    return cls(**kw).eval()


def main():
    os.makedirs(OUT, exist_ok=True)
    for i, (name, model, kwargs, dtype, sizes, config) in enumerate(FIXTURES):
        make(name, model, kwargs, dtype, sizes, config, seed=1000 + i)
    check_to_timm()


if __name__ == "__main__":
    main()
