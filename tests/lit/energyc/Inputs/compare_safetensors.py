"""Compares two safetensors files: the same tensors, shapes and dtypes, and
values equal within a relative tolerance. Prints "identical" when every
value has the same bits, "close" when they differ within the tolerance, and
exits non-zero naming the first tensor that differs more. The tolerance is
relative to max(|a|, |b|, 1); with --each, to max(|a|, |b|) of each element
however small, and the dtypes may differ (a compiled f32 result against the
interpreter's f64).

Usage: compare_safetensors.py [--each] A B [RELATIVE_TOLERANCE]
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


arguments = sys.argv[1:]
each = '--each' in arguments
if each:
    arguments.remove('--each')
a, b = read(arguments[0]), read(arguments[1])
tolerance = float(arguments[2]) if len(arguments) > 2 else 1e-5
floor = 0.0 if each else 1.0
if sorted(a) != sorted(b):
    sys.exit('different tensors: %s vs %s' % (sorted(a), sorted(b)))
identical = True
for name in sorted(a):
    (dtype_a, shape_a, values_a), (dtype_b, shape_b, values_b) = a[name], b[name]
    if shape_a != shape_b or (dtype_a != dtype_b and not each):
        sys.exit('%s: %s %s vs %s %s' % (name, dtype_a, shape_a, dtype_b,
                                         shape_b))
    for i, (x, y) in enumerate(zip(values_a, values_b)):
        if struct.pack('<d', x) != struct.pack('<d', y):
            identical = False
        if abs(x - y) > tolerance * max(abs(x), abs(y), floor):
            sys.exit('%s[%d]: %r vs %r' % (name, i, x, y))
print('identical' if identical else 'close')
