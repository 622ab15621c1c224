#!/usr/bin/python3
"""bench_torch.py - the PyTorch reference for bench/bench_train.c (run with a python3 that
has torch: Debian's python3-torch as /usr/bin/python3, or pip's, e.g. a venv's python3).
Not a test: prints figures only; never needed by `make test`.

Same models, batches, thread counts, step and rows as bench_train: ViT-Ti/4 at 32 (batch
128, 10 classes), ViT-S/16 at 224 (batch 64), ViT-B/16 at 224 (batch 32), training
(forward, cross-entropy, backward, clip_grad_norm_ 1.0, AdamW) and inference (no_grad),
at 1 and 2 threads (torch.set_num_threads, and OMP_NUM_THREADS / OPENBLAS_NUM_THREADS for
the BLAS), synthetic data, each in fp32 and in bf16: the forward and the loss under
torch.autocast("cpu", dtype=torch.bfloat16), parameters, gradients and AdamW in float32,
as a PyTorch user switches mixed precision on (oneDNN runs the bf16 products).
The ViT is written inline with timm VisionTransformer semantics (conv patch embedding,
class token, learned position embedding, pre-norm blocks with qkv bias, exact GELU,
LayerNorm eps 1e-6, class-token pooling, linear head); no timm needed.

stdout: JSON lines in bench_train's format ("bench": "train" | "infer", "img_per_s",
"step_s", "gflop_per_img" (the same analytic count as vt_vit_flops, x3 for training),
"rss_mb" = the child's peak resident set, and "mfu" when --peak1/--peak2 give the FMA
peak in GFLOP/s measured by bench_train for 1/2 threads, for either precision); stderr: a
readable table.
Each model and thread count runs in its own subprocess, so rss_mb is per model.
Two warm-up steps then 3 timed steps (2 for ViT-B training); VT_BENCH_QUICK=1: one timed
step with batch sizes divided by 8.
Debian's torch calls whatever libblas.so.3 the alternatives system selects; the netlib
reference BLAS (the default when OpenBLAS is not installed) runs at a few GFLOP/s. For the
intended comparison install OpenBLAS (apt-get install libopenblas0-openmp): its OpenMP
build is loaded whenever present (unless LD_LIBRARY_PATH is set, which then decides),
and each child's BLAS runs on the child's thread count. "blas" in each JSON line names
the library the child actually loaded.
Usage: python3 scripts/bench_torch.py [--peak1 G] [--peak2 G] [--vs BENCH_TRAIN [--rounds R]]
       [substring of a row "train/<model>/<precision>" or "infer/<model>/<precision>"]
--vs build/bench/bench_train: the same-period comparison. Before each PyTorch child, the
same model and thread count runs in a bench_train child (BENCH_TRAIN --child, its rss_mb
from wait4), so the two sides of each pair are measured minutes apart, not a whole
benchmark apart (this VM's speed drifts 5-8% within an hour). Each model runs R rounds
(default 1; only with --vs) of (ours 1t, torch 1t, ours 2t, torch 2t); one "compare"
JSON line per model gives each round's ratio of best images/s (each side at its better
thread count) and their median. Without --peak1/--peak2 our rows carry mfu 0 (no MFU).
"""
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

OPENBLAS_OPENMP = "/usr/lib/x86_64-linux-gnu/openblas-openmp"

# bench_train.c's cases, in its order (--vs runs `bench_train --child <index>`)
MODELS = [
    # name, width, depth, heads, img, patch, batch, classes
    ("vit_ti4_32", 192, 12, 3, 32, 4, 128, 10),
    ("vit_s16_224", 384, 12, 6, 224, 16, 64, 1000),
    ("vit_b16_224", 768, 12, 12, 224, 16, 32, 1000),
]
# name, width, depth, heads, img, patch, batch, classes, train, bf16
CASES = [m + (train, bf16) for train in (True, False) for m in MODELS for bf16 in (False, True)]


def row_name(case):
    return "%s/%s/%s" % ("train" if case[8] else "infer", case[0], "bf16" if case[9] else "fp32")


def flops_per_image(D, L, img, P, classes, mlp=4):
    """Forward FLOPs, the count of vt_vit_flops (GEMMs and attention products)."""
    Np = (img // P) ** 2
    N = Np + 1
    f = 2.0 * Np * D * 3 * P * P
    block = 2.0 * N * D * 3 * D + 4.0 * N * N * D + 2.0 * N * D * D + 4.0 * N * D * mlp * D
    return f + L * block + 2.0 * D * classes


def run_child(idx, threads, quick):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    name, D, L, H, img, P, batch, classes, train, bf16 = CASES[idx]
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    B = max(1, batch // 8) if quick else batch

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(D, 3 * D)
            self.proj = nn.Linear(D, D)

        def forward(self, x):
            b, n, _ = x.shape
            qkv = self.qkv(x).reshape(b, n, 3, H, D // H).permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            a = (q @ k.transpose(-2, -1)) * (D // H) ** -0.5
            a = a.softmax(dim=-1)
            x = (a @ v).transpose(1, 2).reshape(b, n, D)
            return self.proj(x)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1 = nn.LayerNorm(D, eps=1e-6)
            self.attn = Attention()
            self.norm2 = nn.LayerNorm(D, eps=1e-6)
            self.fc1 = nn.Linear(D, 4 * D)
            self.fc2 = nn.Linear(4 * D, D)

        def forward(self, x):
            x = x + self.attn(self.norm1(x))
            return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))

    class ViT(nn.Module):
        def __init__(self):
            super().__init__()
            self.patch_embed = nn.Conv2d(3, D, P, P)
            self.cls_token = nn.Parameter(torch.zeros(1, 1, D))
            self.pos_embed = nn.Parameter(torch.randn(1, (img // P) ** 2 + 1, D) * 0.02)
            self.blocks = nn.Sequential(*[Block() for _ in range(L)])
            self.norm = nn.LayerNorm(D, eps=1e-6)
            self.head = nn.Linear(D, classes)

        def forward(self, x):
            x = self.patch_embed(x).flatten(2).transpose(1, 2)
            x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
            x = self.norm(self.blocks(x))
            return self.head(x[:, 0])

    model = ViT()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.05)
    x = torch.rand(B, 3, img, img) * 2 - 1
    y = torch.randint(0, classes, (B,))
    warm, timed = (2, 1) if quick else (2, 2 if train and D >= 768 else 3)
    total = 0.0
    loss = 0.0
    for it in range(warm + timed):
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            if train:
                opt.zero_grad(set_to_none=True)
                l = F.cross_entropy(model(x), y)
            else:
                with torch.no_grad():
                    loss = float(model(x)[0, 0])
        if train:
            l.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            loss = float(l)
        if it >= warm:
            total += time.perf_counter() - t0
    ips = B * timed / total
    blas = "?"
    with open("/proc/self/maps") as maps:
        for line in maps:
            if "libblas" in line or "openblas" in line:
                blas = line.split()[-1]
                break
    gf = flops_per_image(D, L, img, P, classes) * (3 if train else 1) * 1e-9
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps({"bench": "train" if train else "infer", "model": name,
                      "precision": "bf16" if bf16 else "fp32", "img": img,
                      "batch": B, "threads": threads, "isa": "torch-" + torch.__version__,
                      "img_per_s": round(ips, 3), "step_s": round(total / timed, 4),
                      "gflop_per_img": round(gf, 3), "loss": round(loss, 4),
                      "rss_mb": round(rss, 1), "blas": blas}))


def report(rec, threads, tag):
    """Print a child's JSON record on stdout and its table row on stderr (tag ends it);
    the MFU column is empty without a peak (no mfu, or bench_train's 0)."""
    case = rec["model"]
    mfu = "%5.1f%%" % (100 * rec["mfu"]) if rec.get("mfu") else ""
    print(json.dumps(rec), flush=True)
    print("  %-14s %-6s %-9s %5d    %d    %8.2f  %6s  %7.0f%s" % (
        case, rec["bench"], rec.get("precision", "fp32"), rec["batch"], threads, rec["img_per_s"], mfu,
        rec["rss_mb"], tag),
        file=sys.stderr, flush=True)


def run_ours(bench, idx, threads, peak, quick):
    """One bench_train child: its JSON record with rss_mb (from wait4), or None (reason on
    stderr). Its stderr goes to a file, so a chatty child cannot block on a full pipe."""
    with tempfile.TemporaryFile(mode="w+") as err:
        p = subprocess.Popen([bench, "--child", str(idx), str(threads), "%.6f" % peak, "1" if quick else "0"],
                             stdout=subprocess.PIPE, stderr=err, text=True)
        out = p.stdout.read()
        p.stdout.close()
        _, status, ru = os.wait4(p.pid, 0)
        code = os.waitstatus_to_exitcode(status)
        if code != 0 or not out.strip():
            err.seek(0)
            print("  ours %s (%d threads) failed (exit %d): %s" % (CASES[idx][0], threads, code,
                                                                   err.read().strip()[-400:]), file=sys.stderr)
            return None
    # the child leaves its object open for the parent's fields (bench_train.c)
    return json.loads(out.strip().splitlines()[-1] + ',"rss_mb":%.1f}' % (ru.ru_maxrss / 1024.0))


def run_torch(idx, threads, quick, peaks):
    """One PyTorch child: its JSON record (with mfu when peaks has this thread count), or
    None (reason on stderr)."""
    case = CASES[idx]
    # The thread count binds the BLAS too: OpenBLAS's pthread build ignores
    # torch.set_num_threads and would run every GEMM of a "1 thread" child on
    # all cores (seen on this machine: MFU over 100% of the 1-thread peak).
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    # torch is built with OpenMP, so OpenBLAS's OpenMP build (one shared thread
    # pool) is its best BLAS; alternatives may select the pthread build instead,
    # which fights torch's own threads at 2 (Ti/4: 32 img/s against 50).
    if "LD_LIBRARY_PATH" not in env and os.path.isdir(OPENBLAS_OPENMP):
        env["LD_LIBRARY_PATH"] = OPENBLAS_OPENMP
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", str(idx),
                        str(threads), "1" if quick else "0"],
                       capture_output=True, text=True, env=env)
    if r.returncode != 0 or not r.stdout.strip():
        print("  %s (%d threads) failed: %s" % (case[0], threads, r.stderr.strip()[-400:]),
              file=sys.stderr)
        return None
    rec = json.loads(r.stdout.strip().splitlines()[-1])
    if threads in peaks:
        rec["mfu"] = round(rec["gflop_per_img"] * rec["img_per_s"] / peaks[threads], 4)
    return rec


def main():
    args = sys.argv[1:]
    if args and args[0] == "--child":
        run_child(int(args[1]), int(args[2]), args[3] == "1")
        return
    peaks = {}
    filt = None
    vs = None
    rounds = 1
    i = 0
    while i < len(args):
        if args[i] in ("--peak1", "--peak2", "--vs", "--rounds"):
            if i + 1 == len(args):
                sys.exit("bench_torch: %s needs a value" % args[i])
            try:
                if args[i] == "--vs":
                    vs = args[i + 1]
                elif args[i] == "--rounds":
                    rounds = int(args[i + 1])
                else:
                    peaks[int(args[i][-1])] = float(args[i + 1])
            except ValueError:
                sys.exit("bench_torch: %s %r is not a number" % (args[i], args[i + 1]))
            i += 2
        else:
            filt = args[i]
            i += 1
    if rounds < 1:
        sys.exit("bench_torch: --rounds %d: need at least 1" % rounds)
    if vs is None and rounds != 1:
        sys.exit("bench_torch: --rounds needs --vs (rounds alternate our runs with PyTorch's)")
    if vs is not None and not os.access(vs, os.X_OK):
        sys.exit("bench_torch: --vs %s is not an executable (build it: make build/bench/bench_train)" % vs)
    quick = os.environ.get("VT_BENCH_QUICK", "0") not in ("", "0")
    print("bench_torch%s" % (" (quick)" if quick else ""), file=sys.stderr)
    print("  model          mode   precision batch threads   img/s     MFU   RSS MB", file=sys.stderr)
    for idx, case in enumerate(CASES):
        row = row_name(case)
        if filt and filt not in row:
            continue
        ratios, best = [], {"ours": [], "torch": []}
        for _ in range(rounds):
            got = {"ours": {}, "torch": {}}
            for threads in (1, 2):
                if vs is not None:
                    rec = run_ours(vs, idx, threads, peaks.get(threads, 0.0), quick)
                    if rec is not None:
                        got["ours"][threads] = rec
                        report(rec, threads, "  ours")
                rec = run_torch(idx, threads, quick, peaks)
                if rec is not None:
                    got["torch"][threads] = rec
                    report(rec, threads, "  torch" if vs is not None else "")
            if vs is not None and got["ours"] and got["torch"]:
                for side in best:
                    best[side].append(max(r["img_per_s"] for r in got[side].values()))
                ratios.append(best["ours"][-1] / best["torch"][-1])
        if ratios:
            print(json.dumps({"bench": "compare", "model": case[0], "mode": row.split("/")[0],
                              "precision": row.split("/")[2],
                              "ours_best_img_per_s": best["ours"], "torch_best_img_per_s": best["torch"],
                              "ratios": [round(r, 3) for r in ratios],
                              "ratio_median": round(statistics.median(ratios), 3)}), flush=True)
            print("  %-14s %-6s %-4s ours / torch (best thread count each) per round: %s, median %.2f" % (
                case[0], row.split("/")[0], row.split("/")[2], " ".join("%.2f" % r for r in ratios),
                statistics.median(ratios)),
                file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
