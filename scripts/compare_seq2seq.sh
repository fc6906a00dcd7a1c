#!/usr/bin/env bash
# The tutorials' argument with numbers: seq2seq without attention, with Bahdanau attention, with
# Luong attention (content-based "general" scoring, and location-based: weights from the decoder
# state alone), and the Transformer, trained on the same corpus for the same wall-clock budget,
# then scored on the held-out test packages.
#
#   scripts/compare_seq2seq.sh [MINUTES per model, default 10] [CORPUS, default en-de-small]
#
# Writes runs/compare/<model>/ (run, translations, attention.png) and runs/compare/table.md:
# BLEU and chrF (beam 4), BLEU by source length (1-5, 6-10, 11-20, 21+ tokens), training
# target tokens/s (median over steps) and steps done.
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES=${1:-10}
CORPUS=${2:-en-de-small}
scripts/install.sh
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)}  # wait policy: qkv's own (util/blas_env.h)
QKV=build/qkv
OUT=runs/compare
DATA=data/mt/$CORPUS
MODELS=(rnn-none rnn-bahdanau rnn-luong rnn-luong-location transformer)
declare -A CONFIG=([rnn-none]=configs/rnn-none-en-de.json [rnn-bahdanau]=configs/rnn-bahdanau-en-de.json
                   [rnn-luong]=configs/rnn-luong-en-de.json
                   [rnn-luong-location]=configs/rnn-luong-location-en-de.json [transformer]=configs/transformer-en-de.json)

$QKV data mt-en-de --set "${CORPUS#en-de-}" --dir data
mkdir -p "$OUT"
cut -f1 "$DATA/test.tsv" > "$OUT/test.en"
cut -f2 "$DATA/test.tsv" > "$OUT/test.de"
sed -n 4p "$OUT/test.en" > "$OUT/sample.en"

for m in "${MODELS[@]}"; do
  run=$OUT/$m
  echo "== $m: ${CONFIG[$m]}, $MINUTES minutes"
  rm -rf "$run"
  # max_steps is lifted so that the wall-clock budget is what stops every model.
  $QKV train --config "${CONFIG[$m]}" --corpus "$CORPUS" --data-dir data --out "$run" \
    --max-steps 1000000 --max-minutes "$MINUTES"
  $QKV translate --model "$run/model" --input "$OUT/test.en" --output "$run/test.hyp" --beam 4
  $QKV bleu --hyp "$run/test.hyp" --ref "$OUT/test.de" --chrf --json \
    --by-source-length "$OUT/test.en" > "$run/scores.json"
  if [ "$m" != rnn-none ]; then  # a model without attention has no heatmap to draw
    $QKV translate --model "$run/model" --input "$OUT/sample.en" --beam 4 --attention "$run/attention.png" > /dev/null
  fi
done

/usr/bin/python3 -I - "$OUT" "$MINUTES" "$CORPUS" "${MODELS[@]}" <<'EOF'
import json, statistics, sys
out, minutes, corpus, models = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
rows = []
for m in models:
    s = json.load(open(f"{out}/{m}/scores.json"))
    bleu, chrf = s["corpus"]
    train = [json.loads(l) for l in open(f"{out}/{m}/metrics.jsonl")]
    steps = [r for r in train if r.get("kind") == "train"]
    tps = statistics.median(r["tokens_per_s"] for r in steps)
    buckets = {b["bucket"]: b for b in s["by_source_length"]}
    cells = [f"{buckets[k]['bleu']:.1f} ({buckets[k]['sentences']})" for k in ("1-5", "6-10", "11-20", "21+")]
    rows.append(f"| {m} | {bleu['score']:.2f} | {chrf['score']:.2f} | " + " | ".join(cells) +
                f" | {tps:,.0f} | {int(steps[-1]['step'])} |")
head = (f"Corpus {corpus}, {minutes} minutes of training each, beam 4 on the held-out test packages.\n\n"
        "| model | BLEU | chrF | BLEU src 1-5 (n) | 6-10 (n) | 11-20 (n) | 21+ (n) | train tgt tok/s | steps |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|")
table = head + "\n" + "\n".join(rows) + "\n"
open(f"{out}/table.md", "w").write(table)
print(table)
EOF
echo "wrote $OUT/table.md and $OUT/<model>/attention.png"
