#!/usr/bin/env python3
"""The torch anchors of (a) and (b), in process or as a process of their own.

  hopfield(x, m)       -> a function computing softmax(X @ M.T, dim=1) @ M
  self_attention(x, wq, wk)
                       -> a function computing d/dx of
                          E = -sum_c logsumexp_p((x Wq^T)_c . (x Wk^T)_p)
                          by torch.autograd, forward pass included

As a script it times one of them on the tensors of a safetensors file, the
way benchlib.Context.time_anchor does (one warm-up, the median of REPS
calls), and prints {"median_s": ...}; run_all.py uses that to time the
anchor in a process whose environment differs from its own (glibc malloc at
its defaults):

  torch_anchors.py hopfield|self_attention INPUTS.safetensors REPS THREADS
"""
import json
import os
import statistics
import sys
import time

import torch


def hopfield(x, m):
    xt, mt = torch.from_numpy(x), torch.from_numpy(m)

    def anchor():
        with torch.no_grad():
            return torch.softmax(xt @ mt.T, dim=1) @ mt

    return anchor


def self_attention(x, wq, wk):
    xt = torch.from_numpy(x)
    wqt, wkt = torch.from_numpy(wq), torch.from_numpy(wk)

    def gradient():
        leaf = xt.detach().requires_grad_(True)
        q = leaf @ wqt.T
        k = leaf @ wkt.T
        energy = -torch.logsumexp(q @ k.T, dim=1).sum()
        (result,) = torch.autograd.grad(energy, leaf)
        return result

    return gradient


def main():
    which, inputs, reps, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    torch.set_num_threads(threads)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                    '..', 'tools', 'python'))
    from attention_numpy import read_safetensors
    tensors = read_safetensors(inputs)
    if which == 'hopfield':
        function = hopfield(tensors['x'].copy(), tensors['m'].copy())
    else:
        function = self_attention(tensors['x'].copy(), tensors['Wq'].copy(),
                                  tensors['Wk'].copy())
    function()
    times = []
    for _ in range(reps):
        begin = time.perf_counter()
        function()
        times.append(time.perf_counter() - begin)
    print(json.dumps({'median_s': statistics.median(times)}))


if __name__ == '__main__':
    main()
