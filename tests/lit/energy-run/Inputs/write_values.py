"""Writes a safetensors file holding one F64 vector of the given values.

Usage: write_values.py FILE NAME VALUE...
"""
import json
import struct
import sys

path, name, values = sys.argv[1], sys.argv[2], [float(v) for v in sys.argv[3:]]
header = json.dumps({name: {'dtype': 'F64', 'shape': [len(values)],
                            'data_offsets': [0, 8 * len(values)]}}).encode()
with open(path, 'wb') as f:
    f.write(struct.pack('<Q', len(header)) + header +
            struct.pack('<%dd' % len(values), *values))
