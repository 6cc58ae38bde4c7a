#!/usr/bin/env python3
"""Every example's GPU kernels pass ptxas: `energyc --target cuda --emit=ptx`
in f32 and f64 (or one of them), each architecture's PTX through ptxas
(tools/python/ptx_images.py).

Usage: ptxas_check.py ENERGYC EXAMPLES_DIR [f32|f64|both] [PTXAS]
Exits 77 (skipped) with a message when ptxas is not there (no CUDA toolkit).
"""
import glob
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', '..', 'tools', 'python'))
from ptx_images import PTXAS, assemble_images, split_images  # noqa: E402


def main():
    energyc, examples = sys.argv[1], sys.argv[2]
    which = sys.argv[3] if len(sys.argv) > 3 else 'both'
    dtypes = ('f32', 'f64') if which == 'both' else (which,)
    ptxas = sys.argv[4] if len(sys.argv) > 4 else PTXAS
    if not os.access(ptxas, os.X_OK):
        print('skipped: no ptxas at %s (the CUDA toolkit is not installed)' % ptxas)
        return 77
    checked = 0
    with tempfile.TemporaryDirectory() as directory:
        for source in sorted(glob.glob(os.path.join(examples, '*.energy'))):
            model = os.path.basename(source)[:-len('.energy')]
            for dtype in dtypes:
                result = subprocess.run([energyc, '--target', 'cuda', '--emit=ptx',
                                         '--dtype', dtype, source],
                                        capture_output=True, text=True)
                if result.returncode != 0:
                    sys.exit('%s %s: energyc failed:\n%s' % (model, dtype, result.stderr))
                images = split_images(result.stdout)
                if len(images) != 2:
                    sys.exit('%s %s: %d PTX images, expected sm_80 and sm_90' % (
                        model, dtype, len(images)))
                assembled, rejected = assemble_images(
                    images, os.path.join(directory, '%s.%s' % (model, dtype)), ptxas)
                if rejected:
                    sys.exit('%s %s %s: ptxas rejects the PTX:\n%s' % (
                        model, dtype, rejected[0], rejected[1]))
                checked += assembled
                print('%-22s %s  %d kernels, accepted for sm_80 and sm_90' % (
                    model, dtype, images[0][1].count('.entry ')))
    print('ptxas accepted %d PTX images' % checked)
    return 0


if __name__ == '__main__':
    sys.exit(main())
