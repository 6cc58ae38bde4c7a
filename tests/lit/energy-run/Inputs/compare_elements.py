"""Compares two safetensors files element by element: |a - b| within
TOLERANCE × |b| for every element of every tensor of B (relative to each
element, however small); prints "agree" or the first element that does
not.

Usage: compare_elements.py A B TOLERANCE
"""
import json
import struct
import sys


def read(path):
    with open(path, 'rb') as f:
        data = f.read()
    size = struct.unpack('<Q', data[:8])[0]
    header = json.loads(data[8:8 + size])
    body = data[8 + size:]
    tensors = {}
    for name, entry in header.items():
        if name == '__metadata__':
            continue
        start, end = entry['data_offsets']
        code, width = {'F32': ('f', 4), 'F64': ('d', 8)}[entry['dtype']]
        count = (end - start) // width
        tensors[name] = struct.unpack('<%d%s' % (count, code), body[start:end])
    return tensors


a, b, tolerance = read(sys.argv[1]), read(sys.argv[2]), float(sys.argv[3])
for name, expected in b.items():
    for index, (x, y) in enumerate(zip(a[name], expected)):
        if not abs(x - y) <= tolerance * abs(y):
            print('%s[%d]: %r against %r' % (name, index, x, y))
            sys.exit(1)
print('agree')
