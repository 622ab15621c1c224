#!/usr/bin/env python3
"""make_sample_data.py - write a tiny sample dataset for vitrain's image readers.

Usage: python3 scripts/make_sample_data.py OUTDIR [--seed N]

Python 3 standard library only (zlib for PNG). Writes, deterministically for a seed:
  OUTDIR/imagefolder/train/<class>/*   3 classes x 12 images
  OUTDIR/imagefolder/val/<class>/*     3 classes x 4 images
      classes: hstripes, vstripes, checker (learnable patterns with noise); files are
      JPEG (baseline, color and 1-component gray) and PNG (8-bit RGB and gray, 16-bit RGB,
      palette, RGBA, gray+alpha), odd sizes (some smaller than a 32 px input), upper- and
      lower-case extensions, and one README.txt per split that the reader ignores.
  OUTDIR/cifar10/data_batch_1..5.bin, test_batch.bin   CIFAR-10 binary format
      (label byte + R, G, B planes of 32 x 32), 20 records per file
  OUTDIR/cifar100/train.bin, test.bin                  CIFAR-100 binary format
      (coarse byte + fine byte + planes), 60 and 20 records
The JPEG encoder below is a minimal baseline one (4:4:4, standard luminance tables for
every component, float DCT): enough for sample files, not for quality or speed.
"""
import argparse
import math
import os
import random
import struct
import zlib

# ---- PNG ---------------------------------------------------------------------------------


def _chunk(kind, data):
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)


def write_png(path, w, h, color_type, depth, rows, palette=None):
    """rows: h lists of samples (ints), already in the file's channel layout."""
    raw = bytearray()
    for row in rows:
        raw.append(0)  # filter: none
        if depth == 16:
            for v in row:
                raw += struct.pack(">H", v)
        else:
            raw += bytes(row)
    data = b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, color_type, 0, 0, 0))
    if palette is not None:
        data += _chunk(b"PLTE", bytes(c for rgb in palette for c in rgb))
    data += _chunk(b"IDAT", zlib.compress(bytes(raw), 9)) + _chunk(b"IEND", b"")
    with open(path, "wb") as f:
        f.write(data)


# ---- JPEG (baseline) ---------------------------------------------------------------------

ZIGZAG = [0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5, 12, 19, 26, 33, 40, 48, 41, 34, 27,
          20, 13, 6, 7, 14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51,
          58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63]  # zigzag k -> raster
YQT = [16, 11, 10, 16, 24, 40, 51, 61, 12, 12, 14, 19, 26, 58, 60, 55, 14, 13, 16, 24, 40, 57, 69, 56,
       14, 17, 22, 29, 51, 87, 80, 62, 18, 22, 37, 56, 68, 109, 103, 77, 24, 35, 55, 64, 81, 104, 113,
       92, 49, 64, 78, 87, 103, 121, 120, 101, 72, 92, 95, 98, 112, 100, 103, 99]  # raster order
DC_BITS = [0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0]
DC_VALS = list(range(12))
AC_BITS = [0, 2, 1, 3, 3, 2, 4, 3, 5, 5, 4, 4, 0, 0, 1, 0x7D]
AC_VALS = [
    0x01, 0x02, 0x03, 0x00, 0x04, 0x11, 0x05, 0x12, 0x21, 0x31, 0x41, 0x06, 0x13, 0x51, 0x61, 0x07,
    0x22, 0x71, 0x14, 0x32, 0x81, 0x91, 0xA1, 0x08, 0x23, 0x42, 0xB1, 0xC1, 0x15, 0x52, 0xD1, 0xF0,
    0x24, 0x33, 0x62, 0x72, 0x82, 0x09, 0x0A, 0x16, 0x17, 0x18, 0x19, 0x1A, 0x25, 0x26, 0x27, 0x28,
    0x29, 0x2A, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39, 0x3A, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, 0x49,
    0x4A, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58, 0x59, 0x5A, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69,
    0x6A, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78, 0x79, 0x7A, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89,
    0x8A, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99, 0x9A, 0xA2, 0xA3, 0xA4, 0xA5, 0xA6, 0xA7,
    0xA8, 0xA9, 0xAA, 0xB2, 0xB3, 0xB4, 0xB5, 0xB6, 0xB7, 0xB8, 0xB9, 0xBA, 0xC2, 0xC3, 0xC4, 0xC5,
    0xC6, 0xC7, 0xC8, 0xC9, 0xCA, 0xD2, 0xD3, 0xD4, 0xD5, 0xD6, 0xD7, 0xD8, 0xD9, 0xDA, 0xE1, 0xE2,
    0xE3, 0xE4, 0xE5, 0xE6, 0xE7, 0xE8, 0xE9, 0xEA, 0xF1, 0xF2, 0xF3, 0xF4, 0xF5, 0xF6, 0xF7, 0xF8,
    0xF9, 0xFA]
COS = [[math.cos((2 * x + 1) * u * math.pi / 16) * (math.sqrt(0.5) if u == 0 else 1.0) for x in range(8)]
       for u in range(8)]


def _huff_codes(bits, vals):
    """Canonical Huffman codes (JPEG Annex C): symbol -> (code, length)."""
    codes, code, k = {}, 0, 0
    for length in range(1, 17):
        for _ in range(bits[length - 1]):
            codes[vals[k]] = (code, length)
            code += 1
            k += 1
        code <<= 1
    return codes


DC_CODES = _huff_codes(DC_BITS, DC_VALS)
AC_CODES = _huff_codes(AC_BITS, AC_VALS)


class _BitWriter:
    def __init__(self):
        self.out = bytearray()
        self.acc = 0
        self.n = 0

    def put(self, code, length):
        self.acc = (self.acc << length) | code
        self.n += length
        while self.n >= 8:
            byte = (self.acc >> (self.n - 8)) & 0xFF
            self.out.append(byte)
            if byte == 0xFF:
                self.out.append(0)  # byte stuffing
            self.n -= 8
        self.acc &= (1 << self.n) - 1

    def flush(self):
        if self.n:
            self.put((1 << (8 - self.n)) - 1, 8 - self.n)  # pad with 1 bits


def _magnitude(v):
    """JPEG size category and extra bits of a coefficient."""
    size = abs(v).bit_length()
    return size, (v if v >= 0 else v + (1 << size) - 1)


def _fdct(block):
    """8x8 forward DCT-II (JPEG scaling) of a raster-order block of level-shifted samples."""
    tmp = [[sum(block[y * 8 + x] * COS[u][x] for x in range(8)) for u in range(8)] for y in range(8)]
    return [0.25 * sum(tmp[y][u] * COS[v][y] for y in range(8)) for v in range(8) for u in range(8)]


def write_jpeg(path, w, h, planes, quality=90):
    """planes: 1 (gray) or 3 (Y, Cb, Cr) lists of h*w sample values 0..255."""
    scale = 5000 // quality if quality < 50 else 200 - 2 * quality
    qt = [min(255, max(1, (q * scale + 50) // 100)) for q in YQT]
    nc = len(planes)
    out = bytearray(b"\xFF\xD8")
    out += b"\xFF\xDB" + struct.pack(">HB", 67, 0) + bytes(qt[ZIGZAG[k]] for k in range(64))
    sof = struct.pack(">BHHB", 8, h, w, nc) + b"".join(struct.pack(">BBB", i + 1, 0x11, 0) for i in range(nc))
    out += b"\xFF\xC0" + struct.pack(">H", 2 + len(sof)) + sof
    for cls, bits, vals in ((0x00, DC_BITS, DC_VALS), (0x10, AC_BITS, AC_VALS)):
        out += b"\xFF\xC4" + struct.pack(">HB", 3 + 16 + len(vals), cls) + bytes(bits) + bytes(vals)
    sos = struct.pack(">B", nc) + b"".join(struct.pack(">BB", i + 1, 0x00) for i in range(nc)) + b"\x00\x3F\x00"
    out += b"\xFF\xDA" + struct.pack(">H", 2 + len(sos)) + sos
    bw = _BitWriter()
    prev = [0] * nc
    for by in range(0, h, 8):
        for bx in range(0, w, 8):
            for c in range(nc):
                block = [planes[c][min(by + y, h - 1) * w + min(bx + x, w - 1)] - 128.0
                         for y in range(8) for x in range(8)]
                coef = _fdct(block)
                q = [int(round(coef[ZIGZAG[k]] / qt[ZIGZAG[k]])) for k in range(64)]
                size, extra = _magnitude(q[0] - prev[c])
                prev[c] = q[0]
                bw.put(*DC_CODES[size])
                if size:
                    bw.put(extra, size)
                run = 0
                for k in range(1, 64):
                    if q[k] == 0:
                        run += 1
                        continue
                    while run > 15:
                        bw.put(*AC_CODES[0xF0])
                        run -= 16
                    size, extra = _magnitude(q[k])
                    bw.put(*AC_CODES[(run << 4) | size])
                    bw.put(extra, size)
                    run = 0
                if run:
                    bw.put(*AC_CODES[0x00])
    bw.flush()
    out += bw.out + b"\xFF\xD9"
    with open(path, "wb") as f:
        f.write(out)


def rgb_to_ycbcr(rgb):
    """rgb: h*w (r, g, b) tuples -> Y, Cb, Cr planes (JFIF)."""
    ys, cbs, crs = [], [], []
    for r, g, b in rgb:
        ys.append(min(255, max(0, 0.299 * r + 0.587 * g + 0.114 * b)))
        cbs.append(min(255, max(0, 128 - 0.168736 * r - 0.331264 * g + 0.5 * b)))
        crs.append(min(255, max(0, 128 + 0.5 * r - 0.418688 * g - 0.081312 * b)))
    return [ys, cbs, crs]


# ---- patterns ----------------------------------------------------------------------------

CLASSES = ["checker", "hstripes", "vstripes"]


def pattern(cls, w, h, rng):
    """h*w (r, g, b) tuples: the class pattern with a random phase, period, tint and noise."""
    period = rng.randint(4, 7)
    phase = rng.randint(0, period - 1)
    tint = [rng.randint(0, 60) for _ in range(3)]
    px = []
    for y in range(h):
        for x in range(w):
            if cls == "hstripes":
                on = ((y + phase) // period) % 2
            elif cls == "vstripes":
                on = ((x + phase) // period) % 2
            else:
                on = (((x + phase) // period) + ((y + phase) // period)) % 2
            base = 190 if on else 50
            px.append(tuple(min(255, max(0, base + tint[c] - 30 + rng.randint(-12, 12))) for c in range(3)))
    return px


def gray_of(px):
    return [int(round(0.299 * r + 0.587 * g + 0.114 * b)) for r, g, b in px]


def save_image(path_no_ext, kind, px, w, h, rng):
    """Write px in one of the sample formats; returns the file name used."""
    if kind == "jpg_color":
        path = path_no_ext + ".jpg"
        write_jpeg(path, w, h, rgb_to_ycbcr(px), quality=90)
    elif kind == "jpg_gray":
        path = path_no_ext + ".JPEG"
        write_jpeg(path, w, h, [gray_of(px)], quality=90)
    elif kind == "png_rgb":
        path = path_no_ext + ".png"
        write_png(path, w, h, 2, 8, [[c for p in px[y * w:(y + 1) * w] for c in p] for y in range(h)])
    elif kind == "png_gray":
        path = path_no_ext + ".PNG"
        g = gray_of(px)
        write_png(path, w, h, 0, 8, [g[y * w:(y + 1) * w] for y in range(h)])
    elif kind == "png_rgb16":
        path = path_no_ext + ".png"
        write_png(path, w, h, 2, 16, [[c * 257 + rng.randint(0, 200) for p in px[y * w:(y + 1) * w] for c in p]
                                      for y in range(h)])
    elif kind == "png_palette":
        path = path_no_ext + ".png"
        levels = [0, 64, 128, 192, 255]
        palette = [(r, g, b) for r in levels for g in levels for b in levels][:125]
        idx = [25 * min(range(5), key=lambda i: abs(levels[i] - p[0])) +
               5 * min(range(5), key=lambda i: abs(levels[i] - p[1])) +
               min(range(5), key=lambda i: abs(levels[i] - p[2])) for p in px]
        write_png(path, w, h, 3, 8, [idx[y * w:(y + 1) * w] for y in range(h)], palette=palette)
    elif kind == "png_rgba":
        path = path_no_ext + ".png"
        write_png(path, w, h, 6, 8, [[c for p in px[y * w:(y + 1) * w] for c in p + (255,)] for y in range(h)])
    else:  # png_gray_alpha
        path = path_no_ext + ".png"
        g = gray_of(px)
        write_png(path, w, h, 4, 8, [[v for q in g[y * w:(y + 1) * w] for v in (q, 200)] for y in range(h)])
    return os.path.basename(path)


KINDS = ["jpg_color", "png_rgb", "jpg_gray", "png_gray", "png_rgb16", "png_palette", "png_rgba",
         "png_gray_alpha"]


def make_imagefolder(root, rng):
    for split, per_class in (("train", 12), ("val", 4)):
        for k, cls in enumerate(CLASSES):
            d = os.path.join(root, split, cls)
            os.makedirs(d, exist_ok=True)
            for i in range(per_class):
                w, h = rng.choice([(37, 29), (41, 33), (23, 45), (30, 30), (17, 13), (48, 35)])
                px = pattern(cls, w, h, rng)
                save_image(os.path.join(d, "%s_%03d" % (cls, i)), KINDS[(i + k) % len(KINDS)], px, w, h, rng)
        with open(os.path.join(root, split, CLASSES[0], "README.txt"), "w") as f:
            f.write("Not an image: vitrain ignores files without a .jpg/.jpeg/.png extension.\n")


def cifar_record(label_bytes, cls, rng):
    px = pattern(CLASSES[cls % 3], 32, 32, rng)
    planes = bytes(p[c] for c in range(3) for p in px)
    return bytes(label_bytes) + planes


def make_cifar(root, rng):
    d10 = os.path.join(root, "cifar10")
    os.makedirs(d10, exist_ok=True)
    names = ["data_batch_%d.bin" % i for i in range(1, 6)] + ["test_batch.bin"]
    for name in names:
        with open(os.path.join(d10, name), "wb") as f:
            for _ in range(20):
                label = rng.randint(0, 9)
                f.write(cifar_record([label], label, rng))
    d100 = os.path.join(root, "cifar100")
    os.makedirs(d100, exist_ok=True)
    for name, n in (("train.bin", 60), ("test.bin", 20)):
        with open(os.path.join(d100, name), "wb") as f:
            for _ in range(n):
                fine = rng.randint(0, 99)
                f.write(cifar_record([fine // 5, fine], fine, rng))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir", help="directory to write imagefolder/, cifar10/ and cifar100/ into")
    ap.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    make_imagefolder(os.path.join(args.outdir, "imagefolder"), rng)
    make_cifar(args.outdir, rng)
    print("wrote %s/imagefolder (3 classes), %s/cifar10, %s/cifar100" % ((args.outdir,) * 3))


if __name__ == "__main__":
    main()
