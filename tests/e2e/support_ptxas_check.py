#!/usr/bin/env python3
"""The kernel support library's own GPU kernels (the PTX the build embeds:
runtime/*.ptx) pass ptxas for the architecture each is for, and the wgmma
kernels' products stay asynchronous: ptxas serializes them, or injects
waits between them, when other instructions write their registers inside a
chain of products (its notes C7513, C7515 and C7519: "wgmma.mma_async
instructions are serialized", "warpgroup.arrive is injected"), which would
leave the
tensor cores idle for most of each tile.

Usage: support_ptxas_check.py PTX_DIR [PTXAS]
Exits 77 (skipped) with a message when ptxas or the PTX is not there (a
build without the CUDA toolkit).
"""
import glob
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', '..', 'tools', 'python'))
from ptx_images import PTXAS  # noqa: E402

SERIALIZED = re.compile(r'wgmma.mma_async instructions are serialized|'
                        r'warpgroup\.arrive is injected')


def main():
    directory = sys.argv[1]
    ptxas = sys.argv[2] if len(sys.argv) > 2 else PTXAS
    files = sorted(glob.glob(os.path.join(directory, '*.ptx')))
    if not os.access(ptxas, os.X_OK) or not files:
        print('skipped: no ptxas at %s or no PTX in %s (a build without the '
              'CUDA toolkit)' % (ptxas, directory))
        return 77
    failures = []
    for path in files:
        with open(path) as f:
            text = f.read()
        target = re.search(r'^\.target\s+(\S+)', text, re.M)
        if not target:
            failures.append('%s: no .target line' % path)
            continue
        arch = target.group(1)
        result = subprocess.run([ptxas, '-arch=' + arch, '-v', path, '-o', os.devnull],
                                capture_output=True, text=True)
        name = os.path.basename(path)
        if result.returncode != 0:
            failures.append('%s (%s): ptxas failed:\n%s' % (name, arch, result.stderr))
            continue
        notes = [line for line in result.stderr.splitlines() if SERIALIZED.search(line)]
        if 'wgmma.mma_async' in text and notes:
            failures.append('%s (%s): ptxas serializes the products:\n%s' % (
                name, arch, '\n'.join(notes[:5])))
            continue
        kernels = len(re.findall(r'^\.visible \.entry', text, re.M))
        print('ok %s: %d kernels for %s' % (name, kernels, arch))
    for failure in failures:
        print('FAIL ' + failure)
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
