"""Compares two safetensors files: the same tensors, shapes and dtypes, and
values equal within a relative tolerance. Prints "identical" when every
value has the same bits, "close" when they differ within the tolerance, and
exits non-zero naming the first tensor that differs more.

Usage: compare_safetensors.py A B [RELATIVE_TOLERANCE]
"""
import json
import struct
import sys


def read(path):
    with open(path, 'rb') as f:
        data = f.read()
    (length,) = struct.unpack('<Q', data[:8])
    header = json.loads(data[8:8 + length])
    body = data[8 + length:]
    tensors = {}
    for name, entry in header.items():
        if name == '__metadata__':
            continue
        begin, end = entry['data_offsets']
        code = {'F32': 'f', 'F64': 'd'}[entry['dtype']]
        count = (end - begin) // struct.calcsize(code)
        tensors[name] = (entry['dtype'], entry['shape'],
                         struct.unpack('<%d%s' % (count, code),
                                       body[begin:end]))
    return tensors


a, b = read(sys.argv[1]), read(sys.argv[2])
tolerance = float(sys.argv[3]) if len(sys.argv) > 3 else 1e-5
if sorted(a) != sorted(b):
    sys.exit('different tensors: %s vs %s' % (sorted(a), sorted(b)))
identical = True
for name in sorted(a):
    (dtype_a, shape_a, values_a), (dtype_b, shape_b, values_b) = a[name], b[name]
    if (dtype_a, shape_a) != (dtype_b, shape_b):
        sys.exit('%s: %s %s vs %s %s' % (name, dtype_a, shape_a, dtype_b,
                                         shape_b))
    for i, (x, y) in enumerate(zip(values_a, values_b)):
        if struct.pack('<d', x) != struct.pack('<d', y):
            identical = False
        if abs(x - y) > tolerance * max(abs(x), abs(y), 1.0):
            sys.exit('%s[%d]: %r vs %r' % (name, i, x, y))
print('identical' if identical else 'close')
