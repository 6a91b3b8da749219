#!/usr/bin/env python3
"""Independent safetensors checker for tests/check_checkpoint (standard library only).

Usage: safetensors_check.py FILE
Validates the layout (8-byte little-endian header length, JSON header padded to 8 bytes, offsets
tiling the byte buffer, sizes = numel x dtype size) and prints one line per tensor, sorted by
name: NAME DTYPE d0xd1x... CRC32-of-its-bytes (zlib's, 8 hex digits); then "metadata K=V" lines.
Exits 1 with a message on the first violation."""
import json
import struct
import sys
import zlib

SIZES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2, "F16": 2,
         "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "F64": 8, "I64": 8, "U64": 8}


def fail(msg):
    print("safetensors_check: " + msg, file=sys.stderr)
    sys.exit(1)


def main():
    with open(sys.argv[1], "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        fail("shorter than 8 bytes")
    (n,) = struct.unpack("<Q", blob[:8])
    if 8 + n > len(blob):
        fail("header length beyond the file")
    if n % 8 != 0:
        fail("header length %d not a multiple of 8" % n)
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    data = blob[8 + n:]
    meta = header.pop("__metadata__", {})
    spans = []
    lines = []
    for name in sorted(header):
        info = header[name]
        if set(info) != {"dtype", "shape", "data_offsets"}:
            fail("%s: keys %s" % (name, sorted(info)))
        begin, end = info["data_offsets"]
        numel = 1
        for d in info["shape"]:
            numel *= d
        if (end - begin) != numel * SIZES[info["dtype"]]:
            fail("%s: size mismatch" % name)
        spans.append((begin, end, name))
        crc = zlib.crc32(data[begin:end]) & 0xFFFFFFFF
        shape = "x".join(str(d) for d in info["shape"])
        lines.append("%s %s %s %08x" % (name, info["dtype"], shape, crc))
    cursor = 0
    for begin, end, name in sorted(spans):
        if begin != cursor:
            fail("%s: starts at %d, expected %d (hole or overlap)" % (name, begin, cursor))
        cursor = end
    if cursor != len(data):
        fail("buffer has %d bytes, tensors cover %d" % (len(data), cursor))
    for line in lines:
        print(line)
    for k in sorted(meta):
        print("metadata %s=%s" % (k, meta[k]))


main()
