#!/usr/bin/python3
"""Generates every PyTorch reference file for the tests: tools/refs/<stem>.py -> <out>/<stem>.safetensors.

Each script defines main(out_path). A file is regenerated only when it is missing or older than its
script or qkvref.py, so a second run is quick. Run with Debian's /usr/bin/python3 (python3-torch).
"""
import argparse
import fcntl
import importlib.util
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REFS = os.path.join(HERE, "refs")


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
    with open(os.path.join(out, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # Release and ASan trees may ask at once
        common = os.path.getmtime(os.path.join(REFS, "qkvref.py"))
        for fn in sorted(os.listdir(REFS)):
            if not fn.endswith(".py") or fn == "qkvref.py" or fn.startswith("_"):
                continue
            stem = fn[:-3]
            if a.only and stem != a.only:
                continue
            src, dst = os.path.join(REFS, fn), os.path.join(out, stem + ".safetensors")
            if not a.force and os.path.exists(dst) and os.path.getmtime(dst) >= max(common, os.path.getmtime(src)):
                continue
            t0 = time.time()
            spec = importlib.util.spec_from_file_location(stem, src)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            torch.manual_seed(0)
            mod.main(dst)
            print(f"gen_refs: {stem} ({time.time() - t0:.1f}s)")


if __name__ == "__main__":
    main()
