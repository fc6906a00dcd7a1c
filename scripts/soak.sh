#!/usr/bin/env bash
# SIGKILL soak (issue 19): a small translation run is killed with SIGKILL at random moments KILLS
# times (half of the kills aimed at a checkpoint being written) and resumed with --resume after
# each; then it finishes. Checks that
#   - after every kill, every checkpoint on disk is complete: config.json, model.safetensors and
#     training_state.safetensors present, and `qkv verify` reads them (offsets and per-tensor
#     CRC-32C); a half-written one would fail here;
#   - the final weights and training state are bit-identical to an uninterrupted run's;
#   - no temporary (*.tmp.<pid>, *.old.<pid>) is left in the run directory at the end.
# Usage: scripts/soak.sh [KILLS=20] [BUILD_DIR=build]    (needs the qkv program built there)
# A tiny Transformer (seconds per run); the same thread count for both runs (bit-identity needs it).
set -euo pipefail
cd "$(dirname "$0")/.."
kills=${1:-20}
qkv=$(realpath "${2:-build}")/qkv
[ -x "$qkv" ] || { echo "soak: $qkv is not built (cmake --build ${2:-build} --target qkv_cli)" >&2; exit 2; }
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} OMP_WAIT_POLICY=PASSIVE
grep -q avx512f /proc/cpuinfo && export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SkylakeX}
work=$(mktemp -d "${TMPDIR:-/tmp}/qkv_soak.XXXXXX")
trap 'rm -rf "$work"' EXIT
steps=${SOAK_STEPS:-1500}

# The reversal task: "w1 .. wn" -> "wn .. w1" over ten words (synthetic, generated here).
awk -v seed=12345 'BEGIN {
  srand(seed); split("alpha beta gamma delta eps zeta eta theta iota kappa", w, " ")
  for (i = 0; i < 420; i++) {
    n = 2 + i % 4; a = ""; b = ""
    for (j = 0; j < n; j++) { x = w[1 + int(rand() * 10)]; a = a (j ? " " : "") x; b = x (j ? " " : "") b }
    print a "\t" b > (i < 400 ? "'"$work"'/train.tsv" : "'"$work"'/valid.tsv")
  } }'
cat > "$work/config.json" <<JSON
{
  "model_type": "transformer",
  "model": {"d_model": 16, "heads": 2, "enc_layers": 1, "dec_layers": 1, "d_ff": 32, "dropout": 0.1, "max_len": 32,
            "shared_embeddings": true, "tie_output": true},
  "tokenizer": {"kind": "bpe", "vocab_size": 60, "min_frequency": 1},
  "data": {"max_tokens": 64, "max_sentences": 16},
  "optimizer": {"type": "adam", "betas": [0.9, 0.98], "eps": 1e-9},
  "schedule": {"type": "noam", "warmup": 20, "factor": 1.0},
  "train": {"max_steps": $steps, "save_every": 10, "valid_every": 0, "keep_last": 4},
  "valid": {"max_sentences": 10},
  "seed": 5
}
JSON
train=("$qkv" train --config "$work/config.json" --train "$work/train.tsv" --valid "$work/valid.tsv")

t0=$(date +%s%N)
"${train[@]}" --out "$work/ref" 2>"$work/ref.log" || { cat "$work/ref.log" >&2; exit 1; }
t_ref_ms=$((($(date +%s%N) - t0) / 1000000))
# Random kills come after 0.2 s to 1.6 x (an even share of the reference run): the killed segments
# cover most of the run, and the run is very unlikely to finish before the last kill.
max_delay_ms=$((t_ref_ms * 16 / 10 / kills > 500 ? t_ref_ms * 16 / 10 / kills : 500))
echo "soak: uninterrupted run of $steps steps: ${t_ref_ms} ms; random kills 200..${max_delay_ms} ms after a start"

run=$work/run
published='step-[0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]'  # a checkpoint under its final name
# Checks every published checkpoint of the run; prints how many there are.
check_checkpoints() {
  local n=0 d
  for d in "$run"/checkpoints/$published; do
    [ -d "$d" ] || continue
    for f in config.json model.safetensors training_state.safetensors; do
      [ -s "$d/$f" ] || { echo "soak: FAIL: $d has no $f (half-written checkpoint)" >&2; exit 1; }
    done
    "$qkv" verify "$d" >/dev/null 2>"$work/verify.log" || { cat "$work/verify.log" >&2; echo "soak: FAIL: $d" >&2; exit 1; }
    n=$((n + 1))
  done
  echo $n
}

mid_write=0 finished_early=0
for ((i = 1; i <= kills; i++)); do
  if [ -d "$run" ]; then args=("$qkv" train --resume "$run"); else args=("${train[@]}" --out "$run"); fi
  "${args[@]}" 2>>"$work/run.log" &
  pid=$!
  # The first run must publish a checkpoint before it can be resumed.
  if ((i == 1)); then
    until compgen -G "$run/checkpoints/$published" >/dev/null || ! kill -0 $pid 2>/dev/null; do sleep 0.05; done
  fi
  if ((i % 2)); then  # a random moment
    sleep "$(awk -v s=$RANDOM -v m=$max_delay_ms 'BEGIN { srand(s); printf "%.3f", (200 + rand() * (m - 200)) / 1000 }')"
  else  # while a checkpoint is being written: as soon as a temporary directory appears
    until compgen -G "$run/checkpoints/*.tmp.$pid" >/dev/null || ! kill -0 $pid 2>/dev/null; do :; done
  fi
  if ! kill -KILL $pid 2>/dev/null; then finished_early=$((finished_early + 1)); fi
  wait $pid 2>/dev/null || true
  hit=no
  if compgen -G "$run/checkpoints/*.tmp.$pid" >/dev/null; then hit=yes; mid_write=$((mid_write + 1)); fi
  last=$(ls -d "$run"/checkpoints/$published 2>/dev/null | tail -1)
  echo "soak: kill $i: pid $pid, latest ${last##*/}, killed mid-write: $hit, complete checkpoints: $(check_checkpoints)"
done
"$qkv" train --resume "$run" 2>>"$work/run.log" || { tail -20 "$work/run.log" >&2; exit 1; }
check_checkpoints >/dev/null

final=$(printf 'step-%09d' "$steps")
status=0
for f in model.safetensors training_state.safetensors; do
  if cmp -s "$work/ref/checkpoints/$final/$f" "$run/checkpoints/$final/$f"; then
    echo "soak: $final/$f bit-identical to the uninterrupted run"
  else
    echo "soak: FAIL: $final/$f differs from the uninterrupted run" >&2; status=1
  fi
done
temps=(-name '*.tmp.*' -o -name '*.old.*' -o -name '*.del.*')
left=$(find "$run" "${temps[@]}" | wc -l)
[ "$left" = 0 ] || { echo "soak: FAIL: $left temporaries left in the run directory" >&2; find "$run" "${temps[@]}" >&2; status=1; }
echo "soak: $kills kills ($mid_write during a checkpoint write, $finished_early after the process had exited), resumed $kills times: $([ $status = 0 ] && echo PASS || echo FAIL)"
exit $status
