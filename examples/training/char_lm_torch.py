#!/usr/bin/env python3
"""The PyTorch anchor of the character-level language model demo: a standard
causal Transformer of about the size of char_transformer.energy (one pre-norm
layer: 4-head attention with query, key, value and output projections, a GELU
MLP of width 128; learned positions, the embedding tied to the read-out), on
the same data, batches, optimiser and number of updates. Writes its loss log
in energy-train's CSV format (so the curves can be drawn together) and
prints its parameter count and time per update.

Usage: char_lm_torch.py TRAIN VAL LOG.csv --batch B --epochs E --lr X [--seed S]
"""
import argparse
import math
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', '..', 'tests', 'e2e', 'training'))
import safetensors_io  # noqa: E402


class Block(torch.nn.Module):
    def __init__(self, d, heads, hidden):
        super().__init__()
        self.heads = heads
        self.norm1 = torch.nn.LayerNorm(d)
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.out = torch.nn.Linear(d, d)
        self.norm2 = torch.nn.LayerNorm(d)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d, hidden), torch.nn.GELU(),
                                       torch.nn.Linear(hidden, d))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(d, dim=2)
        shape = (b, t, self.heads, d // self.heads)
        q, k, v = (z.view(shape).transpose(1, 2) for z in (q, k, v))
        scores = q @ k.transpose(2, 3) / math.sqrt(d // self.heads)
        causal = torch.ones(t, t, dtype=torch.bool).tril()
        weights = torch.softmax(scores.masked_fill(~causal, float('-inf')), dim=3)
        attended = weights @ v
        x = x + self.out(attended.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.norm2(x))


class CharTransformer(torch.nn.Module):
    def __init__(self, vocab, t, d=64, heads=4, hidden=128):
        super().__init__()
        self.embedding = torch.nn.Embedding(vocab, d)
        self.position = torch.nn.Parameter(torch.zeros(t, d))
        self.block = Block(d, heads, hidden)
        self.norm = torch.nn.LayerNorm(d)

    def forward(self, codes):
        x = self.embedding(codes) + self.position
        return self.norm(self.block(x)) @ self.embedding.weight.T


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('train')
    parser.add_argument('val')
    parser.add_argument('log')
    parser.add_argument('--batch', type=int, required=True)
    parser.add_argument('--epochs', type=int, required=True)
    parser.add_argument('--lr', type=float, required=True)
    parser.add_argument('--seed', type=int, default=1)
    arguments = parser.parse_args()
    torch.manual_seed(arguments.seed)
    torch.set_num_threads(os.cpu_count() or 1)
    train = {k: torch.from_numpy(v.argmax(axis=2)) for k, v in
             safetensors_io.read(arguments.train).items()}
    val = {k: torch.from_numpy(v.argmax(axis=2)) for k, v in
           safetensors_io.read(arguments.val).items()}
    count, t = train['tokens'].shape
    vocab = safetensors_io.read(arguments.train)['tokens'].shape[2]
    model = CharTransformer(vocab, t)
    parameters = sum(p.numel() for p in model.parameters())
    optimizer = torch.optim.Adam(model.parameters(), lr=arguments.lr)
    loss_of = torch.nn.functional.cross_entropy
    batches = count // arguments.batch
    generator = np.random.default_rng(arguments.seed)
    rows, update, seconds = [], 0, 0.0
    for epoch in range(arguments.epochs):
        order = generator.permutation(count)
        total, began = 0.0, time.perf_counter()
        for batch in range(batches):
            picked = torch.from_numpy(order[batch * arguments.batch:(batch + 1) * arguments.batch])
            start = time.perf_counter()
            logits = model(train['tokens'][picked])
            loss = loss_of(logits.reshape(-1, vocab), train['target'][picked].reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            seconds += time.perf_counter() - start
            update += 1
            total += loss.item()
            rate = (batch + 1) * arguments.batch / (time.perf_counter() - began)
            rows.append([update, epoch + 1, batch + 1, loss.item(), total / (batch + 1),
                         arguments.lr, rate, ''])
        with torch.no_grad():
            logits = model(val['tokens'])
            validation = loss_of(logits.reshape(-1, vocab), val['target'].reshape(-1)).item()
        rows[-1][-1] = validation
        print('epoch %d: train loss %.4f, validation loss %.4f' % (
            epoch + 1, total / batches, validation), flush=True)
    with open(arguments.log, 'w') as f:
        f.write('update,epoch,batch,loss,running_loss,learning_rate,examples_per_second,'
                'validation_loss\n')
        for row in rows:
            f.write(','.join(str(x) for x in row) + '\n')
    print('parameters %d; %.2f ms per update (forward, backward, Adam)' % (
        parameters, 1e3 * seconds / max(update, 1)))


if __name__ == '__main__':
    main()
