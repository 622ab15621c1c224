#!/usr/bin/python3
"""build_results.py - turns the run directories of scripts/reproduce.sh into one study table.

    build_results.py TABLE --runs DIR --out OUT --family F --seeds 0,1,2 --variants a,b,...
                     --command CMD --wall SECONDS --git REV --machine MODEL --cores N
                     [--threads N] [--jobs N] [--eval-samples N]

Reads DIR/VARIANT/seedN/{metrics.jsonl, config.json, eval_resolution.jsonl,
eval_positions_*.jsonl, eval_shuffle.jsonl} and writes
  OUT/TABLE.md    the table: mean +- sample std (n - 1) over seeds, best mean in bold, and
                  the provenance (command, machine, cores, wall time, git revision of the
                  tables and evaluations, and the revisions that trained the runs: each run's
                  REVISION file, written by reproduce.sh)
  OUT/TABLE.json  the same numbers per seed, with the provenance
  OUT/*.png       classification: classification_curves.png (train loss and val top-1 per
                  PE, mean over seeds); resolution: resolution.png (val top-1 against the
                  evaluation size per PE); positions: positions.png (one panel per PE, a
                  line per position mode); shuffle: shuffle.png (top-1 before and after);
                  sharing: sharing_curves.png
Consistency checks (an error, not a warning: they fail only through a bug or a stale run
directory): an evaluation of the whole val split at the training size equals the training's
final evaluation; at the training size interpolate equals index, normalized to the evaluated
grid equals normalized, and the interpolated sin-cos table equals the recomputed one (the
same coordinates, so the same top-1 and loss to the last printed digit).
The papers' own figures are not listed: their settings (ImageNet / CIFAR-100, ViT-B or
ViT-S, hundreds of epochs) do not match the families reproduced here, and we quote no
number we cannot check against the paper. Plots use matplotlib's Agg backend (no display).
"""
import argparse
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend choice)

TITLES = {
    "classification": "Classification accuracy per position encoding",
    "resolution": "Accuracy at other evaluation resolutions (no fine-tuning)",
    "positions": "Position modes at other evaluation resolutions (no fine-tuning)",
    "shuffle": "Patch shuffle: accuracy with each image's patches permuted",
    "sharing": "LieRE generator sharing",
}
POS_MODES = ("index", "interpolate", "normalized")
POS_LABELS = {
    "index": "index",
    "interpolate": "interpolate",
    "normalized": "normalized",
    "normalized_eval_grid": "normalized to the evaluated grid",
    "learned_resampled": "learned, resampled",
    "sincos_recomputed": "sin-cos, recomputed",
    "sincos_interpolated": "sin-cos, interpolated",
}
SHARE_NAMES = {
    "liere_share_none": "per layer and head (share none)",
    "liere_share_layers": "per head, shared by layers (share layers)",
    "liere_share_heads": "per layer, shared by heads (share heads)",
    "liere": "one set for the model (share all)",
}


def fail(msg):
    print("build_results: " + msg, file=sys.stderr)
    sys.exit(1)


def read_jsonl(path):
    if not os.path.exists(path):
        fail("%s not found (did the run or evaluation finish?)" % path)
    rows = []
    with open(path) as f:
        for i, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rows.append(json.loads(line))
            except ValueError as e:
                fail("%s line %d: not JSON (%s)" % (path, i, e))
    return rows


def mean_std(xs):
    """Mean and sample standard deviation (0 for a single value)."""
    m = sum(xs) / len(xs)
    if len(xs) < 2:
        return m, 0.0
    return m, math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def betainc(a, b, x):
    """Regularised incomplete beta I_x(a, b) (continued fraction, Numerical Recipes 6.4)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    if x > (a + 1.0) / (a + b + 2.0):
        return 1.0 - betainc(b, a, 1.0 - x)
    lbeta = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(1.0 - x)
    tiny, c, d = 1e-300, 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return math.exp(lbeta) * h / a


def t_pvalue(t, df):
    """Two-sided p-value of Student's t with df degrees of freedom."""
    if math.isinf(t):
        return 0.0
    return betainc(df / 2.0, 0.5, df / (df + t * t))


def welch(xs, ys):
    """Welch's t-test of mean(xs) - mean(ys): (difference, t, df, two-sided p)."""
    (mx, sx), (my, sy) = mean_std(xs), mean_std(ys)
    vx, vy = sx * sx / len(xs), sy * sy / len(ys)
    d = mx - my
    if vx + vy == 0.0:
        return d, (math.inf if d else 0.0), float(len(xs) + len(ys) - 2), (0.0 if d else 1.0)
    df = (vx + vy) ** 2 / (vx * vx / (len(xs) - 1) + vy * vy / (len(ys) - 1))
    t = d / math.sqrt(vx + vy)
    return d, t, df, t_pvalue(abs(t), df)


def paired(xs, ys):
    """Paired t-test of the per-seed differences xs - ys: (mean difference, t, df, p)."""
    ds = [x - y for x, y in zip(xs, ys)]
    m, sd = mean_std(ds)
    if sd == 0.0:
        return m, (math.inf if m else 0.0), float(len(ds) - 1), (0.0 if m else 1.0)
    t = m / (sd / math.sqrt(len(ds)))
    return m, t, float(len(ds) - 1), t_pvalue(abs(t), len(ds) - 1)


def verdict(d, p, alpha=0.05):
    """The claimed direction is d > 0."""
    if p < alpha:
        return "agree" if d > 0 else "disagree"
    return "not resolved"


def fmt_test(d, t, df, p):
    return "%+.2f | %s | %.1f | %s" % (d, "inf" if math.isinf(t) else "%.2f" % t, df,
                                       "<0.001" if p < 0.001 else "%.3f" % p)


# The papers' resolution claims, as "A above B at sizes above the training size".
CLAIMS = [
    ("rope_mixed", "ape", "RoPE-ViT: RoPE-Mixed extrapolates better than APE"),
    ("rope_axial", "ape", "RoPE-ViT: RoPE-Axial extrapolates better than APE"),
    ("rope_mixed", "rope_axial", "RoPE-ViT: RoPE-Mixed above RoPE-Axial"),
    ("cayley", "rope_mixed", "STRING: Cayley-STRING above RoPE (Mixed)"),
    ("circulant", "rope_mixed", "STRING: Circulant-STRING above RoPE (Mixed)"),
    ("liere", "rope_mixed", "LieRE: LieRE generalises to higher resolutions better than RoPE-Mixed"),
    ("liere", "ape", "LieRE: LieRE above APE at higher resolutions"),
    ("liere", "liere_commute", "LieRE: dense generators above commuting ones"),
]


def claims_md(rows, sizes, train_size, heading="The papers' claims at larger sizes", intro=""):
    """Welch tests (n = seeds per PE) of each claim at every size above the training size."""
    by = {r["variant"]: r for r in rows}
    md = ["", "## " + heading, "",
          intro + "Difference of the mean top-1 (first PE minus second, points), Welch's t-test over the seeds "
          "of each PE (two-sided p). Verdict at p < 0.05: agree (difference in the claimed direction), "
          "disagree (opposite direction), else not resolved. p-values are per cell, not corrected for "
          "the number of cells.", "",
          "| claim | size | difference | t | df | p | verdict |", "|---|---|---|---|---|---|---|"]
    out = []
    for a, b, claim in CLAIMS:
        if a not in by or b not in by:
            continue
        for S in (S for S in sizes if S > train_size):
            d, t, df, p = welch(by[a]["top1"][str(S)], by[b]["top1"][str(S)])
            v = verdict(d, p)
            md.append("| %s (%s vs %s) | %d | %s | %s |" % (claim, a, b, S, fmt_test(d, t, df, p), v))
            out.append({"claim": claim, "a": a, "b": b, "size": S, "difference": d, "t": t, "df": df,
                        "p": p, "verdict": v})
    return md, out


def fmt(xs, bold=False, digits=2):
    m, s = mean_std(xs)
    t = "%.*f +- %.*f" % (digits, m, digits, s)
    return "**%s**" % t if bold else t


def run_dir(a, v, s):
    return os.path.join(a.runs, v, "seed%d" % s)


def training_revisions(a, variants):
    """'N runs at REV' per revision that trained the table's runs (REVISION files)."""
    count = {}
    for v in variants:
        for s in a.seeds:
            path = os.path.join(run_dir(a, v, s), "REVISION")
            rev = open(path).read().strip() if os.path.exists(path) else None
            count[rev] = count.get(rev, 0) + 1
    parts = ["%d at %s" % (n, rev) for rev, n in sorted((r, n) for r, n in count.items() if r)]
    if None in count:
        parts.append("%d with no REVISION file (trained by a reproduce.sh that did not record it)" % count[None])
    return "; ".join(parts)


def final_eval(a, v, s):
    """The last evaluation at the training size in metrics.jsonl, and the run's config."""
    d = run_dir(a, v, s)
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    size = cfg["model"]["img_size"]
    evals = [r for r in read_jsonl(os.path.join(d, "metrics.jsonl"))
             if r.get("kind") == "eval" and r.get("resolution") == size]
    if not evals:
        fail("%s/metrics.jsonl has no evaluation at %dpx" % (d, size))
    return evals[-1], cfg


def curves(a, v):
    """Per seed: (train steps, losses), (eval epochs, top-1) at the training size."""
    out = []
    for s in a.seeds:
        d = run_dir(a, v, s)
        _, cfg = final_eval(a, v, s)
        rows = read_jsonl(os.path.join(d, "metrics.jsonl"))
        tr = [(r["step"], r["loss"]) for r in rows if r.get("kind") == "train"]
        ev = [(r["epoch"], r["top1"]) for r in rows
              if r.get("kind") == "eval" and r.get("resolution") == cfg["model"]["img_size"]]
        out.append((tr, ev))
    return out


def mean_curve(series):
    """Mean over seeds of (x, y) series, on the x values all seeds share."""
    common = set(x for x, _ in series[0])
    for s in series[1:]:
        common &= set(x for x, _ in s)
    xs = sorted(common)
    return xs, [sum(dict(s)[x] for s in series) / len(series) for x in xs]


def plot_curves(a, variants, labels, path, title):
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for v in variants:
        cs = curves(a, v)
        x, y = mean_curve([c[0] for c in cs])
        ax1.plot(x, y, label=labels.get(v, v), linewidth=1.2)
        x, y = mean_curve([c[1] for c in cs])
        ax2.plot(x, y, marker="o", markersize=3, label=labels.get(v, v), linewidth=1.2)
    ax1.set_xlabel("optimizer step")
    ax1.set_ylabel("training loss (mean over seeds)")
    ax2.set_xlabel("epoch")
    ax2.set_ylabel("val top-1 % (mean over seeds)")
    ax2.legend(fontsize=7)
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def table_classification(a, variants, labels):
    rows, best = [], None
    for v in variants:
        top1, top5, wall = [], [], []
        for s in a.seeds:
            e, _ = final_eval(a, v, s)
            top1.append(e["top1"])
            top5.append(e["top5"])
            last = read_jsonl(os.path.join(run_dir(a, v, s), "metrics.jsonl"))[-1]
            wall.append(last.get("wall_s", 0.0))
        rows.append({"variant": v, "label": labels.get(v, v), "top1": top1, "top5": top5,
                     "train_wall_s": wall, "top1_mean": mean_std(top1)[0],
                     "top1_std": mean_std(top1)[1], "top5_mean": mean_std(top5)[0],
                     "top5_std": mean_std(top5)[1]})
    best = max(r["top1_mean"] for r in rows)
    best5 = max(r["top5_mean"] for r in rows)
    md = ["| %s | top-1 %% | top-5 %% | training time (s, mean) |" % ("sharing" if labels else "PE"),
          "|---|---|---|---|"]
    for r in rows:
        md.append("| %s | %s | %s | %.0f |" % (r["label"], fmt(r["top1"], r["top1_mean"] == best),
                                              fmt(r["top5"], r["top5_mean"] == best5),
                                              mean_std(r["train_wall_s"])[0]))
    return rows, md


def table_resolution(a, variants):
    rows, sizes, train_size, n_eval = [], None, None, set()
    for v in variants:
        per = {}
        for s in a.seeds:
            evs = read_jsonl(os.path.join(run_dir(a, v, s), "eval_resolution.jsonl"))
            _, cfg = final_eval(a, v, s)
            train_size = cfg["model"]["img_size"]
            check_own_size(a, v, s, "resolution", {e["resolution"]: e for e in evs})
            n_eval.update(e["n"] for e in evs)
            for e in evs:
                per.setdefault(e["resolution"], []).append(e["top1"])
        got = sorted(per)
        if sizes is None:
            sizes = got
        elif got != sizes:
            fail("%s was evaluated at %s, the other PEs at %s" % (v, got, sizes))
        for S in sizes:
            if len(per[S]) != len(a.seeds):
                fail("%s at %dpx: %d results for %d seeds" % (v, S, len(per[S]), len(a.seeds)))
        rows.append({"variant": v, "top1": {str(S): per[S] for S in sizes},
                     "top1_mean": {str(S): mean_std(per[S])[0] for S in sizes},
                     "top1_std": {str(S): mean_std(per[S])[1] for S in sizes}})
    best = {S: max(r["top1_mean"][str(S)] for r in rows) for S in sizes}
    md = ["Val top-1 %% at each evaluation size (training size %dpx, marked *; %s validation images)."
          % (train_size, "/".join(str(n) for n in sorted(n_eval))), "",
          "| PE | " + " | ".join("%d%s (%.2fx)" % (S, "*" if S == train_size else "", S / train_size)
                                 for S in sizes) + " |",
          "|---|" + "---|" * len(sizes)]
    for r in rows:
        md.append("| %s | " % r["variant"] + " | ".join(
            fmt(r["top1"][str(S)], r["top1_mean"][str(S)] == best[S]) for S in sizes) + " |")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in rows:
        ax.errorbar(sizes, [r["top1_mean"][str(S)] for S in sizes],
                    yerr=[r["top1_std"][str(S)] for S in sizes], marker="o", markersize=3,
                    capsize=2, linewidth=1.2, label=r["variant"])
    ax.axvline(train_size, color="gray", linestyle=":", linewidth=1)
    ax.set_xticks(sizes)
    ax.set_xlabel("evaluation image size (px)")
    ax.set_ylabel("val top-1 % (mean +- std over seeds)")
    ax.set_title("Accuracy vs evaluation resolution (trained at %dpx)" % train_size)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(a.out, "resolution.png"), dpi=100)
    plt.close(fig)
    cmd, tests = claims_md(rows, sizes, train_size)
    return rows, md + cmd, {"train_size": train_size, "sizes": sizes, "eval_samples": sorted(n_eval),
                            "claims": tests}


def sweep(a, v, s, name):
    """{size: eval line} of DIR/v/seed s/eval_NAME.jsonl."""
    return {e["resolution"]: e for e in read_jsonl(os.path.join(run_dir(a, v, s), "eval_%s.jsonl" % name))}


def check_own_size(a, v, s, name, lines):
    """An evaluation of the whole split at the training size is the training's final one."""
    fin, cfg = final_eval(a, v, s)
    e = lines.get(cfg["model"]["img_size"])
    if e is not None and e["n"] == fin.get("n", e["n"]) and abs(e["top1"] - fin["top1"]) > 1e-9:
        fail("%s seed %d: eval_%s.jsonl at the training size %dpx gives top-1 %.4f, the training's "
             "final evaluation %.4f (same checkpoint, same images)" % (v, s, name, cfg["model"]["img_size"],
                                                                       e["top1"], fin["top1"]))


def same_at(v, s, size, what, x, y):
    """Two evaluations that must agree at the training size (equal coordinates there)."""
    ex, ey = x.get(size), y.get(size)
    if ex is None or ey is None:
        fail("%s seed %d: no %dpx evaluation for the %s check" % (v, s, size, what))
    if ex["top1"] != ey["top1"] or "%.9g" % ex["loss"] != "%.9g" % ey["loss"]:
        fail("%s seed %d at the training size %dpx: %s differ (top-1 %.4f vs %.4f, loss %.9g vs %.9g)"
             % (v, s, size, what, ex["top1"], ey["top1"], ex["loss"], ey["loss"]))


def pos_entries(a, v):
    """(mode, eval file name) rows of one variant, and the rotary PE's trained mode."""
    if v == "ape":
        return [("learned_resampled", "resolution")], None
    if v == "ape_sincos":
        return [("sincos_recomputed", "resolution"), ("sincos_interpolated", "positions_sincos_resampled")], None
    if v not in a.rotary:
        fail("positions: no position modes for variant '%s'" % v)
    modes = set(final_eval(a, v, s)[1]["pe"]["positions"] for s in a.seeds)
    if len(modes) != 1:
        fail("%s: seeds trained with different pe.positions %s" % (v, sorted(modes)))
    trained = modes.pop()
    entries = [(m, "resolution" if m == trained else "positions_" + m) for m in POS_MODES]
    if trained == "normalized":
        entries.append(("normalized_eval_grid", "positions_normalized_eval_grid"))
    return entries, trained


# The APE rows whose table stays in the trained range at every size.
KEPT_MODE = {"ape": "learned_resampled", "ape_sincos": "sincos_interpolated"}


def table_positions(a, variants):
    """Rows (variant, mode) x evaluation sizes; a rotary PE's trained mode (and both APE
    rows but the interpolated sin-cos) are its resolution evaluation."""
    rows, sizes, train_size, n_eval = [], None, None, set()
    for v in variants:
        entries, trained = pos_entries(a, v)
        per_seed = {mode: [sweep(a, v, s, name) for s in a.seeds] for mode, name in entries}
        for i, s in enumerate(a.seeds):
            train_size = final_eval(a, v, s)[1]["model"]["img_size"]
            check_own_size(a, v, s, "resolution", sweep(a, v, s, "resolution"))
            if trained:
                same_at(v, s, train_size, "interpolate and index", per_seed["index"][i],
                        per_seed["interpolate"][i])
            if trained == "normalized":
                same_at(v, s, train_size, "normalized and normalized to the evaluated grid",
                        per_seed["normalized"][i], per_seed["normalized_eval_grid"][i])
            if v == "ape_sincos":
                same_at(v, s, train_size, "the recomputed and the interpolated sin-cos table",
                        per_seed["sincos_recomputed"][i], per_seed["sincos_interpolated"][i])
        for mode, _ in entries:
            if sizes is None:
                sizes = sorted(per_seed[mode][0])
            for lines in per_seed[mode]:
                if sorted(lines) != sizes:
                    fail("%s (%s) was evaluated at %s, the other rows at %s" % (v, mode, sorted(lines), sizes))
                n_eval.update(e["n"] for e in lines.values())
            top1 = {str(S): [lines[S]["top1"] for lines in per_seed[mode]] for S in sizes}
            rows.append({"variant": v, "positions": mode, "trained_positions": trained,
                         "label": POS_LABELS[mode] + (" (trained)" if mode == trained else ""),
                         "top1": top1, "top1_mean": {k: mean_std(x)[0] for k, x in top1.items()},
                         "top1_std": {k: mean_std(x)[1] for k, x in top1.items()}})
    best = {S: max(r["top1_mean"][str(S)] for r in rows) for S in sizes}
    md = ["Val top-1 %% at each evaluation size (training size %dpx, marked *; %s validation images). "
          "Rotary PEs: coordinates per `pe.positions`: index (the patch's column and row), interpolate "
          "(index x n_train / n_eval: the grid stays in the trained range), normalized (index / "
          "(n_train - 1): the training grid spans [0, 1], a larger one goes past 1), normalized to the "
          "evaluated grid (`pe.train_img_size` = the evaluated size: index / (n_eval - 1), the grid spans "
          "[0, 1] at every size). A mode other than the one the model was trained with (trained) changes "
          "its coordinates at the training size as well, except interpolate after index. APE: the learned "
          "table resampled bicubic; the sin-cos table recomputed on the new grid, or interpolated (its "
          "training-grid table resampled bicubic as a learned one)."
          % (train_size, "/".join(str(n) for n in sorted(n_eval))), "",
          "| PE | positions | " + " | ".join("%d%s (%.2fx)" % (S, "*" if S == train_size else "", S / train_size)
                                            for S in sizes) + " |",
          "|---|---|" + "---|" * len(sizes)]
    for r in rows:
        md.append("| %s | %s | " % (r["variant"], r["label"]) + " | ".join(
            fmt(r["top1"][str(S)], r["top1_mean"][str(S)] == best[S]) for S in sizes) + " |")
    cols = (len(variants) + 1) // 2
    fig, axes = plt.subplots(2, cols, figsize=(3.3 * cols, 6.6), sharey=True, squeeze=False)
    for ax, v in zip(axes.flat, variants):
        for r in (r for r in rows if r["variant"] == v):
            ax.errorbar(sizes, [r["top1_mean"][str(S)] for S in sizes],
                        yerr=[r["top1_std"][str(S)] for S in sizes], marker="o", markersize=3, capsize=2,
                        linewidth=1.2, label=r["label"])
        ax.axvline(train_size, color="gray", linestyle=":", linewidth=1)
        ax.set_title(v, fontsize=9)
        ax.set_xticks(sizes)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    for ax in list(axes.flat)[len(variants):]:
        ax.axis("off")
    for ax in axes[:, 0]:
        ax.set_ylabel("val top-1 %")
    for ax in axes[-1, :]:
        ax.set_xlabel("evaluation image size (px)")
    fig.suptitle("Position modes vs evaluation size (trained at %dpx; mean +- std over seeds)" % train_size)
    fig.tight_layout()
    fig.savefig(os.path.join(a.out, "positions.png"), dpi=100)
    plt.close(fig)
    # the same checkpoints with positions kept in the trained range vs extrapolated: paired by seed
    md += ["", "## Positions kept in the trained range vs extrapolated (same checkpoints)", "",
           "Per seed, top-1 with positions kept in the trained range (index-trained PEs: interpolate; "
           "normalized-trained: normalized to the evaluated grid; sin-cos APE: interpolated) minus the "
           "trained mode's (extrapolating) top-1; mean over seeds, paired t-test (df = seeds - 1).", "",
           "| PE | kept in range | size | difference | t | df | p |", "|---|---|---|---|---|---|---|"]
    tests = []
    key = {"index": "interpolate", "normalized": "normalized_eval_grid"}
    for v in variants:
        vr = {r["positions"]: r for r in rows if r["variant"] == v}
        trained = next(iter(vr.values()))["trained_positions"]
        base, kept = ((trained, key.get(trained)) if trained else
                      ("sincos_recomputed", "sincos_interpolated") if v == "ape_sincos" else (None, None))
        if not kept or kept not in vr:
            continue
        for S in (S for S in sizes if S != train_size):
            d, t, df, p = paired(vr[kept]["top1"][str(S)], vr[base]["top1"][str(S)])
            md.append("| %s | %s | %d | %s |" % (v, POS_LABELS[kept], S, fmt_test(d, t, df, p)))
            tests.append({"variant": v, "kept": kept, "extrapolated": base, "size": S, "difference": d,
                          "t": t, "df": df, "p": p})
    # the papers' claims again, every PE with its positions kept in the trained range
    kept_rows = []
    for v in variants:
        vr = {r["positions"]: r for r in rows if r["variant"] == v}
        mode = KEPT_MODE.get(v) or key.get(next(iter(vr.values()))["trained_positions"])
        if mode in vr:
            kept_rows.append({"variant": v, "top1": vr[mode]["top1"]})
    cmd, claims = claims_md(kept_rows, sizes, train_size, "The papers' claims with positions kept in the trained range",
                            "Each PE in the mode that keeps its positions in the trained range (rotary PEs trained "
                            "with index: interpolate; with normalized: normalized to the evaluated grid; learned "
                            "APE: resampled; sin-cos APE: interpolated). ")
    md += cmd
    return rows, md, {"train_size": train_size, "sizes": sizes, "eval_samples": sorted(n_eval),
                      "kept_vs_extrapolated": tests, "claims_kept_in_range": claims}


def table_shuffle(a, variants):
    rows = []
    for v in variants:
        before, after, drop = [], [], []
        for s in a.seeds:
            evs = read_jsonl(os.path.join(run_dir(a, v, s), "eval_shuffle.jsonl"))
            if len(evs) != 1 or "shuffled_top1" not in evs[0]:
                fail("%s seed %d: eval_shuffle.jsonl must hold one line with shuffled_top1" % (v, s))
            before.append(evs[0]["top1"])
            after.append(evs[0]["shuffled_top1"])
            drop.append(100.0 * evs[0]["top1_drop_rel"])
        rows.append({"variant": v, "top1": before, "shuffled_top1": after, "drop_rel_pct": drop,
                     "top1_mean": mean_std(before)[0], "shuffled_top1_mean": mean_std(after)[0],
                     "drop_rel_pct_mean": mean_std(drop)[0], "drop_rel_pct_std": mean_std(drop)[1]})
    best = max(r["top1_mean"] for r in rows)
    md = ["Top-1 % before and after permuting each image's patches (one fixed permutation per "
          "image, seed 0); relative drop = (before - after) / before. Bold: the best unshuffled "
          "top-1. A PE-free model is permutation-invariant, so its drop is 0 up to float rounding.",
          "", "| PE | top-1 % | shuffled top-1 % | relative drop % |", "|---|---|---|---|"]
    for r in rows:
        md.append("| %s | %s | %s | %s |" % (r["variant"], fmt(r["top1"], r["top1_mean"] == best),
                                            fmt(r["shuffled_top1"]), fmt(r["drop_rel_pct"], digits=1)))
    fig, ax = plt.subplots(figsize=(8, 4.2))
    xs = range(len(rows))
    ax.bar([x - 0.2 for x in xs], [r["top1_mean"] for r in rows], width=0.4, label="patches in place")
    ax.bar([x + 0.2 for x in xs], [r["shuffled_top1_mean"] for r in rows], width=0.4,
           label="patches shuffled")
    ax.set_xticks(list(xs))
    ax.set_xticklabels([r["variant"] for r in rows], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("val top-1 % (mean over seeds)")
    ax.set_title("Patch shuffle")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(os.path.join(a.out, "shuffle.png"), dpi=100)
    plt.close(fig)
    return rows, md


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("table", choices=sorted(TITLES))
    for k in ("runs", "out", "family", "seeds", "variants", "command", "wall", "git", "machine",
              "cores"):
        p.add_argument("--" + k, required=True)
    p.add_argument("--threads", default="0")
    p.add_argument("--jobs", default="1")
    p.add_argument("--eval-samples", default="0")
    p.add_argument("--rotary", required=True, help="the rotary pe.kind values, comma-separated "
                   "(`vitrain kinds --rotary`)")
    a = p.parse_args()
    a.rotary = a.rotary.split(",")
    a.seeds = [int(s) for s in a.seeds.split(",")]
    variants = a.variants.split(",")
    os.makedirs(a.out, exist_ok=True)
    extra, plots = {}, []
    if a.table == "classification":
        rows, md = table_classification(a, variants, {})
        plots.append("classification_curves.png")
        plot_curves(a, variants, {}, os.path.join(a.out, plots[0]),
                    "Training curves (%s family)" % a.family)
    elif a.table == "sharing":
        rows, md = table_classification(a, variants, SHARE_NAMES)
        plots.append("sharing_curves.png")
        plot_curves(a, variants, SHARE_NAMES, os.path.join(a.out, plots[0]),
                    "LieRE sharing: training curves (%s family)" % a.family)
    elif a.table == "resolution":
        rows, md, extra = table_resolution(a, variants)
        plots.append("resolution.png")
    elif a.table == "positions":
        rows, md, extra = table_positions(a, variants)
        plots.append("positions.png")
    else:
        rows, md = table_shuffle(a, variants)
        plots.append("shuffle.png")
    meta = {"command": a.command, "machine": a.machine, "cores": int(a.cores),
            "threads": int(a.threads), "jobs": int(a.jobs), "eval_samples": int(a.eval_samples),
            "wall_s": float(a.wall), "git_revision": a.git,
            "training_revisions": training_revisions(a, variants),
            "family": a.family, "seeds": a.seeds}
    doc = {"table": a.table, "meta": meta, "rows": rows, "plots": plots}
    doc.update(extra)
    tmp = os.path.join(a.out, a.table + ".json.tmp")
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(tmp, os.path.join(a.out, a.table + ".json"))
    head = ["# %s (%s family)" % (TITLES[a.table], a.family), "",
            "Mean +- sample standard deviation over seeds %s; best mean in bold. The papers' own "
            "figures are not listed: their settings (ImageNet or CIFAR-100, ViT-B/S, hundreds of "
            "epochs) do not match this family." % ", ".join(map(str, a.seeds)), ""]
    tail = ["", "Plots: " + ", ".join("[%s](%s)" % (pl, pl) for pl in plots), "",
            "- command: `%s`" % a.command,
            "- machine: %s, %s cores (vitrain threads: %s%s)" % (
                a.machine, a.cores, a.threads if a.threads != "0" else "all",
                ", %s runs at once" % a.jobs if a.jobs != "1" else ""),
            "- wall time of this invocation: %.1f s (runs reused from earlier tables not included)"
            % float(a.wall),
            "- git revision: %s" % a.git,
            "- training runs: %s" % meta["training_revisions"]]
    tmp = os.path.join(a.out, a.table + ".md.tmp")
    with open(tmp, "w") as f:
        f.write("\n".join(head + md + tail) + "\n")
    os.replace(tmp, os.path.join(a.out, a.table + ".md"))
    print("build_results: wrote %s/%s.md, %s.json and %s" % (a.out, a.table, a.table, ", ".join(plots)))


if __name__ == "__main__":
    main()
