#!/usr/bin/env bash
# bench/serve_load.sh MODEL_DIR [SOURCES]: `qkv serve` under load, on loopback only, bounded in time.
#   1. starts `qkv serve --model MODEL_DIR --port 0` (a free port on 127.0.0.1);
#   2. sequential single requests: wrk with one connection (each request sent when the last is
#      answered) for DURATION seconds on POST /v1/translate;
#   3. CONNECTIONS (64) connections for DURATION (60) seconds on the same endpoint;
#   4. prints requests/s, p50/p99 latency, errors (wrk's non-2xx and socket errors, the server's
#      qkv_errors_total) and the server's peak RSS (VmHWM) after each run, then stops it (SIGTERM).
# Each request translates one source sentence (SOURCES: one per line, or the first column of a TSV;
# default: the demo corpus's test set) with the demo's decoding settings (beam 4, alpha 2, no
# repeated 3-grams; a sentence longer than the model takes is cut, as `qkv translate` cuts it),
# cycling through the sentences. Environment: DURATION, CONNECTIONS, QKV (the
# program), SERVE_FLAGS (more flags for qkv serve), WRK_THREADS (2).
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:?usage: bench/serve_load.sh MODEL_DIR [SOURCES]}
SOURCES=${2:-data/mt/en-de-small/test.tsv}
DURATION=${DURATION:-60}
CONNECTIONS=${CONNECTIONS:-64}
WRK_THREADS=${WRK_THREADS:-2}
QKV=${QKV:-build/qkv}
command -v wrk >/dev/null || { echo "serve_load.sh: needs wrk (apt-get install wrk)" >&2; exit 1; }
[ -f "$SOURCES" ] || { echo "serve_load.sh: $SOURCES: no such file (build the corpus: $QKV data mt-en-de --set small --dir data)" >&2; exit 1; }
WORK=$(mktemp -d)

# wrk's script: one JSON body per source sentence (encoded by Python's json), taken in turn.
/usr/bin/python3 - "$SOURCES" > "$WORK/post.lua" <<'EOF'
import json, sys
lines = [l.rstrip("\n").split("\t")[0] for l in open(sys.argv[1], encoding="utf-8")]
lines = [l for l in lines if l.strip()][:2000]
print('wrk.method = "POST"')
print('wrk.headers["Content-Type"] = "application/json"')
print("bodies = {")
for l in lines:
    body = json.dumps({"text": l, "beam": 4, "alpha": 2.0, "no_repeat_ngram_size": 3, "truncate": True})
    print("  " + json.dumps(body) + ",")
print("}")
print("i = 0")
print("request = function()\n  i = i % #bodies + 1\n  return wrk.format(nil, nil, nil, bodies[i])\nend")
EOF

# shellcheck disable=SC2086
"$QKV" serve --model "$MODEL" --host 127.0.0.1 --port 0 --quiet --max-concurrent 256 ${SERVE_FLAGS:-} 2> "$WORK/server.log" &
PID=$!
trap 'kill -TERM $PID 2>/dev/null || true; rm -rf "$WORK"' EXIT
PORT=""
for _ in $(seq 600); do
  PORT=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$WORK/server.log")
  [ -n "$PORT" ] && break
  kill -0 $PID 2>/dev/null || { cat "$WORK/server.log" >&2; exit 1; }
  sleep 0.1
done
[ -n "$PORT" ] || { echo "serve_load.sh: the server did not start" >&2; exit 1; }
URL=http://127.0.0.1:$PORT
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; OMP_NUM_THREADS=${OMP_NUM_THREADS:-unset}"
echo "model: $MODEL; sources: $SOURCES ($(wc -l < "$SOURCES") lines); server: $URL"

errors() { curl -s "$URL/metrics" | awk '/^qkv_errors_total/ {s += $2} END {print s + 0}'; }
run() {  # run LABEL CONNECTIONS THREADS
  echo
  echo "== $1: wrk -t$3 -c$2 -d${DURATION}s --latency POST /v1/translate"
  wrk -t"$3" -c"$2" -d"${DURATION}s" --timeout 60s --latency -s "$WORK/post.lua" "$URL/v1/translate" |
    grep -E 'Requests/sec|Latency|50%|99%|requests in|Non-2xx|Socket errors'
  echo "server: qkv_errors_total so far $(errors); peak RSS $(awk '/VmHWM/ {print $2, $3}' /proc/$PID/status)"
}
run "sequential single requests" 1 1
run "$CONNECTIONS concurrent connections" "$CONNECTIONS" "$WRK_THREADS"
curl -s "$URL/metrics" | grep -E '^qkv_(batches_total|batch_inputs_total|tokens_total)'
kill -TERM $PID
wait $PID && echo "server: drained and exited 0 on SIGTERM"
trap 'rm -rf "$WORK"' EXIT
