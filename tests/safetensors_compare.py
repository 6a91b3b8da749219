#!/usr/bin/env python3
"""Independent comparison of gridstep checkpoints for tests/run_exec_faults.sh (standard library
only; reads the bytes itself, shares no code with gridstep).

Usage:
  safetensors_compare.py full A.safetensors B.safetensors TOL
      Same tensor names, dtypes (F32) and shapes; per tensor ||a - b||_2 / ||b||_2 <= TOL (TOL 0:
      every byte equal). Prints the largest error.
  safetensors_compare.py sharded DIR FULL.safetensors
      Assembles every tensor of the sharded checkpoint DIR (index.json + rank files: pieces
      "NAME@OFF" at element offsets) and requires it byte-equal to FULL's tensor of that name,
      with the same set of names.
Exits 1 with a message on the first difference."""
import json
import math
import os
import struct
import sys


def fail(msg):
    print("safetensors_compare: " + msg, file=sys.stderr)
    sys.exit(1)


def read(path):
    """{name: (shape list, list of floats)} of an F32 safetensors file."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    header.pop("__metadata__", None)
    data = blob[8 + n:]
    out = {}
    for name, info in header.items():
        if info["dtype"] != "F32":
            fail("%s: %s: dtype %s, expected F32" % (path, name, info["dtype"]))
        begin, end = info["data_offsets"]
        count = (end - begin) // 4
        out[name] = (info["shape"], struct.unpack("<%df" % count, data[begin:end]))
    return out


def full(a_path, b_path, tol):
    a, b = read(a_path), read(b_path)
    if sorted(a) != sorted(b):
        fail("tensor names differ: %s" % sorted(set(a) ^ set(b)))
    worst, worst_name = 0.0, ""
    for name in sorted(a):
        (sa, va), (sb, vb) = a[name], b[name]
        if sa != sb:
            fail("%s: shape %s vs %s" % (name, sa, sb))
        if tol == 0:
            if struct.pack("<%df" % len(va), *va) != struct.pack("<%df" % len(vb), *vb):
                fail("%s: not bit-exact" % name)
            continue
        num = math.sqrt(sum((x - y) ** 2 for x, y in zip(va, vb)))
        den = math.sqrt(sum(y * y for y in vb))
        err = num / den if den > 0 else num
        if err > worst:
            worst, worst_name = err, name
        if err > tol:
            fail("%s: relative L2 error %.3e > %g" % (name, err, tol))
    print("%d tensors, largest relative error %.3e %s" % (len(a), worst, worst_name))


def sharded(directory, full_path):
    with open(os.path.join(directory, "index.json")) as f:
        index = json.load(f)
    files = [read(os.path.join(directory, e["name"])) for e in index["files"]]
    ref = read(full_path)
    if sorted(index["tensors"]) != sorted(ref):
        fail("tensor names differ: %s" % sorted(set(index["tensors"]) ^ set(ref)))
    for name, info in sorted(index["tensors"].items()):
        shape, want = ref[name]
        if info["shape"] != shape:
            fail("%s: shape %s in the index, %s in the full file" % (name, info["shape"], shape))
        got = [None] * len(want)
        for p in info["pieces"]:
            piece_shape, vals = files[p["file"]][p["name"]]
            if len(vals) != p["count"]:
                fail("%s: piece %s holds %d elements, the index says %d" % (name, p["name"], len(vals), p["count"]))
            got[p["offset"]:p["offset"] + p["count"]] = vals
        if any(v is None for v in got) or len(got) != len(want):
            fail("%s: pieces do not tile the tensor" % name)
        if struct.pack("<%df" % len(got), *got) != struct.pack("<%df" % len(want), *want):
            fail("%s: sharded and full values differ" % name)
    print("%d tensors equal" % len(ref))


if len(sys.argv) == 5 and sys.argv[1] == "full":
    full(sys.argv[2], sys.argv[3], float(sys.argv[4]))
elif len(sys.argv) == 4 and sys.argv[1] == "sharded":
    sharded(sys.argv[2], sys.argv[3])
else:
    fail("usage: full A B TOL | sharded DIR FULL")
