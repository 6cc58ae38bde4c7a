"""Reads and writes safetensors files with NumPy (F32 and F64), for the
training tests."""
import json
import struct

import numpy as np

_DTYPES = {'F32': np.float32, 'F64': np.float64}


def write(path, tensors, dtype=np.float64):
    header, offset, blobs = {}, 0, []
    for name, value in tensors.items():
        data = np.ascontiguousarray(value, dtype=dtype).tobytes()
        header[name] = {'dtype': 'F64' if dtype == np.float64 else 'F32',
                        'shape': list(np.shape(value)),
                        'data_offsets': [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header).encode()
    text += b' ' * ((8 - len(text) % 8) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def read(path):
    with open(path, 'rb') as f:
        (length,) = struct.unpack('<Q', f.read(8))
        header = json.loads(f.read(length))
        data = f.read()
    tensors = {}
    for name, info in header.items():
        if name == '__metadata__':
            continue
        begin, end = info['data_offsets']
        tensors[name] = np.frombuffer(data[begin:end], dtype=_DTYPES[info['dtype']]
                                      ).reshape(info['shape'])
    return tensors
