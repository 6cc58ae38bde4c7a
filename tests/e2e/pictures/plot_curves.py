#!/usr/bin/env python3
"""energy-curves: loss curves from CSV files, as energy-train writes them.

Draws two CSV files (one with an empty cell, left out) and checks, from the
SVG's metadata, that each line's points are the files' rows; that without
--y-max the y axis covers every point (5 % padding each side) and with
--y-max Y it ends at Y (points above it leave the frame, which clips the
lines: the frame is a clip rectangle before each line); and that bad
arguments are one-line errors with a non-zero status.
Usage: plot_curves.py ENERGY_CURVES
"""
import os
import re
import subprocess
import sys
import tempfile
from chart_checks import chart_metadata, check, finish  # noqa: E402

energy_curves = sys.argv[1]


def metadata(path):
    text = open(path).read()
    chart = chart_metadata(text)
    return chart['panels'][0], text


with tempfile.TemporaryDirectory() as work:
    first, second = os.path.join(work, 'a.csv'), os.path.join(work, 'b.csv')
    with open(first, 'w') as f:
        f.write('update,loss\n1,60\n2,8\n3,\n4,2.5\n')
    with open(second, 'w') as f:
        f.write('update,loss,other\n1,4.0,0\n2,3.0,0\n3,2.0,0\n')
    plain, capped = os.path.join(work, 'plain.svg'), os.path.join(work, 'capped.svg')
    for out, extra in ((plain, []), (capped, ['--y-max', '4.5'])):
        subprocess.run([energy_curves, out, '--x', 'update', '--y', 'loss', 'A=' + first,
                        'B=' + second] + extra, check=True)
    panel, _ = metadata(plain)
    lines = {line['name']: line['points'] for line in panel['lines']}
    check(lines == {'A': [[1, 60], [2, 8], [4, 2.5]], 'B': [[1, 4], [2, 3], [3, 2]]},
          'the lines are the rows with both cells: %s' % lines)
    low, high = panel['y_range']
    check(abs(low - (2 - 0.05 * 58)) < 1e-9 and abs(high - (60 + 0.05 * 58)) < 1e-9,
          'without --y-max the y axis covers the data with 5 %% padding: %s' % panel['y_range'])
    panel, text = metadata(capped)
    low, high = panel['y_range']
    check(high == 4.5 and abs(low - (2 - 0.05 * 2.5)) < 1e-9,
          'with --y-max 4.5 the y axis ends at 4.5: %s' % panel['y_range'])
    check(len(re.findall(r'<clipPath', text)) >= 2,
          'the lines are clipped to the frame (one clip path per line)')
    for extra, expected in ((['--y-max', 'high'], "--y-max needs a number, got 'high'"),
                            (['--y-max'], "--y-max needs a number, got ''"),
                            (['--y-min', '1'], 'unknown option --y-min')):
        result = subprocess.run([energy_curves, capped, '--x', 'update', '--y', 'loss',
                                 'A=' + first] + extra, capture_output=True, text=True)
        check(result.returncode != 0 and expected in result.stderr,
              '%s: status %d, %s' % (' '.join(extra), result.returncode, result.stderr.strip()))

finish()
