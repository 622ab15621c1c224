#!/usr/bin/python3
"""Training curves of one or several vitrain runs in one PNG.

    scripts/plot_runs.py RUN_DIR [RUN_DIR ...] [-o curves.png] [--x step|epoch]

Reads each run directory's metrics.jsonl (train records every train.log_every steps, the
per-epoch means, evaluations) and draws four panels: training loss (per logged step,
thin, and the epoch means, dots), val top-1 at the training size (and the epoch's
training top-1, dashed, where the labels allow it), learning rate, images/s. Each run is
one colour, named by its directory. Needs matplotlib (Debian's python3-matplotlib,
installed by scripts/deps.sh; run as /usr/bin/python3). Exit 2 for a directory that is
not a run directory or holds no records yet.
"""
import argparse
import json
import os
import sys


def fail(msg):
    print("plot_runs: " + msg, file=sys.stderr)
    sys.exit(2)


def load(run_dir):
    path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.isfile(path):
        fail("%s: no metrics.jsonl (not a vitrain run directory?)" % run_dir)
    rows = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            try:
                rows.append(json.loads(line))
            except ValueError:
                fail("%s line %d: not a JSON record: %.60s" % (path, n, line.strip()))
    if not any(r.get("kind") == "train" for r in rows):
        fail("%s: no train records yet" % path)
    size = None
    cfg_path = os.path.join(run_dir, "config.json")
    if os.path.isfile(cfg_path):
        with open(cfg_path) as f:
            size = json.load(f)["model"]["img_size"]
    return rows, size


def series(rows, kind, key, x, size=None):
    xs, ys = [], []
    for r in rows:
        if r.get("kind") != kind or r.get(key) is None:
            continue
        if kind == "eval" and size is not None and r.get("resolution") != size:
            continue
        xs.append(r[x])
        ys.append(r[key])
    return xs, ys


def main():
    ap = argparse.ArgumentParser(description="Training curves of vitrain runs.")
    ap.add_argument("runs", nargs="+", metavar="RUN_DIR")
    ap.add_argument("-o", "--output", default="curves.png", help="PNG to write (default curves.png)")
    ap.add_argument("--x", choices=("step", "epoch"), default="step",
                    help="horizontal axis: optimizer steps (default) or epochs (the epoch and "
                         "eval records; train records by the epoch they belong to)")
    a = ap.parse_args()
    runs = [(d, *load(d)) for d in a.runs]

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(2, 2, figsize=(12, 8))
    (loss_ax, acc_ax), (lr_ax, speed_ax) = ax
    names = [os.path.normpath(d) for d, _, _ in runs]
    for i, (d, rows, size) in enumerate(runs):
        c = "C%d" % (i % 10)
        name = names[i]
        loss_ax.plot(*series(rows, "train", "loss", a.x), color=c, lw=0.8, alpha=0.6, label=name)
        loss_ax.plot(*series(rows, "epoch", "loss", a.x), "o-", color=c, ms=4,
                     label=name + " (epoch mean)")
        acc_ax.plot(*series(rows, "eval", "top1", a.x, size), "o-", color=c, ms=4, label=name + " (val)")
        xs, ys = series(rows, "epoch", "top1", a.x)
        if xs:
            acc_ax.plot(xs, ys, "--", color=c, lw=1, label=name + " (train)")
        lr_ax.plot(*series(rows, "train", "lr", a.x), color=c, label=name)
        speed_ax.plot(*series(rows, "train", "img_per_s", a.x), color=c, lw=0.8, label=name)
    xlabel = "optimizer step" if a.x == "step" else "epoch"
    for axis, title in ((loss_ax, "training loss"), (acc_ax, "top-1 (%)"), (lr_ax, "learning rate"),
                        (speed_ax, "images/s")):
        axis.set_title(title)
        axis.set_xlabel(xlabel)
        axis.grid(alpha=0.3)
        axis.legend(fontsize=7)
    loss_ax.set_yscale("log")
    fig.tight_layout()
    try:
        fig.savefig(a.output, dpi=100)
    except OSError as e:
        fail("cannot write %s: %s" % (a.output, e.strerror))
    print("plot_runs: %d run%s drawn to %s" % (len(runs), "" if len(runs) == 1 else "s", a.output))


if __name__ == "__main__":
    main()
