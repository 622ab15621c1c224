#!/usr/bin/env python3
"""timm_name_reference.py - a timm model built by its name, its state dict and its logits,
for the round trip of tests/e2e_timm.c through `timm_convert.py from-timm --model NAME`.

Needs pip's torch, timm and safetensors (scripts/timm_venv.sh makes such a venv):

    VENV/bin/python scripts/timm_name_reference.py OUTDIR NAME... [--num-classes K] [--wait]

For each NAME builds timm.create_model(NAME, img_size=S, num_classes=K) with S = 3 patches
(the name's architecture: width, depth, heads, PE; a small image and head keep it quick),
makes every parameter random (seeded, so the logits depend on each tensor, the per-head
layouts included), and writes
    OUTDIR/NAME.safetensors      the state dict as safetensors.torch.save_file writes it
    OUTDIR/NAME.ref.safetensors  input.images_S (2, 3, S, S), output.logits_S (2, K)
and prints "NAME S" when they are complete. With --wait it then waits until the reader has
removed NAME.safetensors before the next name (one torch start for every name, one
state dict on disk at a time; the reader removes it once converted, so the next model is
made while the last is checked).
"""
import argparse
import os
import sys
import time

import safetensors.torch
import timm
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_timm_fixtures import randomize  # noqa: E402  every parameter random, activations O(1)


def make(name, outdir, K):
    patch = int(name.split("_patch")[1].split("_")[0])
    S = 3 * patch
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    m = timm.create_model(name, pretrained=False, img_size=S, num_classes=K).eval()
    randomize(m, gen)
    sd = {k: v.detach().contiguous() for k, v in m.state_dict().items()}
    safetensors.torch.save_file(sd, os.path.join(outdir, name + ".safetensors"))
    x = torch.randn((2, 3, S, S), generator=gen)
    with torch.no_grad():
        y = m(x).float()
    safetensors.torch.save_file({f"input.images_{S}": x, f"output.logits_{S}": y},
                                os.path.join(outdir, name + ".ref.safetensors"),
                                metadata={"timm_version": timm.__version__})
    print(f"{name}: {len(sd)} tensors, {S} px, logits {tuple(y.shape)} max |{y.abs().max().item():.3g}|",
          file=sys.stderr, flush=True)
    print(f"{name} {S}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("names", nargs="+")
    ap.add_argument("--num-classes", type=int, default=5)
    ap.add_argument("--wait", action="store_true", help="after each name, wait until NAME.safetensors is removed")
    a = ap.parse_args()
    for name in a.names:
        make(name, a.outdir, a.num_classes)
        t0 = time.time()
        while a.wait and os.path.exists(os.path.join(a.outdir, name + ".safetensors")):
            if time.time() - t0 > 600:
                sys.exit(f"timm_name_reference: {name}.safetensors was not taken within 10 minutes")
            time.sleep(0.05)


if __name__ == "__main__":
    main()
