#!/usr/bin/env python3
"""Writes N images of uniform noise (28 x 28, seeded, so always the same) as the gzip IDX pair
PREFIX-images-idx3-ubyte.gz + PREFIX-labels-idx1-ubyte.gz, labels i % 10: the "synthetic set that
is nothing like the data" of the evaluation test and bench/eval_real_data.sh.
Usage: python3 scripts/make_noise_idx.py PREFIX N"""
import gzip
import random
import struct
import sys

prefix, n = sys.argv[1], int(sys.argv[2])
random.seed(0)
with gzip.open(f"{prefix}-images-idx3-ubyte.gz", "wb") as f:
    f.write(struct.pack(">IIII", 0x803, n, 28, 28) + bytes(random.randrange(256) for _ in range(n * 784)))
with gzip.open(f"{prefix}-labels-idx1-ubyte.gz", "wb") as f:
    f.write(struct.pack(">II", 0x801, n) + bytes(i % 10 for i in range(n)))
