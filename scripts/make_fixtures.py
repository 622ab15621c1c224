#!/usr/bin/python3
"""make_fixtures.py - PyTorch reference fixtures for tests/test_parity.c and
tests/test_pe_parity.c.

Run from the repository root with Debian's torch (python3-torch 1.13):

    /usr/bin/python3 scripts/make_fixtures.py

Writes tests/fixtures/vit_tiny.safetensors (pool token) and
tests/fixtures/vit_tiny_avg.safetensors (pool avg, LayerScale 0.1), both with a learned
APE, and one tests/fixtures/vit_pe_<variant>.safetensors per position-encoding variant
of PE_FIXTURES (below). The outputs are committed, so CI never needs torch. The model
is written here in plain torch from the spec (timm VisionTransformer semantics,
docs/position-encodings.md section 4), not imported from timm:

    x = conv_PxP_stride_P(images).flatten(2).transpose(1, 2)        (B, N-1, D)
    x = cat(cls_token, x) + pos_embed                                 (B, N, D)
    per block: x = x + ls1 * proj(attn(norm1(x)))
               x = x + ls2 * fc2(gelu(fc1(norm2(x))))                 (exact erf GELU)
    attn: qkv Linear(D, 3D) rows [q; k; v], head h = rows [h hd, (h+1) hd) of each,
          (rotary PE: q, k of every patch token -> R(r) q, R(r) k; CLS and v untouched)
          softmax(q k^T * hd^-0.5) v, heads concatenated in order, then proj
    token pool: head(norm(x)[:, 0]);  avg pool: head(fc_norm(mean(x[:, 1:], 1)))
    LayerNorm eps 1e-6 everywhere; ls1/ls2 only with LayerScale.

Tensors in each file (float32; safetensors written by hand: u64 LE header length,
JSON header padded with spaces to a multiple of 8, data contiguous in header order):
    <timm name>        every parameter, values of the reference model
    input.images       (3, 3, 8, 8)
    input.labels       (3,) class indices stored as float32
    output.logits      (3, 5)
    output.loss        (1,)  cross entropy, mean over the batch, label_smoothing 0.1
    grad.<timm name>   d loss / d parameter
    train.lr           (10,) learning rate used at each step (schedule below)
    train.losses       (10,) loss before each of 10 AdamW steps on the same batch
__metadata__: "config" (the vitrain JSON config of the model and run), "schedule"
(the LR formula), "reference" (how the numbers were computed).

The vit_pe_* fixtures (forward/backward only, no train.* tensors or schedule) hold the
same tensors for a model whose position encoding is written here from
docs/position-encodings.md (PositionEncoding: every rotary R(r) as a dense float64
hd x hd matrix per patch, LieRE / circulant through this file's own scaling-and-squaring
expm, checked against closed forms by check_reference()); every pe.* tensor is stored in
its section 4 shape with random non-zero values (unused triangle entries 0) and has its
grad.pe.* entry. input.images may be larger than model.img_size (the training
resolution): the *_res fixtures evaluate another grid than the trained one. The *_c1 / *_c3
fixtures use pe.coord_dim 1 / 3, the *_rgbd ones RGB-D input (model.in_chans 4: channel 3
is depth, positive, never embedded; z = mean patch depth * pe.depth_scale).

Numerics: the reference is computed in float64 from the float32-rounded weights and
inputs, then rounded to float32, so the fixture is the exact answer to ~1e-7 and
the C float32 result is compared against the truth, not against torch's float32
rounding. The script prints the float32-vs-float64 torch gap of every output as a
guide for the parity tolerances.
"""
import json
import math
import os
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

IMG, PATCH, IN_CHANS, WIDTH, DEPTH, HEADS, MLP_RATIO, CLASSES, BATCH = 8, 4, 3, 16, 2, 2, 4, 5, 3
LABEL_SMOOTHING = 0.1
STEPS, WARMUP = 10, 3
LR, MIN_LR, BETAS, EPS, WEIGHT_DECAY = 1e-2, 1e-4, (0.9, 0.999), 1e-8, 0.05
INIT_STD = 0.2
LN_EPS = 1e-6

SCHEDULE = ("lr(s) for 0-based optimizer step s, evaluated before the update, T = total "
            "steps, W = warmup steps: s < W: lr * (s + 1) / W; else: min_lr + (lr - min_lr) * "
            "0.5 * (1 + cos(pi * (s - W) / (T - W)))")


def lr_at(s):
    """The schedule (see SCHEDULE): linear warmup from 0, then cosine to MIN_LR at T."""
    if s < WARMUP:
        return LR * (s + 1) / WARMUP
    return MIN_LR + (LR - MIN_LR) * 0.5 * (1 + math.cos(math.pi * (s - WARMUP) / (STEPS - WARMUP)))


class LayerScale(nn.Module):
    def __init__(self, dim, value):
        super().__init__()
        self.gamma = nn.Parameter(torch.full((dim,), value))

    def forward(self, x):
        return x * self.gamma


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads, self.hd = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, rotate=None):
        B, N, D = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.heads, self.hd).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]                      # (B, H, N, hd)
        if rotate is not None:
            q, k = rotate(q), rotate(k)
        a = torch.softmax((q @ k.transpose(-2, -1)) * self.hd ** -0.5, dim=-1)
        return self.proj((a @ v).transpose(1, 2).reshape(B, N, D))


class Mlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, dim, heads, mlp_ratio, layer_scale):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=LN_EPS)
        self.attn = Attention(dim, heads)
        self.ls1 = LayerScale(dim, layer_scale) if layer_scale else nn.Identity()
        self.norm2 = nn.LayerNorm(dim, eps=LN_EPS)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))
        self.ls2 = LayerScale(dim, layer_scale) if layer_scale else nn.Identity()

    def forward(self, x, rotate=None):
        x = x + self.ls1(self.attn(self.norm1(x), rotate))
        return x + self.ls2(self.mlp(self.norm2(x)))


class PatchEmbed(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Conv2d(IN_CHANS, WIDTH, PATCH, stride=PATCH)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)         # (B, N-1, D), row-major grid


class VisionTransformer(nn.Module):
    """pe: None (learned APE only, the vit_tiny fixtures) or a PositionEncoding (registered
    last, so its parameters are named pe.*); img: the training resolution."""
    def __init__(self, pool, layer_scale, pe=None, img=IMG):
        super().__init__()
        n_patches = (img // PATCH) ** 2
        self.pool = pool
        self.cls_token = nn.Parameter(torch.zeros(1, 1, WIDTH))
        if pe is None or pe.ape == "learned":
            self.pos_embed = nn.Parameter(torch.zeros(1, 1 + n_patches, WIDTH))
        else:
            self.pos_embed = None
        self.patch_embed = PatchEmbed()
        self.blocks = nn.ModuleList(
            [Block(WIDTH, HEADS, MLP_RATIO, layer_scale) for _ in range(DEPTH)])
        if pool == "token":
            self.norm = nn.LayerNorm(WIDTH, eps=LN_EPS)
        else:
            self.fc_norm = nn.LayerNorm(WIDTH, eps=LN_EPS)
        self.head = nn.Linear(WIDTH, CLASSES)
        self.pe = pe

    def forward(self, images):
        x = self.patch_embed(images[:, :IN_CHANS])     # RGB-D: depth positions, not embedded
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)
        grid = images.shape[-1] // PATCH
        if self.pos_embed is not None:
            x = x + self.pos_embed
        elif self.pe.ape == "sincos":
            x = x + sincos_table(grid, grid, WIDTH).to(x.dtype)
        for l, blk in enumerate(self.blocks):
            rotate = None
            if self.pe is not None and self.pe.kind != "ape":
                rotate = self.pe.rotator(l, images, x.dtype)
            x = blk(x, rotate)
        if self.pool == "token":
            return self.head(self.norm(x)[:, 0])
        return self.head(self.fc_norm(x[:, 1:].mean(dim=1)))


# ---- Position encodings, written from docs/position-encodings.md (sections 1, 2, 4) ----
#
# Every rotary kind is realised the same way: a dense hd x hd matrix R(r) per (parameter
# set, patch) acting on a head's q and k as y = R x after the qkv projection; token 0 (CLS)
# is never transformed, v never. This is deliberately the slow, obvious form (no pair
# tables, no DFT tricks) so it shares no shortcut with the C code.


def sincos_table(rows, cols, dim):
    """timm build_sincos2d_pos_embed((rows, cols), dim, temperature 1e4) with a zero CLS row
    first: (1, 1 + rows cols, dim), float64. Token (i, j) (row-major): [sin(i w), sin(j w),
    cos(i w), cos(j w)], each pd = dim / 4 wide, w_k = 1e4^(-k / pd)."""
    pd = dim // 4
    w = 1.0 / (1e4 ** (torch.arange(pd, dtype=torch.float64) / pd))
    ii, jj = torch.meshgrid(torch.arange(rows, dtype=torch.float64),
                            torch.arange(cols, dtype=torch.float64), indexing="ij")
    grid = torch.stack([ii.flatten(), jj.flatten()], dim=1)                # (N, 2): i, j
    pos = grid.unsqueeze(-1) * w                                           # (N, 2, pd)
    table = torch.stack([torch.sin(pos), torch.cos(pos)], dim=1).flatten(1)  # (N, dim)
    return torch.cat([torch.zeros(1, dim, dtype=torch.float64), table]).unsqueeze(0)


def expm(a):
    """Matrix exponential of a (..., n, n) float64 batch by scaling and squaring: one
    s for the batch with max 1-norm / 2^s <= 0.5, Taylor series to degree 20 (truncation
    < 0.5^21 / 21! ~ 1e-26 relative), s squarings. Differentiable by autograd (the gradient
    of this approximant equals the exact Frechet derivative to the same order). Used
    instead of torch.matrix_exp (section 1: torch 1.13's is off by ~2e-10 in float64)."""
    norm = a.detach().abs().sum(dim=-2).max().item() if a.numel() else 0.0
    s = max(0, math.ceil(math.log2(norm / 0.5))) if norm > 0.5 else 0
    x = a / (2.0 ** s)
    eye = torch.eye(a.shape[-1], dtype=a.dtype).expand_as(a)
    result, term = eye, eye
    for k in range(1, 21):
        term = (term @ x) / k
        result = result + term
    for _ in range(s):
        result = result @ result
    return result


def patch_coords(rows, cols, train_rows, train_cols, positions, C=2):
    """(Np, C) float64 coordinates of every patch n = i cols + j (x fastest), section 1:
    C = 2: (x, y) = (j, i); C = 3: (x, y, 0) (the caller adds z); C = 1: the raster index
    r = n. pe.positions scales x by the x-axis sizes and y by the y-axis sizes; for C = 1
    the token counts Nt = train_rows train_cols and Np = rows cols play the axis sizes."""
    ii, jj = torch.meshgrid(torch.arange(rows, dtype=torch.float64),
                            torch.arange(cols, dtype=torch.float64), indexing="ij")
    if C == 1:
        r, nt, n = (ii * cols + jj).flatten(), train_rows * train_cols, rows * cols
        if positions == "normalized":
            r = r / max(nt - 1, 1)
        elif positions == "interpolate":
            r = r * nt / n
        return r.unsqueeze(1)
    x, y = jj.flatten(), ii.flatten()
    if positions == "normalized":
        x, y = x / max(train_cols - 1, 1), y / max(train_rows - 1, 1)
    elif positions == "interpolate":
        x, y = x * train_cols / cols, y * train_rows / rows
    if C == 3:
        return torch.stack([x, y, torch.zeros_like(x)], dim=1)
    return torch.stack([x, y], dim=1)


def rope_matrices(angles, hd):
    """angles (..., npr), npr <= hd/2 -> (..., hd, hd): pair p = channels (2p, 2p+1) rotated
    by angle a, (u, w) -> (u cos a - w sin a, u sin a + w cos a); pairs >= npr identity."""
    npr = angles.shape[-1]
    r = torch.eye(hd, dtype=angles.dtype).repeat(*angles.shape[:-1], 1, 1)
    c, s = torch.cos(angles), torch.sin(angles)
    idx = torch.arange(npr)
    r[..., 2 * idx, 2 * idx] = c
    r[..., 2 * idx, 2 * idx + 1] = -s
    r[..., 2 * idx + 1, 2 * idx] = s
    r[..., 2 * idx + 1, 2 * idx + 1] = c
    return r


def axial_freqs(hd, theta, C=2):
    """RoPE-Axial table (C k, C), k = floor(hd / (2C)): row a k + i = theta^(-i/k) on axis a."""
    k = hd // (2 * C)
    f = torch.zeros(C * k, C, dtype=torch.float64)
    for a in range(C):
        for i in range(k):
            f[a * k + i, a] = theta ** (-i / k)
    return f


def skew_from_upper(u):
    """(..., n, n) -> S = U - U^T with U the strictly upper part of u (rest ignored)."""
    up = torch.triu(u, diagonal=1)
    return up - up.transpose(-2, -1)


def block_diag_batch(blocks):
    """(..., nb, g, g) -> (..., nb g, nb g) block diagonal."""
    nb, g = blocks.shape[-3], blocks.shape[-1]
    out = torch.zeros(*blocks.shape[:-3], nb * g, nb * g, dtype=blocks.dtype)
    for n in range(nb):
        out[..., n * g:(n + 1) * g, n * g:(n + 1) * g] = blocks[..., n, :, :]
    return out


class PositionEncoding(nn.Module):
    """One PE of the contract: kind in ape | rope_axial | rope_mixed | cayley | circulant |
    liere | liere_commute, with its pe.* parameters (section 4 shapes; leading (L', H') by
    share). C = pe.coord_dim (default 2); with RGB-D input (spec in_chans 4, C = 3) the
    third coordinate of a patch is its mean depth (image channel 3) times the learnable
    pe.depth_scale, so positions are per sample. theta (default 100) is only read by the
    fixed axial table (rope_axial, cayley inner axial). rotator(l, images, dtype) returns
    the q/k transform of layer l."""

    def __init__(self, spec, depth, heads, hd, train_grid):
        super().__init__()
        self.kind, self.ape = spec["kind"], spec.get("ape", "none")
        liere = self.kind in ("liere", "liere_commute")
        self.share = spec.get("share", "all" if liere else "none")
        self.positions = spec.get("positions", "normalized" if liere else "index")  # section 2.6
        self.inner, self.theta = spec.get("inner", "mixed"), spec.get("theta", 100)
        self.block, self.hd, self.heads = spec.get("block_size", 0), hd, heads
        self.train_grid = train_grid
        self.C = C = spec.get("coord_dim", 2)
        self.rgbd = spec.get("in_chans", 3) == 4
        Lp = 1 if self.share in ("layers", "all") else depth
        Hp = 1 if self.share in ("heads", "all") else heads
        if self.kind == "rope_mixed" or (self.kind == "cayley" and self.inner == "mixed"):
            self.freqs = nn.Parameter(torch.zeros(Lp, Hp, hd // 2, C))
        if self.kind == "cayley":
            self.cayley_u = nn.Parameter(torch.zeros(Lp, Hp, hd, hd))
        if self.kind == "circulant":
            self.circulant_c = nn.Parameter(torch.zeros(Lp, Hp, C, hd // self.block, self.block))
        if self.kind in ("liere", "liere_commute"):
            g = 2 if self.kind == "liere_commute" else self.block
            self.block = g
            self.liere_u = nn.Parameter(torch.zeros(Lp, Hp, C, hd // g, g, g))
        if self.rgbd:
            self.depth_scale = nn.Parameter(torch.ones(1))

    def randomize(self, gen):
        """Random values for every pe.* tensor; unused entries (lower triangle and diagonal
        of *_u) are 0 as a checkpoint stores them."""
        with torch.no_grad():
            for name, p in self.named_parameters():
                r = torch.randn(p.shape, generator=gen)
                if name == "freqs":
                    p.copy_(r)
                elif name == "cayley_u":
                    p.copy_(torch.triu(0.3 * r, diagonal=1))
                elif name == "circulant_c":
                    p.copy_(0.5 * r)
                elif name == "depth_scale":
                    p.copy_(0.8 + 0.2 * r)
                else:
                    p.copy_(torch.triu(r, diagonal=1))

    def coords(self, images, dtype):
        """(Ba, Np, C) patch coordinates for `images` (B, C_img, S, S): Ba = B with RGB-D
        (z = mean of the patch's P x P depth pixels times pe.depth_scale), else 1."""
        grid = images.shape[-1] // PATCH
        r = patch_coords(grid, grid, self.train_grid, self.train_grid, self.positions,
                         self.C).to(dtype).unsqueeze(0)
        if not self.rgbd:
            return r
        z = F.avg_pool2d(images[:, 3:4].to(dtype), PATCH).flatten(1)     # (B, Np)
        r = r.expand(images.shape[0], -1, -1)
        return torch.cat([r[..., :2], (z * self.depth_scale).unsqueeze(-1)], dim=-1)

    def matrices(self, layer, r):
        """R(r) of every patch for model layer `layer` at coordinates r (Ba, Np, C):
        (Ba, H', Np, hd, hd) (H' = 1 when the heads share it)."""
        hd = self.hd
        lp = 0 if self.share in ("layers", "all") else layer
        if self.kind == "rope_axial":
            ang = r @ axial_freqs(hd, self.theta, self.C).to(r.dtype).T      # (Ba, Np, npr)
            return rope_matrices(ang, hd).unsqueeze(1)
        if self.kind == "rope_mixed":
            ang = torch.einsum("bnc,hpc->bhnp", r, self.freqs[lp])
            return rope_matrices(ang, hd)
        if self.kind == "cayley":
            if self.inner == "mixed":
                ang = torch.einsum("bnc,hpc->bhnp", r, self.freqs[lp])      # (Ba, H', Np, hd/2)
            else:
                ang = (r @ axial_freqs(hd, self.theta, self.C).to(r.dtype).T).unsqueeze(1)
            s = skew_from_upper(self.cayley_u[lp])                          # (H', hd, hd)
            eye = torch.eye(hd, dtype=s.dtype)
            p = (eye - s) @ torch.inverse(eye + s)
            return rope_matrices(ang, hd) @ p.unsqueeze(1)                  # RoPE(r) P
        if self.kind == "circulant":
            c = self.circulant_c[lp]                                        # (H', C, nb, b)
            b = self.block
            idx = (torch.arange(b).unsqueeze(1) - torch.arange(b).unsqueeze(0)) % b
            circ = c[..., idx]                                              # (H', C, nb, b, b)
            gen = circ - circ.transpose(-2, -1)
            blocks = torch.einsum("bnk,hkmij->bhnmij", r, gen)              # (Ba, H', Np, nb, b, b)
            return block_diag_batch(expm(blocks))
        u = self.liere_u[lp]                                                # (H', C, nb, g, g)
        blocks = torch.einsum("bnk,hkmij->bhnmij", r, skew_from_upper(u))
        return block_diag_batch(expm(blocks))

    def rotator(self, layer, images, dtype):
        """The transform of layer `layer`: (B, H, N, hd) -> same, patch tokens y = R x."""
        m = self.matrices(layer, self.coords(images, dtype))

        def rotate(x):
            rm = m.expand(x.shape[0], self.heads, -1, -1, -1)
            patches = torch.einsum("bhnij,bhnj->bhni", rm, x[:, :, 1:])
            return torch.cat([x[:, :, :1], patches], dim=2)
        return rotate


def check_reference():
    """Self-checks of the reference's building blocks against closed forms: expm of a 2x2
    skew block and of a circulant generator (section 2.5's DFT-plane rotation), Cayley P
    orthogonal, the interleaved pair rotation's sign."""
    gen = torch.Generator().manual_seed(99)
    a = 2.7
    want = torch.tensor([[math.cos(a), math.sin(a)], [-math.sin(a), math.cos(a)]],
                        dtype=torch.float64)
    got = expm(torch.tensor([[0.0, a], [-a, 0.0]], dtype=torch.float64))
    assert (got - want).abs().max() < 1e-14, "expm 2x2"
    b = 8
    c = torch.randn(b, generator=gen, dtype=torch.float64)
    idx = (torch.arange(b).unsqueeze(1) - torch.arange(b).unsqueeze(0)) % b
    L = c[idx] - c[idx].T
    r = 1.7
    E = expm(r * L)
    m = torch.arange(b, dtype=torch.float64)
    for j in range(1, b // 2):
        u, v = torch.cos(2 * math.pi * j * m / b), torch.sin(2 * math.pi * j * m / b)
        w = 2 * (c * torch.sin(2 * math.pi * j * m / b)).sum()
        assert (E @ u - (math.cos(r * w) * u + math.sin(r * w) * v)).abs().max() < 1e-12, "circ"
    S = skew_from_upper(torch.randn(b, b, generator=gen, dtype=torch.float64))
    eye = torch.eye(b, dtype=torch.float64)
    P = (eye - S) @ torch.inverse(eye + S)
    assert (P @ P.T - eye).abs().max() < 1e-12, "cayley P"
    R = rope_matrices(torch.tensor([0.5], dtype=torch.float64), 2)
    y = R @ torch.tensor([1.0, 0.0], dtype=torch.float64)
    assert abs(y[0] - math.cos(0.5)) < 1e-15 and abs(y[1] - math.sin(0.5)) < 1e-15, "pair sign"


def randomize(model, gen, layer_scale):
    """Non-trivial values everywhere: weights/biases/CLS/APE N(0, INIT_STD^2), LayerNorm
    weights 1 + N(0, INIT_STD^2), LayerScale gammas layer_scale * (1 + N(0, INIT_STD^2))."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            r = torch.randn(p.shape, generator=gen) * INIT_STD
            if name.endswith(".gamma"):
                p.copy_(layer_scale * (1 + r))
            elif "norm" in name and name.endswith(".weight"):
                p.copy_(1 + r)
            else:
                p.copy_(r)


def decays(name, p):
    """Weight decay only on linear/conv weights: not biases, norms, gammas, cls, pos."""
    return p.ndim > 1 and name not in ("cls_token", "pos_embed")


def run(model, images, labels):
    """Forward, loss, backward; returns logits, loss, {name: grad}."""
    model.zero_grad()
    logits = model(images)
    loss = F.cross_entropy(logits, labels, label_smoothing=LABEL_SMOOTHING)
    loss.backward()
    return logits.detach(), loss.detach(), {n: p.grad.detach().clone()
                                            for n, p in model.named_parameters()}


def train(model, images, labels):
    """10 torch.optim.AdamW steps on one batch; loss recorded before each update."""
    named = list(model.named_parameters())
    groups = [{"params": [p for n, p in named if decays(n, p)], "weight_decay": WEIGHT_DECAY},
              {"params": [p for n, p in named if not decays(n, p)], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=LR, betas=BETAS, eps=EPS)
    losses, lrs = [], []
    for s in range(STEPS):
        for g in opt.param_groups:
            g["lr"] = lr_at(s)
        opt.zero_grad()
        loss = F.cross_entropy(model(images), labels, label_smoothing=LABEL_SMOOTHING)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        lrs.append(lr_at(s))
    return torch.tensor(losses), torch.tensor(lrs)


def config_json(pool, layer_scale):
    return json.dumps({
        "model": {"width": WIDTH, "depth": DEPTH, "heads": HEADS, "mlp_ratio": MLP_RATIO,
                  "patch_size": PATCH, "img_size": IMG, "in_chans": IN_CHANS,
                  "num_classes": CLASSES, "pool": pool, "layer_scale": layer_scale,
                  "drop_rate": 0, "attn_drop_rate": 0, "drop_path": 0},
        "pe": {"kind": "ape", "ape": "learned"},
        "optim": {"name": "adamw", "lr": LR, "min_lr": MIN_LR, "weight_decay": WEIGHT_DECAY,
                  "betas": list(BETAS), "eps": EPS, "warmup_steps": WARMUP, "warmup_lr": 0,
                  "schedule": "cosine", "clip_grad": 0},
        "train": {"steps": STEPS, "batch_size": BATCH, "accum_steps": 1,
                  "label_smoothing": LABEL_SMOOTHING},
    })


def write_safetensors(path, tensors, metadata):
    """tensors: list of (name, float tensor); written float32 in list order, atomically."""
    header, blobs, offset = {"__metadata__": metadata}, [], 0
    for name, t in tensors:
        data = t.detach().to(torch.float32).contiguous().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * (-len(h) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def make(path, pool, layer_scale, seed):
    gen = torch.Generator().manual_seed(seed)
    model32 = VisionTransformer(pool, layer_scale)
    randomize(model32, gen, layer_scale)
    images32 = torch.randn((BATCH, IN_CHANS, IMG, IMG), generator=gen)
    labels = torch.randint(0, CLASSES, (BATCH,), generator=gen)
    model64 = VisionTransformer(pool, layer_scale).double()
    model64.load_state_dict({k: v.double() for k, v in model32.state_dict().items()})
    params = [(n, p.detach().clone()) for n, p in model32.named_parameters()]

    logits, loss, grads = run(model64, images32.double(), labels)
    logits32, loss32, grads32 = run(model32, images32, labels)
    losses, lrs = train(model64, images32.double(), labels)
    losses32, _ = train(model32, images32, labels)

    def gap(a, b):
        return (a.double() - b.double()).abs().max().item()
    print(f"{path}: {sum(p.numel() for _, p in params)} parameters; float32-vs-float64 torch gap: "
          f"logits {gap(logits32, logits):.2e}, loss {gap(loss32, loss):.2e}, grads "
          f"{max(gap(grads32[n], grads[n]) for n in grads):.2e}, train.losses "
          f"{gap(losses32, losses):.2e}; loss {loss.item():.6f}, final train loss "
          f"{losses[-1].item():.6f}")

    tensors = params + [("input.images", images32), ("input.labels", labels.float()),
                        ("output.logits", logits), ("output.loss", loss.reshape(1))]
    tensors += [("grad." + n, grads[n]) for n, _ in params]
    tensors += [("train.lr", lrs), ("train.losses", losses)]
    write_safetensors(path, tensors, {
        "config": config_json(pool, layer_scale),
        "schedule": SCHEDULE,
        "reference": ("scripts/make_fixtures.py, torch " + torch.__version__ + ": plain-torch "
                      "timm ViT; float64 forward/backward/AdamW from float32 weights and "
                      "inputs; outputs rounded to float32"),
    })


# One tiny ViT per PE variant (width 16, 2 heads -> hd 8, depth 2, patch 4, MLP 4, token or
# avg pool). name, pool, training image size, evaluated image size, pe config section.
PE_FIXTURES = [
    ("rope_axial", "token", 12, 12, {"kind": "rope_axial", "theta": 100}),
    ("rope_mixed", "avg", 12, 12, {"kind": "rope_mixed", "share": "none"}),
    ("rope_mixed_ape", "token", 12, 12, {"kind": "rope_mixed", "ape": "learned"}),
    ("ape_sincos", "token", 12, 12, {"kind": "ape", "ape": "sincos"}),
    ("cayley", "token", 12, 12, {"kind": "cayley", "inner": "mixed", "share": "none"}),
    ("cayley_axial", "avg", 12, 12, {"kind": "cayley", "inner": "axial", "share": "heads"}),
    ("circulant", "token", 12, 12, {"kind": "circulant", "block_size": 4, "share": "layers"}),
    ("liere", "token", 12, 12, {"kind": "liere", "block_size": 8, "share": "all",
                                "positions": "normalized"}),
    ("liere_g4", "avg", 12, 12, {"kind": "liere", "block_size": 4, "share": "none",
                                 "positions": "index"}),
    ("liere_commute", "token", 12, 12, {"kind": "liere_commute", "share": "all",
                                        "positions": "normalized"}),
    ("liere_res", "token", 12, 16, {"kind": "liere", "block_size": 8, "share": "all",
                                    "positions": "normalized"}),
    ("rope_mixed_res", "avg", 8, 12, {"kind": "rope_mixed", "share": "layers",
                                      "positions": "interpolate"}),
    ("rope_mixed_c1", "token", 12, 12, {"kind": "rope_mixed", "coord_dim": 1,
                                        "positions": "normalized"}),
    ("rope_axial_c3", "avg", 12, 12, {"kind": "rope_axial", "coord_dim": 3, "theta": 100}),
    ("liere_c1_res", "token", 8, 12, {"kind": "liere", "block_size": 4, "coord_dim": 1,
                                      "share": "all", "positions": "interpolate"}),
    ("cayley_rgbd", "token", 12, 12, {"kind": "cayley", "coord_dim": 3, "in_chans": 4}),
    ("circulant_rgbd", "avg", 12, 12, {"kind": "circulant", "block_size": 4, "coord_dim": 3,
                                       "in_chans": 4}),
    ("liere_commute_rgbd", "token", 12, 12, {"kind": "liere_commute", "coord_dim": 3,
                                             "share": "all", "positions": "normalized",
                                             "in_chans": 4}),
]


def pe_config_json(pool, img, spec):
    pe = {k: v for k, v in spec.items() if k != "in_chans"}
    pe.setdefault("coord_dim", 2)
    return json.dumps({
        "model": {"width": WIDTH, "depth": DEPTH, "heads": HEADS, "mlp_ratio": MLP_RATIO,
                  "patch_size": PATCH, "img_size": img, "in_chans": spec.get("in_chans", IN_CHANS),
                  "num_classes": CLASSES, "pool": pool, "layer_scale": 0,
                  "drop_rate": 0, "attn_drop_rate": 0, "drop_path": 0},
        "pe": pe,
        "train": {"batch_size": BATCH, "label_smoothing": LABEL_SMOOTHING},
    })


def make_pe(path, pool, img, eval_img, spec, seed):
    """One PE parity fixture: forward/backward only (no training), images at eval_img."""
    gen = torch.Generator().manual_seed(seed)
    pe32 = PositionEncoding(spec, DEPTH, HEADS, WIDTH // HEADS, img // PATCH)
    model32 = VisionTransformer(pool, 0, pe=pe32, img=img)
    randomize(model32, gen, 0)
    pe32.randomize(gen)
    images32 = torch.randn((BATCH, spec.get("in_chans", IN_CHANS), eval_img, eval_img), generator=gen)
    if spec.get("in_chans", IN_CHANS) == 4:
        images32[:, 3] = 0.5 + torch.rand((BATCH, eval_img, eval_img), generator=gen)   # depth
    labels = torch.randint(0, CLASSES, (BATCH,), generator=gen)
    pe64 = PositionEncoding(spec, DEPTH, HEADS, WIDTH // HEADS, img // PATCH)
    model64 = VisionTransformer(pool, 0, pe=pe64, img=img).double()
    model64.load_state_dict({k: v.double() for k, v in model32.state_dict().items()})
    params = [(n, p.detach().clone()) for n, p in model32.named_parameters()]

    logits, loss, grads = run(model64, images32.double(), labels)
    logits32, loss32, grads32 = run(model32, images32, labels)

    def gap(a, b):
        return (a.double() - b.double()).abs().max().item()
    pe_names = [n for n, _ in params if n.startswith("pe.")]
    print(f"{path}: {sum(p.numel() for _, p in params)} parameters; float32-vs-float64 torch gap: "
          f"logits {gap(logits32, logits):.2e}, loss {gap(loss32, loss):.2e}, grads "
          f"{max(gap(grads32[n], grads[n]) for n in grads):.2e}; loss {loss.item():.6f}; "
          f"max |grad| of {', '.join(pe_names) or 'no pe.* tensor'}: "
          f"{max([grads[n].abs().max().item() for n in pe_names] or [0]):.3e}")

    tensors = params + [("input.images", images32), ("input.labels", labels.float()),
                        ("output.logits", logits), ("output.loss", loss.reshape(1))]
    tensors += [("grad." + n, grads[n]) for n, _ in params]
    write_safetensors(path, tensors, {
        "config": pe_config_json(pool, img, spec),
        "reference": ("scripts/make_fixtures.py, torch " + torch.__version__ + ": plain-torch "
                      "timm ViT with the position encoding written from "
                      "docs/position-encodings.md as dense per-patch hd x hd matrices (own "
                      "float64 scaling-and-squaring expm); float64 forward/backward from "
                      "float32 weights and inputs; outputs rounded to float32; images at "
                      f"{eval_img} x {eval_img}, trained grid from model.img_size {img}"),
    })


def main():
    root = os.path.relpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                        "tests", "fixtures"))
    os.makedirs(root, exist_ok=True)
    torch.use_deterministic_algorithms(True)
    make(os.path.join(root, "vit_tiny.safetensors"), "token", 0, seed=1234)
    make(os.path.join(root, "vit_tiny_avg.safetensors"), "avg", 0.1, seed=5678)
    check_reference()
    for i, (name, pool, img, eval_img, spec) in enumerate(PE_FIXTURES):
        make_pe(os.path.join(root, "vit_pe_" + name + ".safetensors"), pool, img, eval_img,
                spec, seed=9000 + i)
    return 0


if __name__ == "__main__":
    sys.exit(main())
