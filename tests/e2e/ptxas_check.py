#!/usr/bin/env python3
"""Every example's GPU kernels pass ptxas: `energyc --target cuda --emit=ptx`
in f32 and f64 (or one of them), each architecture's PTX through
`ptxas -O0 -arch=sm_NN` (-O0: the check is that ptxas accepts the code;
optimising it took twice as long). An image that equals an older
architecture's but for its `.target` line is not checked again: PTX that
sm_80 accepts, sm_90 accepts (PTX is forward compatible).

Usage: ptxas_check.py ENERGYC EXAMPLES_DIR [f32|f64|both] [PTXAS]
Exits 77 (skipped) with a message when ptxas is not there (no CUDA toolkit).
"""
import glob
import os
import subprocess
import sys
import tempfile


def main():
    energyc, examples = sys.argv[1], sys.argv[2]
    which = sys.argv[3] if len(sys.argv) > 3 else 'both'
    dtypes = ('f32', 'f64') if which == 'both' else (which,)
    ptxas = sys.argv[4] if len(sys.argv) > 4 else '/usr/local/cuda/bin/ptxas'
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
                images = result.stdout.split('// energy-ptx: ')[1:]
                if len(images) != 2:
                    sys.exit('%s %s: %d PTX images, expected sm_80 and sm_90' % (
                        model, dtype, len(images)))
                checked_bodies = set()
                for image in images:
                    arch, ptx = image.split('\n', 1)
                    body = '\n'.join(line for line in ptx.split('\n')
                                     if not line.startswith('.target'))
                    if body in checked_bodies:
                        continue
                    checked_bodies.add(body)
                    path = os.path.join(directory, '%s.%s.%s.ptx' % (model, dtype, arch))
                    with open(path, 'w') as f:
                        f.write(ptx)
                    check = subprocess.run([ptxas, '-O0', '-arch=' + arch, path, '-o', os.devnull],
                                           capture_output=True, text=True)
                    if check.returncode != 0:
                        sys.exit('%s %s %s: ptxas rejects the PTX:\n%s' % (
                            model, dtype, arch, check.stderr))
                    checked += 1
                print('%-22s %s  %d kernels, accepted for sm_80 and sm_90' % (
                    model, dtype, images[0].count('.entry ')))
    print('ptxas accepted %d PTX images' % checked)
    return 0


if __name__ == '__main__':
    sys.exit(main())
