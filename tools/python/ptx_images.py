"""Gives the PTX images of `energyc --target cuda --emit=ptx` to ptxas.

energyc prints one image per architecture, each after a line
`// energy-ptx: sm_NN`. Each is assembled with `ptxas -O0 -arch=sm_NN`
(-O0: the check is that ptxas accepts the code; optimising it took twice as
long). An image that equals an earlier one but for its `.target` line is not
assembled again: PTX that an older architecture accepts, a newer one does.
"""
import os
import subprocess

PTXAS = '/usr/local/cuda/bin/ptxas'


def split_images(energyc_output):
    """The (architecture, PTX) pairs of energyc's output, in order."""
    return [tuple(image.split('\n', 1))
            for image in energyc_output.split('// energy-ptx: ')[1:]]


def assemble_images(images, stem, ptxas=PTXAS, timeout=None):
    """Assembles each distinct image of `images`, written to STEM.ARCH.ptx
    and removed after. Returns (images assembled, None) or, at the first
    that ptxas rejects, (assembled so far, (arch, ptxas's message)); raises
    subprocess.TimeoutExpired when ptxas takes more than `timeout` seconds."""
    assembled = 0
    seen = set()
    for arch, ptx in images:
        body = '\n'.join(line for line in ptx.split('\n')
                         if not line.startswith('.target'))
        if body in seen:
            continue
        seen.add(body)
        path = '%s.%s.ptx' % (stem, arch)
        with open(path, 'w') as f:
            f.write(ptx)
        try:
            result = subprocess.run([ptxas, '-O0', '-arch=' + arch, path, '-o', os.devnull],
                                    capture_output=True, text=True, timeout=timeout)
        finally:
            os.remove(path)
        if result.returncode != 0:
            return assembled, (arch, result.stderr.strip())
        assembled += 1
    return assembled, None
