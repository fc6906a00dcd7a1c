#!/usr/bin/python3
"""Generates every PyTorch reference file for the tests: tools/refs/<stem>.py -> <out>/<stem>.safetensors.

Each script defines main(out_path). A file is regenerated when it is missing or when its inputs
changed: the script, every module of tools/refs/ it imports (directly or through another), and
the installed torch version; their SHA-256 is kept in <out>/<stem>.inputs. So a second run is
quick and a reused build directory never keeps a reference that an edited helper module would
change. Every reference file records the torch version that made it (metadata "__torch__"), and
<out>/torch_version.txt names the installed one, which the tests compare (tests/common/ref.cpp).
Run with Debian's /usr/bin/python3 (python3-torch).
"""
import argparse
import ast
import fcntl
import hashlib
import importlib.util
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REFS = os.path.join(HERE, "refs")


def local_imports(path):
    """Names of the tools/refs modules that the script at `path` imports."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return {n for n in names if os.path.exists(os.path.join(REFS, n + ".py"))}


def inputs_digest(stem, torch_version):
    """SHA-256 over the script, its local imports (transitively, in name order) and torch's version."""
    seen, todo = set(), [stem]
    while todo:
        s = todo.pop()
        if s in seen:
            continue
        seen.add(s)
        todo.extend(local_imports(os.path.join(REFS, s + ".py")) - seen)
    h = hashlib.sha256(("torch " + torch_version + "\n").encode())
    for s in sorted(seen | {"qkvref"}):
        h.update(s.encode() + b"\0" + open(os.path.join(REFS, s + ".py"), "rb").read() + b"\0")
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("QKV_REF_DIR"))
    ap.add_argument("--default-out")
    ap.add_argument("--only", help="regenerate just this stem")
    ap.add_argument("--force", action="store_true")
    a = ap.parse_args()
    out = a.out or a.default_out
    if not out:
        sys.exit("gen_refs: give --out or set QKV_REF_DIR")
    os.makedirs(out, exist_ok=True)
    sys.path.insert(0, REFS)
    import torch
    torch.set_num_threads(1)
    import qkvref
    qkvref.TORCH_VERSION = torch.__version__
    with open(os.path.join(out, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # Release and ASan trees may ask at once
        with open(os.path.join(out, "torch_version.txt.tmp"), "w") as f:
            f.write(torch.__version__ + "\n")
        os.replace(os.path.join(out, "torch_version.txt.tmp"), os.path.join(out, "torch_version.txt"))
        for fn in sorted(os.listdir(REFS)):
            if not fn.endswith(".py") or fn == "qkvref.py" or fn.startswith("_"):
                continue
            stem = fn[:-3]
            if a.only and stem != a.only:
                continue
            src, dst = os.path.join(REFS, fn), os.path.join(out, stem + ".safetensors")
            stamp = os.path.join(out, stem + ".inputs")
            digest = inputs_digest(stem, torch.__version__)
            if (not a.force and os.path.exists(dst) and os.path.exists(stamp)
                    and open(stamp).read().strip() == digest):
                continue
            t0 = time.time()
            spec = importlib.util.spec_from_file_location(stem, src)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            torch.manual_seed(0)
            mod.main(dst)
            with open(stamp + ".tmp", "w") as f:
                f.write(digest + "\n")
            os.replace(stamp + ".tmp", stamp)
            print(f"gen_refs: {stem} ({time.time() - t0:.1f}s)")


if __name__ == "__main__":
    main()
