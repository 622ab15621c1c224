#!/usr/bin/env bash
# reproduce.sh - runs one study table of the STRING / RoPE-ViT / LieRE papers on a config
# family and builds its results (scripts/build_results.py): OUT/TABLE.md, OUT/TABLE.json
# and PNG plots.
#
#   scripts/reproduce.sh TABLE [--seeds 0,1,2] [--family fmnist] [--out results]
#                        [--quick] [--threads N] [--jobs N] [--bin ./vitrain]
#                        [--resolutions 24,28,...] [--eval-samples N] [--pes ape,rope_mixed,...]
#
# TABLE:
#   classification  every PE (configs/<pe>_<family>.json), top-1/top-5 at the training size
#   resolution      the classification runs evaluated without fine-tuning at 0.75x .. 2x the
#                   training size (multiples of the patch; --resolutions overrides)
#   positions       the same sizes for every rotary PE with pe.positions = index, interpolate
#                   and normalized (LieRE kinds, trained normalized, also normalized to the
#                   evaluated grid: pe.train_img_size = that size), beside the learned APE
#                   (resampled) and the sin-cos APE, recomputed on the new grid and
#                   interpolated (its training-grid table resampled as a learned one,
#                   scripts/sincos_as_learned.py)
#   shuffle         the classification runs evaluated with each image's patches permuted
#                   (vitrain eval --patch-shuffle --seed 0): top-1 before, after, relative drop
#   sharing         LieRE with its generators per layer and head (pe.share none), per head
#                   (layers), per layer (heads) and shared by the whole model (all, the
#                   classification run)
#   all             the five in this order
# TABLE may also be a comma-separated list, run in the order given.
# --jobs N: run N vitrain processes at once (default 1), each with --threads threads (default:
#   all cores with one job, else cores / N, at least 1). A run's numbers depend on its own
#   thread count only, not on what runs beside it.
# --eval-samples N: the resolution and positions evaluations use the first N validation
#   images (eval.max_samples; default: all); training's own evaluations always use all.
# --pes LIST: only these PE variants of the classification, resolution, positions and
#   shuffle tables (default: all the table has); the claims of the papers that need a PE
#   left out are not tested. The sharing table ignores it.
# --quick: a seconds-long version on synthetic data (the family's configs with a tiny model
#   and dataset through --set; family name "quick", or "quick_FAMILY" for another family
#   than fmnist; one thread unless --threads is given: such tiny steps only lose to thread
#   synchronisation), used by tests/e2e_reproduce.c.
#
# Runs go to OUT/runs/FAMILY/VARIANT/seedN (the vitrain run directory plus train.log and
# eval_*.jsonl); a run whose DONE marker exists is reused, so tables share training runs and
# an interrupted reproduction continues where it stopped (reuse is keyed on the directory
# alone: after changing a config or --resolutions, remove OUT/runs/FAMILY or the affected
# run directories / eval_*.jsonl). Each table records the exact
# command, the machine (lscpu model name, cores), the wall time of this invocation and the
# git revision in OUT/TABLE.json and OUT/TABLE.md.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,/^set -euo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit "$1"; }
die() { echo "reproduce: $*" >&2; exit 2; }

[[ $# -ge 1 ]] || usage 2
TABLE=$1; shift
CMDLINE="scripts/reproduce.sh $TABLE $*"
case $TABLE in -h|--help) usage 0 ;; all) TABLE=classification,resolution,positions,shuffle,sharing ;; esac
IFS=, read -r -a TABLES <<<"$TABLE"
[[ ${#TABLES[@]} -gt 0 ]] || die "no table given"
for t in "${TABLES[@]}"; do
    case $t in classification|resolution|positions|shuffle|sharing) ;;
        *) die "unknown table '$t': expected classification, resolution, positions, shuffle, sharing or all (or a comma-separated list)" ;; esac
done
SEEDS=0,1,2 FAMILY=fmnist OUT=results QUICK=0 THREADS="" BIN=./vitrain RESOLUTIONS="" JOBS=1 EVAL_SAMPLES=0 ONLY=""
while [[ $# -gt 0 ]]; do
    case $1 in
        --seeds) [[ $# -ge 2 ]] || die "--seeds needs a value"; SEEDS=$2; shift 2 ;;
        --family) [[ $# -ge 2 ]] || die "--family needs a value"; FAMILY=$2; shift 2 ;;
        --out) [[ $# -ge 2 ]] || die "--out needs a value"; OUT=$2; shift 2 ;;
        --threads) [[ $# -ge 2 ]] || die "--threads needs a value"; THREADS=$2; shift 2 ;;
        --bin) [[ $# -ge 2 ]] || die "--bin needs a value"; BIN=$2; shift 2 ;;
        --resolutions) [[ $# -ge 2 ]] || die "--resolutions needs a value"; RESOLUTIONS=$2; shift 2 ;;
        --jobs) [[ $# -ge 2 ]] || die "--jobs needs a value"; JOBS=$2; shift 2 ;;
        --eval-samples) [[ $# -ge 2 ]] || die "--eval-samples needs a value"; EVAL_SAMPLES=$2; shift 2 ;;
        --pes) [[ $# -ge 2 ]] || die "--pes needs a value"; ONLY=$2; shift 2 ;;
        --quick) QUICK=1; shift ;;
        -h|--help) usage 0 ;;
        *) die "unknown option '$1'" ;;
    esac
done
[[ $SEEDS =~ ^[0-9]+(,[0-9]+)*$ ]] || die "--seeds '$SEEDS': expected comma-separated integers"
[[ -z $RESOLUTIONS || $RESOLUTIONS =~ ^[0-9]+(,[0-9]+)*$ ]] || die "--resolutions '$RESOLUTIONS': expected comma-separated sizes"
[[ $JOBS =~ ^[1-9][0-9]*$ ]] || die "--jobs '$JOBS': expected a positive count"
[[ $EVAL_SAMPLES =~ ^[0-9]+$ ]] || die "--eval-samples '$EVAL_SAMPLES': expected a sample count (0 = all)"
[[ -x $BIN ]] || die "vitrain binary '$BIN' not found (build it with make, or pass --bin)"
CFG_FAMILY=$FAMILY
EXTRA=()
if [[ $QUICK == 1 ]]; then
    FAMILY=quick THREADS=${THREADS:-1}
    [[ $CFG_FAMILY == fmnist ]] || FAMILY=quick_$CFG_FAMILY
    EXTRA=(--set data.kind=synthetic --set data.train_size=1024 --set data.val_size=128
           --set data.synthetic_seed=7 --set 'data.mean=[0.5]' --set 'data.std=[0.25]'
           --set model.width=32 --set model.depth=2 --set model.heads=2 --set model.mlp_ratio=2
           --set model.img_size=16 --set model.patch_size=4 --set model.num_classes=4
           --set train.epochs=4 --set train.steps=0 --set train.batch_size=32 --set train.log_every=4
           --set train.eval_every=1 --set train.label_smoothing=0 --set optim.lr=0.003
           --set optim.warmup_steps=8 --set eval.batch_size=64)
fi
if [[ -z $THREADS ]]; then
    THREADS=0
    (( JOBS == 1 )) || THREADS=$(( $(nproc) / JOBS > 0 ? $(nproc) / JOBS : 1 ))
fi
[[ $THREADS =~ ^[0-9]+$ ]] || die "--threads '$THREADS': expected a thread count (0 = all cores)"
# the rotary PE kinds, from the registry (src/pe/kinds.h)
mapfile -t ROTARY < <("$BIN" kinds --rotary) && (( ${#ROTARY[@]} > 0 )) || die "'$BIN kinds --rotary' listed no PE kinds"
PES=(ape ape_sincos none "${ROTARY[@]}")
if [[ -n $ONLY ]]; then
    IFS=, read -r -a ONLY_LIST <<<"$ONLY"
    for pe in "${ONLY_LIST[@]}"; do
        [[ " ${PES[*]} " == *" $pe "* ]] || die "--pes: unknown PE '$pe': expected some of ${PES[*]} (comma-separated)"
    done
fi
# keep VARIANT...: the variants that --pes selects (all without it)
keep() { local v; for v in "$@"; do [[ -z $ONLY || ",$ONLY," == *",$v,"* ]] && echo "$v"; done; return 0; }
SWEEP=()  # the resolution and positions evaluations' subset of the val split
(( EVAL_SAMPLES == 0 )) || SWEEP=(--set "eval.max_samples=$EVAL_SAMPLES")
for pe in "${PES[@]}"; do
    [[ -f configs/${pe}_${CFG_FAMILY}.json ]] || die "configs/${pe}_${CFG_FAMILY}.json not found (family '$CFG_FAMILY')"
done
IFS=, read -r -a SEED_LIST <<<"$SEEDS"
RUNS=$OUT/runs/$FAMILY
mkdir -p "$RUNS"
PYTHON=${PYTHON:-/usr/bin/python3}
[[ -x $PYTHON ]] || die "$PYTHON not found (scripts/deps.sh installs python3-matplotlib; PYTHON=... picks another interpreter)"

# variant name -> config file and --set overrides (sharing variants of LieRE).
variant_cfg() { case $1 in liere_share_*) echo "configs/liere_${CFG_FAMILY}.json" ;; *) echo "configs/$1_${CFG_FAMILY}.json" ;; esac; }
variant_sets() { case $1 in liere_share_*) echo "--set pe.share=${1#liere_share_}" ;; *) echo "" ;; esac; }

# The checkout's revision, "(with uncommitted changes)" to anything but this study's outputs.
revision() {
    local rev dirty
    rev=$(git rev-parse HEAD 2>/dev/null || echo unknown)
    dirty=$(git status --porcelain --untracked-files=no 2>/dev/null | cut -c4- | { grep -v "^${OUT%/}/" || true; } | head -c1)
    echo "$rev${dirty:+ (with uncommitted changes)}"
}
REVISION=$(revision)

# train VARIANT SEED: the run directory (with the revision that trained it in REVISION),
# reused when complete.
train() {
    local v=$1 s=$2 dir=$RUNS/$1/seed$2
    [[ -f $dir/DONE ]] && return 0
    rm -rf "$dir"
    mkdir -p "$dir"
    local cmd=("$BIN" "$(variant_cfg "$v")" $(variant_sets "$v") "${EXTRA[@]}" --set "train.seed=$s"
               --set runtime.progress=never --threads "$THREADS" --run-dir "$dir")
    echo "reproduce: training $v seed $s -> $dir" >&2
    if ! "${cmd[@]}" >"$dir/train.log" 2>&1; then
        tail -20 "$dir/train.log" >&2
        echo "reproduce: training $v seed $s failed (log: $dir/train.log)" >&2
        exit 1
    fi
    echo "$REVISION" >"$dir/REVISION"
    printf '%q ' "${cmd[@]}" >"$dir/DONE"
}

# evaluate VARIANT SEED NAME ARGS...: vitrain eval of the run's final weights (or of the
# checkpoint CKPT names, default last.safetensors) into eval_NAME.jsonl.
evaluate() {
    local v=$1 s=$2 name=$3 dir=$RUNS/$1/seed$2
    shift 3
    [[ -s $dir/eval_$name.jsonl ]] && return 0
    local cmd=("$BIN" eval "$(variant_cfg "$v")" $(variant_sets "$v") "${EXTRA[@]}" --set "train.seed=$s"
               --checkpoint "$dir/${CKPT:-last.safetensors}" --threads "$THREADS" "$@")
    echo "reproduce: evaluating $v seed $s ($name)" >&2
    if ! "${cmd[@]}" >"$dir/eval_$name.jsonl.tmp" 2>"$dir/eval_$name.log"; then
        tail -20 "$dir/eval_$name.log" >&2
        echo "reproduce: evaluation $name of $v seed $s failed" >&2
        exit 1
    fi
    mv "$dir/eval_$name.jsonl.tmp" "$dir/eval_$name.jsonl"
}

# Evaluation sizes: multiples of the patch nearest 0.75, 1, 1.25, 1.5, 1.75 and 2 times the
# training size, halves rounded up (0.75x rounded up so it stays at or above 0.75x).
resolution_list() {
    local cfg=$RUNS/$1/seed$2/config.json
    "$PYTHON" - "$cfg" <<'EOF'
import json, math, sys
c = json.load(open(sys.argv[1]))
S, P = c["model"]["img_size"], c["model"]["patch_size"]
sizes = [math.ceil(0.75 * S / P) * P] + [max(P, math.floor(f * S / P + 0.5) * P) for f in (1, 1.25, 1.5, 1.75, 2)]
print(",".join(str(s) for s in sorted(set(sizes))))
EOF
}

# The run's resolved pe.positions (the mode it was trained with).
trained_positions() {
    "$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["pe"]["positions"])' \
        "$RUNS/$1/seed$2/config.json"
}

# positions_evals VARIANT SEED RESOLUTIONS: the positions table's evaluations of one run. The
# mode a run was trained with is its resolution evaluation (eval_resolution.jsonl, shared
# with the resolution table); the others get eval_positions_MODE.jsonl.
positions_evals() {
    local v=$1 s=$2 res=$3 dir=$RUNS/$1/seed$2 trained mode size
    evaluate "$v" "$s" resolution --resolutions "$res" "${SWEEP[@]}"
    if [[ $v == ape_sincos ]]; then
        if [[ ! -s $dir/eval_positions_sincos_resampled.jsonl && ! -f $dir/sincos_as_learned.safetensors ]]; then
            "$PYTHON" scripts/sincos_as_learned.py "$dir/last.safetensors" "$dir/sincos_as_learned.safetensors" ||
                { echo "reproduce: converting $dir/last.safetensors failed" >&2; exit 1; }
        fi
        CKPT=sincos_as_learned.safetensors evaluate "$v" "$s" positions_sincos_resampled \
            --resolutions "$res" --set pe.ape=learned "${SWEEP[@]}"
        rm -f "$dir/sincos_as_learned.safetensors"
    elif [[ " ${ROTARY[*]} " == *" $v "* ]]; then
        trained=$(trained_positions "$v" "$s") || { echo "reproduce: no pe.positions in $dir/config.json" >&2; exit 1; }
        for mode in index interpolate normalized; do
            [[ $mode == "$trained" ]] || evaluate "$v" "$s" "positions_$mode" --resolutions "$res" \
                --set "pe.positions=$mode" "${SWEEP[@]}"
        done
        if [[ $trained == normalized && ! -s $dir/eval_positions_normalized_eval_grid.jsonl ]]; then
            # the evaluated grid spans [0, 1] as the training grid did: one size per call
            for size in ${res//,/ }; do
                evaluate "$v" "$s" "positions_normalized_eval_grid_$size" --resolutions "$size" \
                    --set "pe.train_img_size=$size" "${SWEEP[@]}"
            done
            for size in ${res//,/ }; do cat "$dir/eval_positions_normalized_eval_grid_$size.jsonl"; done \
                >"$dir/eval_positions_normalized_eval_grid.jsonl.tmp"
            mv "$dir/eval_positions_normalized_eval_grid.jsonl.tmp" "$dir/eval_positions_normalized_eval_grid.jsonl"
        fi
    fi
}

# task TABLE VARIANT SEED: the training run of one table cell and its evaluations.
task() {
    local table=$1 v=$2 s=$3 res
    train "$v" "$s"
    case $table in
        resolution|positions)
            res=$RESOLUTIONS
            [[ -n $res ]] || res=$(resolution_list "$v" "$s") || { echo "reproduce: no sizes for $v seed $s" >&2; exit 1; }
            if [[ $table == resolution ]]; then
                evaluate "$v" "$s" resolution --resolutions "$res" "${SWEEP[@]}"
            else
                positions_evals "$v" "$s" "$res"
            fi ;;
        shuffle) evaluate "$v" "$s" shuffle --patch-shuffle --seed 0 ;;
    esac
}

# With --jobs N > 1 tasks run in the background, N at a time; a failed task leaves a mark
# (its own messages are already on stderr), no new task starts after it, and the table
# stops with exit 1 once the running ones have finished.
FAILMARK=$(mktemp "${TMPDIR:-/tmp}/reproduce_failed.XXXXXX")
rm -f "$FAILMARK"
trap 'rm -f "$FAILMARK"' EXIT
spawn() {
    if (( JOBS == 1 )); then "$@"; return; fi
    while [[ $(jobs -rp | wc -l) -ge $JOBS ]]; do wait -n || true; done
    [[ -e $FAILMARK ]] || ( "$@" ) || touch "$FAILMARK" &
}
drain() {
    wait
    if [[ -e $FAILMARK ]]; then echo "reproduce: stopped after a failed run (messages above)" >&2; exit 1; fi
}

run_table() {
    local table=$1 t0 variants=()
    t0=$(date +%s.%N)
    case $table in
        sharing) variants=(liere_share_none liere_share_layers liere_share_heads liere) ;;
        positions) mapfile -t variants < <(keep ape ape_sincos "${ROTARY[@]}") ;;
        *) mapfile -t variants < <(keep "${PES[@]}") ;;
    esac
    [[ ${#variants[@]} -gt 0 ]] || die "--pes '$ONLY' leaves no PE of the $table table"
    for v in "${variants[@]}"; do
        for s in "${SEED_LIST[@]}"; do spawn task "$table" "$v" "$s"; done
    done
    drain
    local t1
    t1=$(date +%s.%N)
    "$PYTHON" scripts/build_results.py "$table" --runs "$RUNS" --out "$OUT" --family "$FAMILY" \
        --seeds "$SEEDS" --variants "$(IFS=,; echo "${variants[*]}")" \
        --command "$CMDLINE" --wall "$("$PYTHON" -c "print(round($t1 - $t0, 1))")" \
        --git "$(revision)" \
        --machine "$(lscpu | sed -n 's/^Model name: *//p' | head -1)" --cores "$(nproc)" \
        --threads "$THREADS" --jobs "$JOBS" --eval-samples "$EVAL_SAMPLES" \
        --rotary "$(IFS=,; echo "${ROTARY[*]}")"
}

for t in "${TABLES[@]}"; do run_table "$t"; done
