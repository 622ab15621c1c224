#!/usr/bin/python3
"""make_fixtures.py - PyTorch reference fixtures for tests/test_parity.c.

Run from the repository root with Debian's torch (python3-torch 1.13):

    /usr/bin/python3 scripts/make_fixtures.py

Writes tests/fixtures/vit_tiny.safetensors (pool token) and
tests/fixtures/vit_tiny_avg.safetensors (pool avg, LayerScale 0.1). The outputs are
committed, so CI never needs torch. The model is written here in plain torch from the
spec (timm VisionTransformer semantics, docs/position-encodings.md section 4), not
imported from timm:

    x = conv_PxP_stride_P(images).flatten(2).transpose(1, 2)        (B, N-1, D)
    x = cat(cls_token, x) + pos_embed                                 (B, N, D)
    per block: x = x + ls1 * proj(attn(norm1(x)))
               x = x + ls2 * fc2(gelu(fc1(norm2(x))))                 (exact erf GELU)
    attn: qkv Linear(D, 3D) rows [q; k; v], head h = rows [h hd, (h+1) hd) of each,
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

    def forward(self, x):
        B, N, D = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.heads, self.hd).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]                      # (B, H, N, hd)
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

    def forward(self, x):
        x = x + self.ls1(self.attn(self.norm1(x)))
        return x + self.ls2(self.mlp(self.norm2(x)))


class PatchEmbed(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Conv2d(IN_CHANS, WIDTH, PATCH, stride=PATCH)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)         # (B, N-1, D), row-major grid


class VisionTransformer(nn.Module):
    def __init__(self, pool, layer_scale):
        super().__init__()
        n_patches = (IMG // PATCH) ** 2
        self.pool = pool
        self.cls_token = nn.Parameter(torch.zeros(1, 1, WIDTH))
        self.pos_embed = nn.Parameter(torch.zeros(1, 1 + n_patches, WIDTH))
        self.patch_embed = PatchEmbed()
        self.blocks = nn.ModuleList(
            [Block(WIDTH, HEADS, MLP_RATIO, layer_scale) for _ in range(DEPTH)])
        if pool == "token":
            self.norm = nn.LayerNorm(WIDTH, eps=LN_EPS)
        else:
            self.fc_norm = nn.LayerNorm(WIDTH, eps=LN_EPS)
        self.head = nn.Linear(WIDTH, CLASSES)

    def forward(self, images):
        x = self.patch_embed(images)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        for blk in self.blocks:
            x = blk(x)
        if self.pool == "token":
            return self.head(self.norm(x)[:, 0])
        return self.head(self.fc_norm(x[:, 1:].mean(dim=1)))


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


def main():
    root = os.path.relpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                        "tests", "fixtures"))
    os.makedirs(root, exist_ok=True)
    torch.use_deterministic_algorithms(True)
    make(os.path.join(root, "vit_tiny.safetensors"), "token", 0, seed=1234)
    make(os.path.join(root, "vit_tiny_avg.safetensors"), "avg", 0.1, seed=5678)
    return 0


if __name__ == "__main__":
    sys.exit(main())
