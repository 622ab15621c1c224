#!/usr/bin/python3
"""sincos_as_learned.py - rewrites a sin-cos APE checkpoint as a learned-APE one.

    sincos_as_learned.py IN.safetensors OUT.safetensors

A model trained with pe.ape = sincos stores no table: vitrain rebuilds it at every grid
from integer positions ("recomputed", position-encodings.md 2.1). To evaluate the same
weights with the training-grid table *interpolated* instead (resampled bicubic onto the
new grid, as a learned table is), this writes OUT = IN plus the tensor pos_embed
(1, 1 + N, D): the training-grid table exactly as src/pe/ape.c's vt_pe_sincos_table
computes it (float32, glibc powf / sinf / cosf called through ctypes, so the values are
bitwise those vitrain adds), its CRC-32 beside the others' in __metadata__["tensor_crc32"],
and the metadata config with pe.ape = "learned". Evaluate
OUT with --set pe.ape=learned: at the training size it gives the sin-cos model's own
logits; at other sizes the table is resampled (scripts/reproduce.sh, positions table).
Needs numpy only.
"""
import ctypes
import json
import os
import struct
import sys
import zlib

import numpy as np


def fail(msg):
    print("sincos_as_learned: " + msg, file=sys.stderr)
    sys.exit(1)


def sincos_table(rows, cols, D):
    """vt_pe_sincos_table: (1 + rows cols, D) float32, CLS row zeros."""
    libm = ctypes.CDLL("libm.so.6")
    for fn in ("powf", "sinf", "cosf"):
        getattr(libm, fn).restype = ctypes.c_float
    libm.powf.argtypes = [ctypes.c_float, ctypes.c_float]
    libm.sinf.argtypes = libm.cosf.argtypes = [ctypes.c_float]
    pd = D // 4
    out = np.zeros((1 + rows * cols, D), dtype=np.float32)
    one, f32 = np.float32(1.0), np.float32
    w = [one / f32(libm.powf(10000.0, float(f32(k) / f32(pd)))) for k in range(pd)]
    for i in range(rows):
        for j in range(cols):
            r = out[1 + i * cols + j]
            for k in range(pd):
                ai, aj = float(f32(i) * w[k]), float(f32(j) * w[k])
                r[k], r[pd + k] = libm.sinf(ai), libm.sinf(aj)
                r[2 * pd + k], r[3 * pd + k] = libm.cosf(ai), libm.cosf(aj)
    return out


def main():
    if len(sys.argv) != 3:
        fail("usage: sincos_as_learned.py IN.safetensors OUT.safetensors")
    src, dst = sys.argv[1], sys.argv[2]
    with open(src, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        fail("%s: too short for a safetensors file" % src)
    n = struct.unpack("<Q", raw[:8])[0]
    if 8 + n > len(raw):
        fail("%s: header of %d bytes past the end of the file" % (src, n))
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    meta = header.get("__metadata__", {})
    if "config" not in meta:
        fail("%s: no __metadata__ config (the checkpoint must come from vitrain)" % src)
    cfg = json.loads(meta["config"])
    if cfg["pe"].get("ape") != "sincos":
        fail("%s: pe.ape is '%s', expected 'sincos'" % (src, cfg["pe"].get("ape")))
    if "pos_embed" in header:
        fail("%s: already has a pos_embed" % src)
    D, P = cfg["model"]["width"], cfg["model"]["patch_size"]
    S = cfg["pe"].get("train_img_size") or cfg["model"]["img_size"]
    g = S // P
    table = sincos_table(g, g, D)
    off = len(data)
    header["pos_embed"] = {"dtype": "F32", "shape": [1, 1 + g * g, D],
                           "data_offsets": [off, off + table.nbytes]}
    cfg["pe"]["ape"] = "learned"
    meta["config"] = json.dumps(cfg, indent=2)
    table_bytes = table.astype("<f4").tobytes()
    if "tensor_crc32" in meta:  # vitrain checks every tensor against it (src/checkpoint.h)
        crcs = json.loads(meta["tensor_crc32"])
        crcs["pos_embed"] = "%08x" % zlib.crc32(table_bytes)
        meta["tensor_crc32"] = json.dumps(crcs, separators=(",", ":"))
    header["__metadata__"] = meta
    hb = json.dumps(header).encode()
    hb += b" " * (-len(hb) % 8)
    tmp = dst + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        f.write(data)
        f.write(table_bytes)
    os.replace(tmp, dst)


if __name__ == "__main__":
    main()
