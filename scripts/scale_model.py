#!/usr/bin/env python3
"""scale_model.py - the data-parallel scale model of ViT-B/16 on ImageNet-1k (issue 24).

Reads the JSON lines of `build/bench/bench_dist block_backward` (MEASURED: forward and
backward time of ViT-B/16 at 224 per image, and the backward cut at the tape's
gradient-final marks: head, each block, the rest) and prints, as a markdown table, what
follows from them under a MODELLED network: per rank and optimizer step the bytes
sent, the ring all-reduce time at 25 and 100 Gbit/s for 8, 64 and 512 ranks, the part of
it backward hides, the scaling efficiency and the time to train the in1k recipe
(configs/cayley_in1k.json: global batch 128 x 32 = 4096, 300 epochs of 1,281,167 images).

Model (every assumption a flag):
- one rank = one machine like the one measured, running the measured per-image times at
  --threads threads (compute scales linearly with the images it trains), or --speedup
  times faster (a larger node: its per-block backward shrinks by the same factor, so
  less communication hides behind it);
- gradients are fp32, exchanged once per optimizer step, after the last micro-batch's
  backward, in buckets of 25 MiB from the end of the flat buffer (dist.c); bucket b is
  ready when backward passes the mark that finalises its lowest parameter (per-block
  times scaled from the measured batch to the last micro-batch, --micro images per rank,
  or fewer when the rank's share of the step is smaller);
- each bucket is a ring all-reduce: 2 (R - 1) steps of S / R bytes, each step alpha +
  (S / R) / bandwidth (alpha, --alpha-us, the per-message latency of MPI over TCP); buckets
  run one after another on the link, each starting when it is ready and the link is free;
- the step's exposed communication is the all-reduce's end past the end of backward.
Usage: build/bench/bench_dist block_backward > blocks.jsonl
       python3 scripts/scale_model.py blocks.jsonl [--threads 2] [--alpha-us 25] [--micro 64]
"""
import argparse
import json
import math

BUCKET = 25 << 20          # bytes, dist.c VT_DIST_BUCKET_BYTES
GLOBAL_BATCH = 128 * 32    # configs/cayley_in1k.json: batch_size x accum_steps
EPOCHS = 300
IMAGES = 1281167
D, L, MLP = 768, 12, 3072  # ViT-B/16


def vit_b_layout(classes=1000, patch=16, chans=3, tokens=197):
    """Flat parameter offsets (vit.c order): (start of block i for i in 0..L-1, start of
    the final norm, total)."""
    head = D * classes + classes
    norm = 2 * D
    block = 2 * D + 3 * D * D + 3 * D + D * D + D + 2 * D + MLP * D + MLP + D * MLP + D
    pre = D + tokens * D + D * chans * patch * patch + D  # cls, learned pos_embed, patch_embed
    starts = [pre + i * block for i in range(L)]
    norm_at = pre + L * block
    return starts, norm_at, norm_at + norm + head


def simulate(row, ranks, gbit, alpha, micro, speedup):
    starts, norm_at, total = vit_b_layout()
    assert total == row["params"], f"ViT-B/16 layout has {total} parameters, the bench {row['params']}"
    nbytes = 4 * total
    b_meas = row["batch"]
    per_rank = GLOBAL_BATCH / ranks
    last = min(micro, per_rank)              # images of the last micro-batch
    scale = last / b_meas / speedup
    # backward timeline of the last micro-batch: marks at the final norm, then blocks
    # L-1 .. 0 (block_s in that order), then the rest
    t = row["head_s"] * scale
    final_at = [(norm_at, t)]
    for i, dt in enumerate(row["block_s"]):
        t += dt * scale
        final_at.append((starts[L - 1 - i], t))
    bwd = t + row["rest_s"] * scale
    # buckets from the end; ready when the mark covering their lowest offset has passed
    link_free, end = 0.0, 0.0
    bw = gbit * 1e9 / 8
    hi = total
    while hi > 0:
        lo = max(0, hi - BUCKET // 4)
        ready = next((tm for off, tm in final_at if off <= lo), bwd)
        size = 4 * (hi - lo)
        cost = 2 * (ranks - 1) * (alpha + size / ranks / bw)
        start = max(ready, link_free)
        link_free = end = start + cost
        hi = lo
    comm = 2 * (ranks - 1) / ranks * nbytes / bw + 2 * (ranks - 1) * alpha * math.ceil(nbytes / BUCKET)
    exposed = max(0.0, end - bwd)
    per_img = (row["forward_s"] + row["backward_s"]) / b_meas / speedup
    compute = per_rank * per_img
    step = compute + exposed
    steps = EPOCHS * (IMAGES // GLOBAL_BATCH)
    return {
        "send_mb": 2 * (ranks - 1) / ranks * nbytes / 1e6,
        "comm_s": comm, "bwd_window_s": bwd, "exposed_s": exposed, "compute_s": compute,
        "eff": compute / step, "days": steps * step / 86400.0, "grad_mb": nbytes / 1e6,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("jsonl")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--alpha-us", type=float, default=25.0)
    ap.add_argument("--micro", type=int, default=64)
    ap.add_argument("--speedup", default="1,32", help="comma-separated node speeds over the measured one")
    a = ap.parse_args()
    rows = [json.loads(l) for l in open(a.jsonl) if '"block_backward"' in l]
    row = next((r for r in rows if r["threads"] == a.threads), None)
    if row is None:
        raise SystemExit(f"{a.jsonl}: no block_backward row with threads = {a.threads}")
    per_img = (row["forward_s"] + row["backward_s"]) / row["batch"]
    print(f"Measured ({row['cpu']}, {row['isa']}, {a.threads} threads, batch {row['batch']}): "
          f"forward {row['forward_s']:.3f} s, backward {row['backward_s']:.3f} s, "
          f"{1 / per_img:.2f} training images/s; per block backward "
          f"{sum(row['block_s']) / len(row['block_s']):.3f} s (mean of {len(row['block_s'])}).")
    print(f"Modelled: ring all-reduce, alpha {a.alpha_us:g} us per message, buckets of 25 MiB, "
          f"last micro-batch {a.micro} images per rank, global batch {GLOBAL_BATCH}, "
          f"{EPOCHS} epochs.")
    for sp in [float(x) for x in a.speedup.split(",")]:
        print(f"\nOne rank = {'the measured machine' if sp == 1 else f'a node {sp:g}x the measured one (modelled)'}:\n")
        print("| ranks | link | sent per rank per step | all-reduce | backward window | exposed | "
              "compute per step | efficiency | time to train |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for ranks in (8, 64, 512):
            for gbit in (25, 100):
                m = simulate(row, ranks, gbit, a.alpha_us * 1e-6, a.micro, sp)
                print(f"| {ranks} | {gbit} Gbit/s | {m['send_mb']:.0f} MB | {m['comm_s']:.3f} s | "
                      f"{m['bwd_window_s']:.3f} s | {m['exposed_s']:.3f} s | {m['compute_s']:.2f} s | "
                      f"{100 * m['eff']:.1f}% | {m['days']:.1f} days |")


if __name__ == "__main__":
    main()
