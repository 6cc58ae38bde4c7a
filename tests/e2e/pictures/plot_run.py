#!/usr/bin/env python3
"""energy-run --plot: the drawn lines are the run's numbers.

Runs compiled models with --plot FILE.svg --json and checks, independently
of the plotting code:
- the line of each series, read back from the SVG's <path> coordinates and
  mapped to data through the axes the picture records, passes through the
  numbers --json prints (to 2e-5 of the axis range: cairo keeps coordinates
  in 24.8 fixed point, 1/256 px, on frames of 200 and 540 px; it also drops
  points that fall on a straight line, so the check interpolates the drawn
  polyline at every step), and the total energy after each step equals the
  run's trace exactly;
- the energy at step 0 equals `--eval energy` at the same start, and the
  per-term energies add up to the total (f64: to 1e-12 relative);
- the gradient norm at step 0 equals the norm of `--eval grad` there;
- a .png is a PNG of the picture's size, with the line colour in it.

Usage: plot_run.py ENERGYC ENERGY_RUN EXAMPLES_DIR
"""
import os
import re
import struct
import sys
import tempfile
import zlib

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..', '..',
                                'tools', 'python'))
from energy_tools import EnergyTools  # noqa: E402
from chart_checks import chart_metadata, check, finish  # noqa: E402

energyc, energy_run, examples = sys.argv[1:4]


def svg_lines(path):
    """The chart metadata and the thick (data) paths of an SVG: for each
    path its stroke colour (0..1) and its points."""
    text = open(path).read()
    metadata = chart_metadata(text)
    paths = []
    for style, d in re.findall(r'<path style="([^"]*stroke-width:2;[^"]*)" d="([^"]*)"', text):
        rgb = re.search(r'stroke:rgb\(([\d.]+)%,([\d.]+)%,([\d.]+)%\)', style)
        numbers = [float(v) for v in re.findall(r'-?[\d.]+(?:e-?\d+)?', d)]
        points = list(zip(numbers[0::2], numbers[1::2]))
        paths.append((np.array([float(c) / 100 for c in rgb.groups()]), points))
    return metadata, paths


def drawn_series(metadata, paths):
    """{(panel title, line name): data points read back from the drawing}."""
    series = {}
    for panel in metadata['panels']:
        left, top, width, height = panel['frame']
        x_low, x_high = panel['x_range']
        y_low, y_high = panel['y_range']
        for line in panel['lines']:
            rgb = np.array(line['rgb'])
            for colour, points in paths:
                inside = all(left - 1 <= px <= left + width + 1 and
                             top - 1 <= py <= top + height + 1 for px, py in points)
                if np.abs(colour - rgb).max() < 2e-3 and inside and len(points) >= 2:
                    xs = [x_low + (px - left) / width * (x_high - x_low) for px, _ in points]
                    ys = [y_low + (1 - (py - top) / height) * (y_high - y_low) for _, py in points]
                    if panel['log_y']:
                        ys = [10 ** y for y in ys]
                    series[(panel['title'], line['name'])] = (
                        np.array(xs), np.array(ys), (x_high - x_low, y_high - y_low))
                    break
    return series


def check_model(tools, name, dims, steps, terms):
    artifact = tools.compile(os.path.join(examples, name + '.energy'), 'f64')
    picture = os.path.join(tools.directory, name + '.svg')
    printed, _ = tools.run(artifact, dims=dims, steps=steps, init=5,
                           extra=['--plot', picture])
    plot = printed['plot']
    start_energy = tools.energy(artifact, dims=dims, init=5)
    _, gradients = tools.run(artifact, dims=dims, init=5, evaluate='grad')
    start_norm = np.sqrt(sum(float((g ** 2).sum()) for g in gradients.values()))

    check(plot['steps'] == list(range(steps + 1)),
          '%s: one point per step and the start' % name)
    check(plot['energy'][1:] == printed['trace'],
          '%s: plotted energies after each step are the trace' % name)
    check(abs(plot['energy'][0] - start_energy) <= 1e-12 * abs(start_energy),
          '%s: energy at step 0 %.9g is --eval energy %.9g' % (name, plot['energy'][0], start_energy))
    check(abs(plot['grad_norm'][0] - start_norm) <= 1e-12 * start_norm,
          '%s: gradient norm at step 0 %.9g is |--eval grad| %.9g' % (name, plot['grad_norm'][0], start_norm))
    check(sorted(plot['terms']) == sorted(terms), '%s: terms %s' % (name, sorted(plot['terms'])))
    if terms:
        total = np.sum([plot['terms'][t] for t in terms], axis=0)
        error = np.abs(total - plot['energy']).max() / np.abs(plot['energy']).max()
        check(error <= 1e-12, '%s: terms add up to the total (%.1e)' % (name, error))

    metadata, paths = svg_lines(picture)
    drawn = drawn_series(metadata, paths)
    expected = {('energy', 'total'): plot['energy'],
                ('gradient', 'gradient norm'): plot['grad_norm']}
    for term in terms:
        expected[('energy', 'term ' + term)] = plot['terms'][term]
    for (panel, line), values in expected.items():
        found = [key for key in drawn if panel in key[0].lower() and key[1] == line]
        check(len(found) == 1, '%s: the %s line is drawn once' % (name, line))
        if not found:
            continue
        xs, ys, (x_span, y_span) = drawn[found[0]]
        values = np.array(values)
        steps_axis = np.arange(steps + 1)
        x_error = max(abs(xs[0] - steps_axis[0]), abs(xs[-1] - steps_axis[-1])) / x_span
        if metadata_log(metadata, found[0][0]):
            at_steps = np.interp(steps_axis, xs, np.log10(ys))
            error = np.abs(at_steps - np.log10(values)).max() / y_span
        else:
            error = np.abs(np.interp(steps_axis, xs, ys) - values).max() / y_span
        check(error <= 2e-5 and x_error <= 2e-5,
              '%s: the drawn %s line passes through the data (%.1e of the y axis, '
              'ends %.1e of x)' % (name, line, error, x_error))


def metadata_log(metadata, title):
    return any(p['title'] == title and p['log_y'] for p in metadata['panels'])


def png_size(path):
    data = open(path, 'rb').read()
    assert data[:8] == b'\x89PNG\r\n\x1a\n', 'not a PNG'
    return struct.unpack('>II', data[16:24])


with tempfile.TemporaryDirectory() as directory:
    tools = EnergyTools(energyc, energy_run, directory)
    # One term, EM steps (three stationary nodes in the gradient norm).
    check_model(tools, 'gmm', {'N': 60, 'K': 3, 'D': 2}, 6, [])
    # Two terms (attention and the MLP energy), gradient steps.
    check_model(tools, 'transformer_block', {'N': 5, 'D': 4, 'H': 2}, 3, ['attn', 'mlp'])

    artifact = tools.compile(os.path.join(examples, 'hopfield.energy'), 'f64')
    picture = os.path.join(directory, 'hopfield.png')
    tools.run(artifact, dims={'N': 4, 'K': 3, 'D': 5}, steps=4, init=2,
              extra=['--plot', picture])
    width, height = png_size(picture)
    check((width, height) == (1640, 1200), 'hopfield: the PNG is 1640 x 1200 (%d x %d)' % (width, height))

    # Bad requests: a clear error, no file.
    import subprocess
    for arguments, message in [
            (['--plot', os.path.join(directory, 'x.pdf')], 'written as .svg or .png'),
            (['--plot', os.path.join(directory, 'y.svg'), '--eval', 'energy'], '--plot draws a compiled run')]:
        result = subprocess.run([energy_run, artifact, '--dim', 'N=4', '--dim', 'K=3',
                                 '--dim', 'D=5', '--init', 'random:1'] + arguments,
                                capture_output=True, text=True)
        check(result.returncode != 0 and message in result.stderr,
              'error for %s: %s' % (' '.join(arguments[:2]), result.stderr.strip()))

finish()
