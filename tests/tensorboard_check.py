#!/usr/bin/env python3
"""Reads a vitrain run directory's TensorBoard event files with TensorBoard's own reader
(EventAccumulator, the tensorboard package) and checks them against its metrics.jsonl:
every scalar tag (run_log.h) at exactly the steps metrics.jsonl has records for, once
each, with the same values (to the digits metrics.jsonl prints, and float32 rounding).

    tests/tensorboard_check.py RUN_DIR

Prints one line per mismatch and "tensorboard check: N tags, M points, ok" (exit 0),
or exits 1. Run by tests/e2e_logging.c with the python of a venv holding tensorboard
(scripts/tensorboard_venv.sh).
"""
import json
import os
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def expected(run_dir):
    """{tag: {step: (value, decimals printed or None)}} from metrics.jsonl."""
    want = {}

    def put(tag, step, value, decimals=None):
        if value is None:
            return
        steps = want.setdefault(tag, {})
        if step in steps:
            raise SystemExit("metrics.jsonl has two %s records at step %d" % (tag, step))
        steps[step] = (value, decimals)

    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            s = r["step"]
            if r["kind"] == "train":
                put("train/loss", s, r["loss"])
                put("train/lr", s, r["lr"])
                put("train/grad_norm", s, r["grad_norm"])
                put("train/img_per_s", s, r["img_per_s"], 2)
                put("train/top1", s, r.get("top1"), 4)
                put("train/comm_s", s, r.get("comm_s"), 6)
            elif r["kind"] == "eval":
                cfg = json.load(open(os.path.join(run_dir, "config.json")))
                g = "eval" if r["resolution"] == cfg["model"]["img_size"] else "eval_%dpx" % r["resolution"]
                put(g + "/top1", s, r["top1"], 4)
                put(g + "/top5", s, r["top5"], 4)
                put(g + "/loss", s, r["loss"])
            elif r["kind"] == "epoch":
                put("train/loss_epoch", s, r["loss"])
                put("train/top1_epoch", s, r["top1"], 4)
                put("train/img_per_s_epoch", s, r["img_per_s"], 2)
    return want


def main():
    if len(sys.argv) != 2:
        raise SystemExit("usage: tensorboard_check.py RUN_DIR")
    run_dir = sys.argv[1]
    ea = EventAccumulator(run_dir, size_guidance={"scalars": 0})
    ea.Reload()
    want = expected(run_dir)
    have = ea.Tags()["scalars"]
    bad = 0
    for tag in sorted(set(want) | set(have)):
        if tag not in have or tag not in want:
            print("tag %s: %s" % (tag, "missing from the event files" if tag not in have
                                  else "in the event files, not in metrics.jsonl"))
            bad += 1
            continue
        got = [(e.step, e.value) for e in ea.Scalars(tag)]
        steps = [s for s, _ in got]
        if steps != sorted(want[tag]):
            print("tag %s: steps %s, metrics.jsonl has %s" % (tag, steps, sorted(want[tag])))
            bad += 1
            continue
        for step, value in got:
            w, dec = want[tag][step]
            tol = abs(w) * 2e-7 + (0.5 * 10 ** -dec if dec is not None else 0.0) + 1e-30
            if abs(value - w) > tol:
                print("tag %s step %d: %r in the event files, %r in metrics.jsonl" % (tag, step, value, w))
                bad += 1
    if bad:
        print("tensorboard check: %d mismatches" % bad)
        return 1
    print("tensorboard check: %d tags, %d points, ok" % (len(want), sum(len(v) for v in want.values())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
