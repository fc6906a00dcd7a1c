#!/usr/bin/env bash
# Compiles, one by one and syntax only, every file that the build compiles in unity batches (the
# test files and the `qkv` front end, docs/DEVELOPING.md): in a batch, an include that a file lacks
# can come from an earlier file, and a name at file scope can clash with another file's only there.
# This finds the first kind; the build itself finds the second.
#   scripts/check_standalone.sh [BUILD_DIR] [PATH_REGEX]    (default: build, every file)
# Uses the flags of each target's first unity batch, from BUILD_DIR's ninja rules. Exit 1 if any
# file fails; each failure's compiler output is printed. Two files at a time (nproc jobs).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
filter=${2:-.}
[ -f "$build/build.ninja" ] || { echo "check_standalone: $build/build.ninja not found (configure the tree first)" >&2; exit 2; }
root=$PWD

# "object_dir source_dir" per unity-built target: each tests/<dir> (tests/common is a plain
# library) and the front end.
targets=()
for d in tests/*/; do
  d=${d%/}
  targets+=("tests/CMakeFiles/test_$(basename "$d").dir $d")
done
targets+=("CMakeFiles/qkv_cli.dir src/cli")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
jobs=()
for t in "${targets[@]}"; do
  read -r objdir srcdir <<< "$t"
  # The compile command of the target's first batch, less its output and dependency options.
  cmd=$(ninja -C "$build" -t commands "$objdir/Unity/unity_0_cxx.cxx.o" 2>/dev/null | tail -1) || true
  [ -n "$cmd" ] || continue  # not built in batches
  flags=$(sed -e 's/^.*&& //' -e 's/ -o [^ ]*//' -e 's/ -c [^ ]*$//' -e 's/ -MD -MT [^ ]* -MF [^ ]*//' <<< "$cmd")
  for f in "$srcdir"/*.cpp; do
    [[ "$f" =~ $filter ]] || continue
    jobs+=("$f")
    printf 'cd %q && %s -fsyntax-only %q\n' "$root/$build" "$flags" "$root/$f" > "$work/$(echo "$f" | tr / _).sh"
  done
done
[ ${#jobs[@]} -gt 0 ] || { echo "check_standalone: no file matches '$filter'"; exit 0; }

ls "$work"/*.sh | xargs -P "$(nproc)" -I{} sh -c 'sh {} > {}.out 2>&1 || touch {}.failed'
failed=0
for f in "${jobs[@]}"; do
  s="$work/$(echo "$f" | tr / _).sh"
  if [ -e "$s.failed" ]; then
    failed=$((failed + 1))
    echo "== $f does not compile by itself:"
    head -30 "$s.out"
  fi
done
echo "check_standalone: ${#jobs[@]} files, $failed failed"
[ "$failed" -eq 0 ]
