#!/usr/bin/env python3
"""Writes small .npy files without NumPy, for the CLI tests.
  npy.py FILE DESCR SHAPE [--version N] [--fortran] [--truncate K] [--values v,v,...]
DESCR like '<f4', '<u2', '>f4'; SHAPE like 3,4 or '' for a scalar. Values default to 0, 1, 2, ...
"""
import argparse
import struct

CODES = {"f4": "f", "f2": "e", "u2": "H", "i4": "i", "i8": "q", "f8": "d"}

p = argparse.ArgumentParser()
p.add_argument("file")
p.add_argument("descr")
p.add_argument("shape")
p.add_argument("--version", type=int, default=1)
p.add_argument("--fortran", action="store_true")
p.add_argument("--truncate", type=int, default=0)
p.add_argument("--values", default="")
a = p.parse_args()

shape = tuple(int(s) for s in a.shape.split(",") if s)
n = 1
for s in shape:
    n *= s
values = [float(v) for v in a.values.split(",")] if a.values else list(range(n))
code = CODES[a.descr[1:]]
endian = ">" if a.descr[0] == ">" else "<"
if code in "Hiq":
    values = [int(v) for v in values]
data = struct.pack(endian + code * n, *values[:n]) if n else b""
shape_text = "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"
header = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (a.descr, "True" if a.fortran else "False", shape_text)
prefix = 10 if a.version == 1 else 12
pad = 64 - (prefix + len(header) + 1) % 64
header = header + " " * (pad % 64) + "\n"
size = struct.pack("<H", len(header)) if a.version == 1 else struct.pack("<I", len(header))
blob = b"\x93NUMPY" + bytes([a.version, 0]) + size + header.encode() + data
if a.truncate:
    blob = blob[:-a.truncate]
open(a.file, "wb").write(blob)
