#!/usr/bin/env python3
"""Writes tests/fixtures/data/tiny-fashion-mnist: the first 20 training and 10 test images of
Debian's dataset-fashion-mnist (MIT licence), as gzip IDX files, for fast data tests.
Usage: python3 scripts/make_tiny_fashion_mnist.py [SOURCE_DIR] [OUT_DIR]"""
import gzip
import os
import sys

src = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/datasets/fashion-mnist"
out = sys.argv[2] if len(sys.argv) > 2 else "tests/fixtures/data/tiny-fashion-mnist"
os.makedirs(out, exist_ok=True)


def head(name, count):
    with gzip.open(os.path.join(src, name + ".gz"), "rb") as f:
        data = f.read()
    rank = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(rank)]
    per_item = 1
    for d in dims[1:]:
        per_item *= d
    header = data[:4] + count.to_bytes(4, "big") + data[8:4 + 4 * rank]
    body = data[4 + 4 * rank:4 + 4 * rank + count * per_item]
    # mtime=0: byte-identical output on every run
    with gzip.GzipFile(os.path.join(out, name + ".gz"), "wb", mtime=0) as g:
        g.write(header + body)


for split, count in (("train", 20), ("t10k", 10)):
    head(f"{split}-images-idx3-ubyte", count)
    head(f"{split}-labels-idx1-ubyte", count)
