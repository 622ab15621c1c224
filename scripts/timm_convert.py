#!/usr/bin/env python3
"""timm_convert.py - vitrain checkpoints <-> timm state dicts (safetensors), exactly.

Needs only numpy (Debian: python3-numpy); safetensors files are read and written here
(8-byte little-endian header length, JSON header, raw little-endian data).

    timm_convert.py to-timm IN.safetensors OUT.safetensors [--spec SPEC.json]
        IN: a vitrain checkpoint (its __metadata__["config"] is the resolved config).
        Writes timm's tensor names and layouts (float32) and prints the exact timm
        constructor, a Python snippet that builds the model and loads OUT strictly.
        SPEC.json (optional) receives {"model": "vit" | "eva", "kwargs": {...}}.
    timm_convert.py from-timm IN.safetensors OUT.safetensors (--spec SPEC.json |
                    --model NAME|vit|eva [--kwargs JSON])
        IN: a timm state dict (F32, BF16 or F16) of the model that timm's
        VisionTransformer (vit) or Eva (eva) builds from kwargs; arguments left out take
        timm's defaults, as timm would. NAME is a timm model name (vit_tiny_patch16_224,
        vit_base_patch16_rope_mixed_ape_224, ...; `timm_convert.py names` lists them):
        the arguments that name stands for in timm, with --kwargs on top (e.g. the
        num_classes or img_size a fine-tuned file was made with). Shapes (width, depth,
        patch, classes, MLP ratio, layer scale, pooling, grid) come from the tensors and
        must agree with kwargs; the head count is not in them (but for RoPE-Mixed), so
        with vit or eva num_heads must be given.
    timm_convert.py names
        The timm model names from-timm reads.
        Writes a float32 vitrain checkpoint with the vitrain config of that model in
        __metadata__["config"], so `vitrain eval --checkpoint OUT` needs no config.

What maps (position-encodings.md is vitrain's contract; timm 1.0):
  pe.kind ape (learned)      VisionTransformer, pos_embed (1, 1 + N, D) as is
  pe.kind ape (sincos)       VisionTransformer with the fixed table written as its
                             pos_embed (equal at img_size; timm resamples the table at
                             other sizes and trains it unless frozen)
  pe.kind none               VisionTransformer(pos_embed='none')
  rope_axial                 Eva(attn_type='rope', rope_type='cat', rope_temperature=theta,
                             rope_grid_indexing='xy'); positions interpolate: plus
                             ref_feat_shape = the training grid; positions normalized:
                             as rope_type='mixed' with the fixed frequencies scaled
  rope_mixed, liere_commute  Eva(attn_type='rope', rope_type='mixed',
                             rope_grid_indexing='xy') with rope.freqs (2, L, H, hd/2) =
                             pe.freqs (L', H', hd/2, 2) permuted, every share expanded;
                             liere_commute's generators U give f = -U[0, 1] per 2 x 2 block;
                             positions normalized folds 1 / max(n_train - 1, 1) into f;
                             positions interpolate has no timm equivalent (error)
  + pe.ape learned/sincos    Eva(use_abs_pos_emb=True), pos_embed with its class-token row
  model.layer_scale > 0      init_values (vit: ls1/ls2.gamma; eva: gamma_1/gamma_2)
  model.pool token | avg     global_pool='token' | 'avg' (avg: fc_norm)
Cayley-STRING, Circulant-STRING, dense LieRE, Performer attention, coord_dim != 2 and
RGB-D have no timm equivalent: an error. Back from timm, Eva's attn_type='eva' q_bias /
v_bias (k bias 0) become qkv.bias, gamma_1/gamma_2 ls1/ls2.gamma, a pos_embed without
class-token row (no_embed_class=True) gets a zero row (the same model), and
rope_grid_indexing='ij' (Eva's default) is read exactly by swapping the axes (the x and y
frequency rows for 'mixed'; the x and y pair blocks of every head's q and k rows for 'cat').
"""
import argparse
import difflib
import json
import math
import struct
import sys

try:
    import numpy as np
except ImportError:
    sys.exit("timm_convert: error: needs numpy (Debian: sudo apt-get install python3-numpy, then "
             "run /usr/bin/python3 scripts/timm_convert.py; or pip install numpy)")

# ------------------------------------------------------------------ safetensors I/O

DTYPES = {"F32": (np.dtype("<f4"), 4), "F16": (np.dtype("<f2"), 2), "BF16": (np.dtype("<u2"), 2)}


class ConvertError(Exception):
    pass


def read_safetensors(path):
    """(ordered dict name -> float32 array, metadata dict)."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ConvertError(f"{path}: {len(raw)} bytes, not a safetensors file")
    (hlen,) = struct.unpack("<Q", raw[:8])
    if hlen > len(raw) - 8:
        raise ConvertError(f"{path}: header length {hlen} exceeds the file")
    try:
        header = json.loads(raw[8:8 + hlen])
    except ValueError as e:
        raise ConvertError(f"{path}: header is not JSON: {e}")
    data = memoryview(raw)[8 + hlen:]
    meta = header.pop("__metadata__", {}) or {}
    tensors = {}
    for name, e in header.items():
        dt = e.get("dtype")
        if dt not in DTYPES:
            raise ConvertError(f"{path}: tensor '{name}' has dtype {dt}; supported: F32, BF16, F16")
        np_dt, size = DTYPES[dt]
        b, end = e["data_offsets"]
        shape = tuple(e["shape"])
        n = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if end - b != n * size or end > len(data):
            raise ConvertError(f"{path}: tensor '{name}': shape {shape} does not match data_offsets {b, end}")
        a = np.frombuffer(data[b:end], dtype=np_dt)
        if dt == "BF16":
            a = (a.astype(np.uint32) << 16).view(np.float32)
        tensors[name] = a.astype(np.float32).reshape(shape)
    return tensors, meta


def write_safetensors(path, tensors, metadata=None):
    """float32 tensors in the given order, header padded with spaces to a multiple of 8."""
    header, off, blobs = {}, 0, []
    if metadata:
        header["__metadata__"] = metadata
    for name, a in tensors.items():
        a = np.ascontiguousarray(a, dtype="<f4")
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        off += a.nbytes
        blobs.append(a.tobytes())
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    import os
    os.replace(tmp, path)


# ------------------------------------------------------------------ helpers


def need(cfg, key):
    sec, k = key.split(".")
    try:
        return cfg[sec][k]
    except KeyError:
        raise ConvertError(f"the checkpoint's config has no {key}: not a resolved vitrain config "
                           "(checkpoints written by vitrain carry every key)")


def pyrepr(v):
    if isinstance(v, bool) or v is None:
        return repr(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "(" + ", ".join(pyrepr(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    return repr(v)


def block_indices(tensors):
    idx = set()
    for n in tensors:
        if n.startswith("blocks."):
            idx.add(int(n.split(".")[1]))
    return sorted(idx)


def expand_shared(a, L, H):
    """(L', H', ...) with L' in {1, L}, H' in {1, H} -> (L, H, ...)."""
    return np.broadcast_to(a, (L, H) + a.shape[2:]).copy()


def square_side(n, what):
    s = int(round(math.sqrt(n)))
    if s * s != n:
        raise ConvertError(f"{what}: {n} tokens is not a square grid")
    return s


# ------------------------------------------------------------------ vitrain -> timm


def vitrain_freqs(tensors, cfg, L, H, hd, grid):
    """RoPE-Mixed frequencies (L, H, hd/2, 2) equal to the checkpoint's rotary PE with
    index positions (x = column, y = row)."""
    kind = need(cfg, "pe.kind")
    positions = need(cfg, "pe.positions")
    if kind == "rope_mixed":
        f = expand_shared(tensors["pe.freqs"], L, H).astype(np.float64)
    elif kind == "liere_commute":
        u = expand_shared(tensors["pe.liere_u"], L, H)          # (L, H, C, hd/2, 2, 2)
        f = -np.moveaxis(u[:, :, :, :, 0, 1], 2, 3).astype(np.float64)  # (L, H, hd/2, C)
    else:  # rope_axial as mixed with fixed frequencies
        theta = float(need(cfg, "pe.theta"))
        k = hd // 4
        w = theta ** (-np.arange(k, dtype=np.float64) / k)
        f = np.zeros((L, H, hd // 2, 2))
        f[:, :, :k, 0] = w
        f[:, :, k:2 * k, 1] = w
    if positions == "normalized":
        f = f / max(grid - 1, 1)
    return f.astype(np.float32)


def to_timm(tensors, cfg):
    """(timm tensors, model 'vit' | 'eva', kwargs, notes)."""
    notes = []
    D, L, H = need(cfg, "model.width"), need(cfg, "model.depth"), need(cfg, "model.heads")
    P, S = need(cfg, "model.patch_size"), need(cfg, "model.img_size")
    S = need(cfg, "pe.train_img_size") or S
    hd = D // H
    kind, ape = need(cfg, "pe.kind"), need(cfg, "pe.ape")
    positions, coord_dim = need(cfg, "pe.positions"), need(cfg, "pe.coord_dim")
    if need(cfg, "model.attention") != "softmax":
        raise ConvertError("model.attention = performer: timm has no Performer attention")
    if need(cfg, "model.in_chans") == 4:
        raise ConvertError("model.in_chans = 4 (RGB-D): timm has no depth-positioned tokens")
    if kind in ("cayley", "circulant", "liere"):
        raise ConvertError(f"pe.kind = {kind}: timm has no equivalent (Cayley-STRING, "
                           "Circulant-STRING and dense LieRE are vitrain's own)")
    rotary = kind in ("rope_axial", "rope_mixed", "liere_commute")
    if rotary and coord_dim != 2:
        raise ConvertError(f"pe.coord_dim = {coord_dim}: timm's RoPE has 2 coordinates")
    if rotary and hd % 4 != 0:
        raise ConvertError(f"head dim {hd}: timm's RoPE needs a head dim divisible by 4")
    grid = S // P
    kw = dict(img_size=S, patch_size=P, in_chans=need(cfg, "model.in_chans"),
              num_classes=need(cfg, "model.num_classes"), embed_dim=D, depth=L, num_heads=H,
              mlp_ratio=float(need(cfg, "model.mlp_ratio")), qkv_bias=bool(need(cfg, "model.qkv_bias")),
              global_pool=need(cfg, "model.pool"))
    ls = float(need(cfg, "model.layer_scale"))
    kw["init_values"] = ls if ls > 0 else None
    out = {}
    eva = rotary
    abs_pe = ape  # the absolute table of any kind: none | learned | sincos
    for name, a in tensors.items():
        if name.startswith("pe."):
            continue
        if eva and name.endswith(".ls1.gamma"):
            name = name.replace(".ls1.gamma", ".gamma_1")
        elif eva and name.endswith(".ls2.gamma"):
            name = name.replace(".ls2.gamma", ".gamma_2")
        out[name] = a
    if abs_pe == "sincos":
        out["pos_embed"] = sincos_table(grid, grid, D)[None]
        notes.append("the fixed sin-cos table is written as pos_embed: equal at img_size; timm "
                     "resamples it bicubic at other sizes (vitrain recomputes it) and trains it "
                     "unless you call model.pos_embed.requires_grad_(False)")
    if abs_pe == "learned":
        notes.append("other image sizes (timm: dynamic_img_size=True) resample pos_embed with "
                     "antialias=True, a PIL-style bicubic (a = -0.5), where vitrain resamples without "
                     "(a = -0.75, position-encodings.md 2.1): the logits agree at img_size only")
    if not eva:
        kw["pos_embed"] = "learn" if abs_pe in ("learned", "sincos") else "none"
        return reorder(out, tensors), "vit", kw, notes
    kw.update(attn_type="rope", use_abs_pos_emb=abs_pe in ("learned", "sincos"),
              use_rot_pos_emb=True, rope_grid_indexing="xy")
    if kind == "rope_axial" and positions in ("index", "interpolate"):
        kw.update(rope_type="cat", rope_temperature=float(need(cfg, "pe.theta")))
        if positions == "interpolate":
            kw["ref_feat_shape"] = (grid, grid)
    else:
        if positions == "interpolate":
            raise ConvertError(f"pe.kind = {kind} with pe.positions = interpolate: timm's "
                               "RoPE-Mixed has no reference grid (only rope_type='cat' does)")
        f = vitrain_freqs(tensors, cfg, L, H, hd, grid)
        out["rope.freqs"] = np.ascontiguousarray(np.moveaxis(f, 3, 0))   # (2, L, H, hd/2)
        kw.update(rope_type="mixed")
        if kind == "rope_axial":
            notes.append("rope_axial with positions normalized is written as RoPE-Mixed with "
                         "its fixed frequencies: freeze model.rope.freqs to fine-tune it as axial")
        if kind == "liere_commute":
            notes.append("liere_commute is written as RoPE-Mixed (f = -U[0, 1] per 2 x 2 block)")
        if positions == "normalized":
            notes.append(f"positions normalized: 1 / {max(grid - 1, 1)} folded into rope.freqs "
                         "(the same angles at every image size)")
    return reorder(out, tensors), "eva", kw, notes


def reorder(out, tensors):
    """cls_token, pos_embed, patch_embed, rope, blocks..., rest: timm's state_dict order."""
    first = ["cls_token", "pos_embed", "patch_embed.proj.weight", "patch_embed.proj.bias", "rope.freqs"]
    res = {k: out[k] for k in first if k in out}
    res.update({k: v for k, v in out.items() if k not in res})
    return res


def sincos_table(rows, cols, D):
    """vitrain's / timm build_sincos2d_pos_embed table with a zero class-token row, float32
    math as vitrain computes it (ape.c)."""
    pd = D // 4
    k = np.arange(pd, dtype=np.float32)
    w = (np.float32(1.0) / np.power(np.float32(10000.0), k / np.float32(pd))).astype(np.float32)
    i, j = np.meshgrid(np.arange(rows, dtype=np.float32), np.arange(cols, dtype=np.float32), indexing="ij")
    ai = (i.reshape(-1, 1) * w).astype(np.float32)
    aj = (j.reshape(-1, 1) * w).astype(np.float32)
    t = np.concatenate([np.sin(ai), np.sin(aj), np.cos(ai), np.cos(aj)], axis=1).astype(np.float32)
    return np.concatenate([np.zeros((1, D), np.float32), t], axis=0)


def snippet(model, kw, out_path):
    cls = "timm.models.eva.Eva" if model == "eva" else "timm.models.vision_transformer.VisionTransformer"
    mod = cls.rsplit(".", 1)[0]
    args = ", ".join(f"{k}={pyrepr(v)}" for k, v in kw.items())
    return (f"import {mod}, safetensors.torch\n"
            f"model = {cls}({args})\n"
            f"model.load_state_dict(safetensors.torch.load_file({out_path!r}))\n")


# ------------------------------------------------------------------ timm -> vitrain

VIT_DEFAULTS = dict(img_size=224, patch_size=16, in_chans=3, num_classes=1000, global_pool="token",
                    embed_dim=768, depth=12, num_heads=12, mlp_ratio=4.0, qkv_bias=True,
                    init_values=None, class_token=True, pos_embed="learn", no_embed_class=False,
                    reg_tokens=0, fc_norm=None, qk_norm=False, pre_norm=False, final_norm=True,
                    dynamic_img_size=False)
EVA_DEFAULTS = dict(img_size=224, patch_size=16, in_chans=3, num_classes=1000, global_pool="avg",
                    embed_dim=768, depth=12, num_heads=12, qkv_bias=True, qkv_fused=True, mlp_ratio=4.0,
                    swiglu_mlp=False, scale_mlp=False, scale_attn_inner=False, attn_type="eva",
                    qk_norm=False, init_values=None, class_token=True, num_reg_tokens=0,
                    no_embed_class=False, use_abs_pos_emb=True, use_rot_pos_emb=False, rope_type="cat",
                    rope_grid_offset=0.0, rope_grid_indexing="ij", rope_temperature=10000.0,
                    rope_rotate_half=False, use_post_norm=False, use_pre_transformer_norm=False,
                    use_fc_norm=None, dynamic_img_size=False, ref_feat_shape=None)
IGNORED = {"drop_rate", "pos_drop_rate", "patch_drop_rate", "proj_drop_rate", "attn_drop_rate",
           "drop_path_rate", "head_init_scale", "weight_init", "fix_init"}
# Arguments that must keep timm's default value for the model to be a vitrain ViT.
FIXED = {"class_token": True, "reg_tokens": 0, "num_reg_tokens": 0, "qk_norm": False, "pre_norm": False,
         "final_norm": True, "qkv_fused": True, "swiglu_mlp": False, "scale_mlp": False,
         "scale_attn_inner": False, "rope_grid_offset": 0.0, "rope_rotate_half": False,
         "use_post_norm": False, "use_pre_transformer_norm": False}


# timm model names (timm 1.0's registrations) of the families vitrain reads: the class and
# the constructor arguments the name stands for. The head count is not in the tensors, so a
# name (or num_heads) is what tells it.
_VIT_SIZES = {"tiny": (192, 12, 3), "small": (384, 12, 6), "base": (768, 12, 12), "large": (1024, 24, 16)}
_VIT_NAMES = ["vit_tiny_patch16_224", "vit_tiny_patch16_384", "vit_small_patch16_224", "vit_small_patch16_384",
              "vit_small_patch32_224", "vit_base_patch16_224", "vit_base_patch16_384", "vit_base_patch32_224",
              "vit_large_patch16_224", "vit_large_patch16_384"]
TIMM_NAMES = {}
for _n in _VIT_NAMES:
    _size, _patch, _img = _n.split("_")[1], int(_n.split("_")[2][5:]), int(_n.split("_")[3])
    _D, _L, _H = _VIT_SIZES[_size]
    TIMM_NAMES[_n] = ("vit", dict(img_size=_img, patch_size=_patch, embed_dim=_D, depth=_L, num_heads=_H))
for _size in ("small", "base", "large"):
    _D, _L, _H = _VIT_SIZES[_size]
    for _mixed in (False, True):
        for _ape in (False, True):
            _n = f"vit_{_size}_patch16_rope{'_mixed' if _mixed else ''}{'_ape' if _ape else ''}_224"
            _kw = dict(img_size=224, patch_size=16, embed_dim=_D, depth=_L, num_heads=_H, mlp_ratio=4.0,
                       attn_type="rope", qkv_bias=True, init_values=1e-5, class_token=True, global_pool="token",
                       use_abs_pos_emb=_ape, use_rot_pos_emb=True, rope_grid_indexing="xy",
                       rope_temperature=10.0 if _mixed else 100.0)
            if _ape:
                _kw["no_embed_class"] = True
            if _mixed:
                _kw["rope_type"] = "mixed"
            TIMM_NAMES[_n] = ("eva", _kw)


def model_of(name, kwargs):
    """(class 'vit' | 'eva', constructor kwargs) of --model NAME with --kwargs on top."""
    if name in ("vit", "eva"):
        return name, dict(kwargs)
    if name not in TIMM_NAMES:
        near = difflib.get_close_matches(name, list(TIMM_NAMES), n=1)
        raise ConvertError(f"model {name!r}: expected vit, eva or a timm model name vitrain reads"
                           f"{f' (did you mean {near[0]!r}?)' if near else ''}; `timm_convert.py names` lists them")
    model, kw = TIMM_NAMES[name]
    return model, dict(kw, **kwargs)


def resolve_kwargs(model, kwargs):
    defaults = VIT_DEFAULTS if model == "vit" else EVA_DEFAULTS
    unknown = [k for k in kwargs if k not in defaults and k not in IGNORED]
    if unknown:
        raise ConvertError(f"{model} argument(s) {', '.join(sorted(unknown))} not supported (supported: "
                           f"{', '.join(sorted(defaults))}; ignored: {', '.join(sorted(IGNORED))})")
    kw = dict(defaults)
    kw.update({k: v for k, v in kwargs.items() if k not in IGNORED})
    for k, v in FIXED.items():
        if k in kw and kw[k] != v:
            raise ConvertError(f"{model}: {k}={kw[k]!r} has no vitrain equivalent (only {v!r})")
    if kw["global_pool"] not in ("token", "avg"):
        raise ConvertError(f"global_pool={kw['global_pool']!r}: vitrain pools 'token' or 'avg'")
    auto_fc = kw["global_pool"] == "avg"
    fc = kw.get("fc_norm", kw.get("use_fc_norm"))
    if fc is not None and bool(fc) != auto_fc:
        raise ConvertError(f"fc_norm={fc!r} with global_pool={kw['global_pool']!r}: vitrain uses fc_norm "
                           "exactly with avg pooling")
    return kw


def from_timm(tensors, model, kwargs):
    """(vitrain tensors, vitrain config dict)."""
    kw = resolve_kwargs(model, kwargs)
    t = dict(tensors)
    for req in ("cls_token", "patch_embed.proj.weight", "head.weight"):
        if req not in t:
            raise ConvertError(f"tensor '{req}' missing: not a timm ViT state dict with a classifier")
    D = t["cls_token"].shape[-1]
    pw = t["patch_embed.proj.weight"]
    in_chans, P = pw.shape[1], pw.shape[2]
    blocks = block_indices(t)
    L = len(blocks)
    K = t["head.weight"].shape[0]
    hidden = t["blocks.0.mlp.fc1.weight"].shape[0]
    H = kw["num_heads"]
    rotary = model == "eva" and kw["use_rot_pos_emb"]
    mixed = rotary and kw["rope_type"] == "mixed"
    if rotary and kw["rope_type"] not in ("cat", "mixed"):
        raise ConvertError(f"rope_type={kw['rope_type']!r}: vitrain reads 'cat' (axial) and 'mixed'")
    if rotary and kw["rope_grid_indexing"] not in ("ij", "xy"):
        raise ConvertError(f"rope_grid_indexing={kw['rope_grid_indexing']!r}: expected 'ij' or 'xy'")
    ij = rotary and kw["rope_grid_indexing"] == "ij"
    if mixed:
        if "rope.freqs" not in t:
            raise ConvertError("rope_type='mixed' but the file has no rope.freqs")
        H = t["rope.freqs"].shape[2]
    shape_args = dict(embed_dim=D, depth=L, patch_size=P, in_chans=in_chans, num_classes=K, num_heads=H)
    for k, v in shape_args.items():
        if k in kwargs and kwargs[k] != v:
            raise ConvertError(f"{k}={kwargs[k]} disagrees with the tensors ({v})")
    if not mixed and "num_heads" not in kwargs:
        raise ConvertError("num_heads is not in the tensors and was not given: name the timm model "
                           "(--model vit_tiny_patch16_224; `timm_convert.py names` lists them) or give it "
                           f"(--kwargs '{{\"num_heads\": N}}', N dividing the width {D})")
    if D % H or (D // H) % 2:
        raise ConvertError(f"num_heads={H} does not give an even head dim of embed_dim {D}")
    hd = D // H
    mlp_ratio = kw["mlp_ratio"]
    if int(D * mlp_ratio) != hidden:  # the tensors decide; int(D * r) == hidden as timm sizes it
        mlp_ratio = hidden / D if int(D * (hidden / D)) == hidden else (hidden + 0.5) / D

    out = {}
    ls = None
    for name, a in t.items():
        n = name
        if n.endswith(".gamma_1"):
            n = n[:-len("gamma_1")] + "ls1.gamma"
        elif n.endswith(".gamma_2"):
            n = n[:-len("gamma_2")] + "ls2.gamma"
        if n.endswith(".attn.q_bias"):
            v = t.get(name[:-len("q_bias")] + "v_bias")
            if v is None:
                raise ConvertError(f"tensor '{name}' without its v_bias")
            n = n[:-len("q_bias")] + "qkv.bias"
            a = np.concatenate([a, np.zeros_like(a), v])
        elif n.endswith(".attn.v_bias"):
            continue
        if n.endswith("ls1.gamma"):
            ls = True
        if n == "rope.freqs":
            if not mixed:
                raise ConvertError("tensor 'rope.freqs' but the arguments do not build rope_type='mixed'")
            f = np.moveaxis(a, 0, 3)                        # (L, H, hd/2, 2): [..., 0] with t_x
            if ij:
                f = f[..., ::-1]                            # 'ij': t_x is the row (y)
            out["pe.freqs"] = np.ascontiguousarray(f)
            continue
        if n == "pos_embed":
            N = a.shape[1]
            prefix = 0 if kw["no_embed_class"] else 1
            side = square_side(N - prefix, "pos_embed")
            if prefix == 0:
                a = np.concatenate([np.zeros((1, 1, D), np.float32), a], axis=1)
            grid_from_ape = side
        out[n] = a
    if ij and not mixed:
        k = hd // 4
        perm = np.concatenate([np.arange(2 * k, 4 * k), np.arange(0, 2 * k), np.arange(4 * k, hd)])
        for b in blocks:
            for suffix in ("weight", "bias"):
                key = f"blocks.{b}.attn.qkv.{suffix}"
                if key not in out:
                    continue
                a = out[key].copy()
                for h in range(H):
                    for base in (0, D):                     # q rows, k rows
                        rows = base + h * hd + perm
                        a[base + h * hd:base + (h + 1) * hd] = out[key][rows]
                out[key] = a
    has_ape = "pos_embed" in out
    if model == "vit" and (kw["pos_embed"] in ("learn",)) != has_ape:
        raise ConvertError(f"pos_embed={kw['pos_embed']!r} but the file {'has' if has_ape else 'lacks'} pos_embed")
    if model == "eva" and kw["use_abs_pos_emb"] != has_ape:
        raise ConvertError(f"use_abs_pos_emb={kw['use_abs_pos_emb']} but the file "
                           f"{'has' if has_ape else 'lacks'} pos_embed")
    if (kw["init_values"] is not None) != bool(ls):
        raise ConvertError(f"init_values={kw['init_values']} but the file {'has' if ls else 'lacks'} "
                           "layer-scale tensors")
    if ("fc_norm.weight" in out) != (kw["global_pool"] == "avg"):
        raise ConvertError(f"global_pool={kw['global_pool']!r} but the file "
                           f"{'has' if 'fc_norm.weight' in out else 'lacks'} fc_norm")
    img = kw["img_size"]
    if has_ape:
        img = grid_from_ape * P
        if "img_size" in kwargs and kwargs["img_size"] != img:
            raise ConvertError(f"img_size={kwargs['img_size']} but pos_embed holds a "
                               f"{grid_from_ape} x {grid_from_ape} grid of {P}-pixel patches ({img})")
    # Every key the model depends on is stated (the way back, to-timm, reads them all).
    pe = {"kind": "ape" if has_ape else "none", "ape": "learned" if has_ape else "none",
          "positions": "index", "share": "none", "theta": 0, "coord_dim": 2, "train_img_size": img,
          "block_size": 0}
    if rotary:
        pe["kind"] = "rope_mixed" if mixed else "rope_axial"
        pe["theta"] = float(kw["rope_temperature"])  # mixed: the init's base, as timm's init
        if kw["ref_feat_shape"] is not None:
            if mixed:
                raise ConvertError("ref_feat_shape with rope_type='mixed': timm ignores it; leave it out")
            ref = kw["ref_feat_shape"]
            ref = (ref, ref) if isinstance(ref, int) else tuple(ref)
            if ref[0] != ref[1]:
                raise ConvertError(f"ref_feat_shape={ref}: vitrain grids are square")
            if has_ape and ref[0] * P != img:
                raise ConvertError(f"ref_feat_shape={ref} differs from the pos_embed grid")
            pe["positions"] = "interpolate"
            pe["train_img_size"] = ref[0] * P
    cfg = {"model": {"width": D, "depth": L, "heads": H, "mlp_ratio": mlp_ratio, "patch_size": P,
                     "img_size": img, "in_chans": in_chans, "num_classes": K,
                     "pool": kw["global_pool"], "qkv_bias": "blocks.0.attn.qkv.bias" in out,
                     "layer_scale": float(kw["init_values"]) if ls else 0, "attention": "softmax"},
           "pe": pe}
    return reorder(out, out), cfg


# ------------------------------------------------------------------ CLI


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("to-timm", help="vitrain checkpoint -> timm state dict")
    a.add_argument("input")
    a.add_argument("output")
    a.add_argument("--spec", help="also write {\"model\": ..., \"kwargs\": ...} here")
    b = sub.add_parser("from-timm", help="timm state dict -> vitrain checkpoint")
    b.add_argument("input")
    b.add_argument("output")
    b.add_argument("--spec", help="JSON file {\"model\": \"vit\"|\"eva\", \"kwargs\": {...}} (as to-timm writes)")
    b.add_argument("--model", help="vit, eva (the class; num_heads must be in --kwargs) or a timm model "
                   "name (vit_base_patch16_224, vit_small_patch16_rope_mixed_224, ...: `names` lists them)")
    sub.add_parser("names", help="the timm model names from-timm --model accepts")
    b.add_argument("--kwargs", default="{}", help="timm constructor arguments as JSON")
    args = ap.parse_args(argv)
    if args.cmd == "names":
        for n, (model, kw) in TIMM_NAMES.items():
            print(n)
        return 0
    try:
        tensors, meta = read_safetensors(args.input)
        if args.cmd == "to-timm":
            if "config" not in meta:
                raise ConvertError(f"{args.input}: no __metadata__[\"config\"]: not a vitrain checkpoint")
            cfg = json.loads(meta["config"])
            out, model, kw, notes = to_timm(tensors, cfg)
            write_safetensors(args.output, out, {"format": "pt"})
            if args.spec:
                with open(args.spec, "w") as f:
                    json.dump({"model": model, "kwargs": kw}, f, indent=1)
            sys.stdout.write(snippet(model, kw, args.output))
            for n in notes:
                print(f"timm_convert: note: {n}", file=sys.stderr)
        else:
            if args.spec:
                with open(args.spec) as f:
                    spec = json.load(f)
                model, kwargs = spec["model"], spec.get("kwargs", {})
            elif args.model:
                model, kwargs = model_of(args.model, json.loads(args.kwargs))
            else:
                raise ConvertError("from-timm needs --spec FILE or --model NAME|vit|eva [--kwargs JSON]")
            if model not in ("vit", "eva"):
                raise ConvertError(f"model {model!r}: expected 'vit' or 'eva'")
            try:
                out, cfg = from_timm(tensors, model, kwargs)
            except ConvertError as e:  # name the model whose arguments disagree
                if args.model and args.model not in ("vit", "eva"):
                    raise ConvertError(f"{args.model}: {e}")
                raise
            write_safetensors(args.output, out, {"config": json.dumps(cfg)})
            print(json.dumps(cfg))
    except ConvertError as e:
        print(f"timm_convert: error: {e}", file=sys.stderr)
        return 1
    except (OSError, KeyError, ValueError) as e:
        print(f"timm_convert: error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
