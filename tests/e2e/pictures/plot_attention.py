#!/usr/bin/env python3
"""energy-run --plot-attention: the heat map shows the term's softmax weights.

Runs compiled models, then checks the weights the picture carries against
NumPy float64 softmaxes computed from the run's final tensors (1e-12
relative: the weights come from the double-precision interpreter on the f64
values the run wrote), and the drawing against those weights: one cell per
(child, parent), at its row and column, its colour's luminance rising with
the weight (the colour scale runs dark to light). Bad requests get errors
that name the term or index.

Usage: plot_attention.py ENERGYC ENERGY_RUN EXAMPLES_DIR
"""
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..', '..',
                                'tools', 'python'))
from energy_tools import EnergyTools  # noqa: E402
from chart_checks import chart_metadata, check, finish  # noqa: E402

energyc, energy_run, examples = sys.argv[1:4]


def softmax(scores, mask=None):
    scores = np.where(mask, scores, -np.inf) if mask is not None else scores
    shifted = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def read_heat_map(path):
    """The metadata, and the cells drawn: {(row, column): luminance}."""
    text = open(path).read()
    meta = chart_metadata(text)
    left, top, width, height = meta['cells']
    cells = {}
    pattern = (r'fill:rgb\(([\d.]+)%,([\d.]+)%,([\d.]+)%\);[^"]*" '
               r'd="M ([\d.]+) ([\d.]+) L ([\d.]+) [\d.]+ L [\d.]+ ([\d.]+)')
    for r, g, b, x0, y0, x1, y1 in re.findall(pattern, text):
        x0, y0, x1, y1 = map(float, (x0, y0, x1, y1))
        column, row = (x0 - left) / width, (y0 - top) / height
        inside = 0 <= column < meta['columns'] and 0 <= row < meta['rows']
        if inside and abs(x1 - x0 - width) < 1e-6 and abs(y1 - y0 - height) < 1e-6:
            luminance = 0.2126 * float(r) + 0.7152 * float(g) + 0.0722 * float(b)
            cells[(round(row), round(column))] = luminance
    return meta, cells


def check_picture(name, path, expected):
    meta, cells = read_heat_map(path)
    values = np.array(meta['values']).reshape(meta['rows'], meta['columns'])
    check(values.shape == expected.shape, '%s: %d x %d weights' % ((name,) + values.shape))
    error = np.abs(values - expected).max() / np.abs(expected).max()
    check(error <= 1e-12, '%s: the weights are NumPy\'s softmax (%.1e)' % (name, error))
    check(len(cells) == values.size, '%s: one cell per weight (%d)' % (name, len(cells)))
    order = sorted(cells, key=lambda cell: values[cell])
    luminance = [cells[cell] for cell in order]
    rises = all(b >= a - 0.5 for a, b in zip(luminance, luminance[1:]))
    check(rises, '%s: cells get lighter as the weight grows' % name)
    top = max(cells, key=cells.get)
    check(values[top] == values.max(), '%s: the lightest cell is the largest weight' % name)


with tempfile.TemporaryDirectory() as directory:
    tools = EnergyTools(energyc, energy_run, directory)

    # Self-attention after two steps: every child over every parent.
    artifact = tools.compile(os.path.join(examples, 'self_attention.energy'), 'f64')
    picture = os.path.join(directory, 'attention.svg')
    rng = np.random.default_rng(3)
    wq, wk = rng.normal(size=(4, 4)), rng.normal(size=(4, 4))
    _, final = tools.run(artifact, inputs={'x': rng.normal(size=(7, 4)), 'Wq': wq, 'Wk': wk},
                         steps=2, extra=['--plot-attention', 'attn:', picture])
    x = final['x']
    check_picture('self_attention', picture, softmax((x @ wq.T) @ (x @ wk.T).T))

    # Causal multi-head attention with a temperature, child i held at 4:
    # one row per head, zeros after position 4.
    artifact = tools.compile(os.path.join(examples, 'tied_mha.energy'), 'f64')
    picture = os.path.join(directory, 'heads.svg')
    n, d, h = 6, 4, 2
    hh = rng.normal(size=(n, d))
    wq, wk = rng.normal(size=(h, d // h, d)), rng.normal(size=(h, d // h, d))
    _, final = tools.run(artifact, inputs={'h': hh, 'Wq': wq, 'Wk': wk},
                         dims={'H': h}, extra=['--plot-attention', 'attn:i=4', picture])
    x = final['x']
    tau = 8.0
    scores = np.stack([(wq[k] @ x[4]) @ (wk[k] @ hh.T) / tau for k in range(h)])
    expected = softmax(scores, np.arange(n)[None, :] <= 4)
    check_picture('tied_mha', picture, expected)
    check(np.all(expected[:, 5:] == 0), 'tied_mha: the mask leaves position 5 at 0')

    # Errors name what is wrong and exit non-zero.
    small = {'self_attention': ['N=4', 'D=3'], 'linear_attention': ['N=4', 'D=3'],
             'slds': ['T=4', 'K=2', 'D=3']}
    for model, spec, message in [
            ('self_attention', 'energy:', "has no energy term 'energy' (its terms: attn)"),
            ('self_attention', 'attn:q=1', "has no child index 'q' (its child indices: c)"),
            ('self_attention', 'attn:c', 'expected TERM or TERM:INDEX=POSITION'),
            ('linear_attention', 'lin:', "has no lse, so no softmax weights"),
            ('slds', 'dyn:', 'ranges over T - 1, not over a dim: give it a position')]:
        dims = [argument for dim in small[model] for argument in ('--dim', dim)]
        result = subprocess.run(
            [energy_run, os.path.join(examples, model + '.energy'), '--init', 'random:1',
             '--steps', '0', '--plot-attention', spec, os.path.join(directory, 'x.svg')] + dims,
            capture_output=True, text=True)
        check(result.returncode != 0 and message in result.stderr,
              '%s %s: %s' % (model, spec, result.stderr.strip().splitlines()[0]
                             if result.stderr.strip() else '(no message)'))
    # Child held at a position, the other children free: the SLDS transition
    # weights at t = 1.
    check(subprocess.run(
        [energy_run, os.path.join(examples, 'slds.energy'), '--init', 'random:1',
         '--dim', 'T=4', '--dim', 'K=2', '--dim', 'D=3', '--steps', '1',
         '--plot-attention', 'dyn:t=1', os.path.join(directory, 'slds.png')],
        capture_output=True).returncode == 0, 'slds dyn:t=1 draws a PNG')

finish()
