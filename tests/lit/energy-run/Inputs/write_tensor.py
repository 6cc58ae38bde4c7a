"""Writes a safetensors file holding one F32 tensor of zeros.

Usage: write_tensor.py FILE NAME DIM...
"""
import json
import struct
import sys

path, name, dims = sys.argv[1], sys.argv[2], [int(d) for d in sys.argv[3:]]
count = 1
for d in dims:
    count *= d
header = json.dumps({name: {'dtype': 'F32', 'shape': dims,
                            'data_offsets': [0, 4 * count]}}).encode()
with open(path, 'wb') as f:
    f.write(struct.pack('<Q', len(header)) + header + b'\0' * (4 * count))
