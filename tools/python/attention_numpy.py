"""NumPy helpers the self-attention test and benchmark share.

safetensors files of float arrays, and the self-attention energy gradient
(paper 004 eq. 16) computed independently of the compiler:

  dE/dx_r = -Wq^T sum_p w_rp k_p - Wk^T sum_c w_cr q_c,
  q = Wq x, k = Wk x, w_cp = softmax_p(q_c . k_p),

vectorised over blocks of children (a block's scores, block x N, are the
only quadratic storage), in the precision of its inputs.
"""
import json
import struct

import numpy as np


def write_safetensors(path, tensors, dtype='F32'):
    numpy_type = {'F32': '<f4', 'F64': '<f8'}[dtype]
    header, blobs, offset = {}, [], 0
    for name, array in tensors.items():
        data = np.ascontiguousarray(array, dtype=numpy_type).tobytes()
        header[name] = {'dtype': dtype, 'shape': list(np.shape(array)),
                        'data_offsets': [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(text)) + text + b''.join(blobs))


def read_safetensors(path):
    with open(path, 'rb') as f:
        (length,) = struct.unpack('<Q', f.read(8))
        header = json.loads(f.read(length))
        data = f.read()
    result = {}
    for name, info in header.items():
        if name == '__metadata__':
            continue
        begin, end = info['data_offsets']
        numpy_type = {'F32': '<f4', 'F64': '<f8'}[info['dtype']]
        result[name] = np.frombuffer(data[begin:end], dtype=numpy_type).reshape(info['shape'])
    return result


def self_attention_gradient(x, wq, wk, block=1024):
    q, k = x @ wq.T, x @ wk.T
    child = np.empty_like(q)
    parent = np.zeros_like(k)
    for start in range(0, len(x), block):
        scores = q[start:start + block] @ k.T
        scores -= scores.max(axis=1, keepdims=True)
        weights = np.exp(scores)
        weights /= weights.sum(axis=1, keepdims=True)
        child[start:start + block] = weights @ k
        parent += weights.T @ q[start:start + block]
    return -(child @ wq) - (parent @ wk)
