"""bench/blas_env.py's choice of OpenBLAS core: the strongest one the CPU
supports, unless the environment names one at least as strong (a weaker one
is raised, so that no anchor runs on kernels slower than it could)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..', 'bench'))
import blas_env  # noqa: E402

AVX512 = {'avx2', 'fma', 'avx512f'}
AVX2 = {'avx2', 'fma'}

CASES = [
    # (CPU flags, the environment's core, the core chosen, raised)
    (AVX512, None, 'SkylakeX', False),
    (AVX2, None, 'Haswell', False),
    (set(), None, None, False),
    (AVX512, 'Haswell', 'SkylakeX', True),
    (AVX512, 'haswell', 'SkylakeX', True),
    (AVX512, 'Prescott', 'SkylakeX', True),
    (AVX2, 'Sandybridge', 'Haswell', True),
    (AVX512, 'SkylakeX', 'SkylakeX', False),
    (AVX512, 'SapphireRapids', 'SapphireRapids', False),
    (AVX2, 'Haswell', 'Haswell', False),
    (AVX2, 'SkylakeX', 'SkylakeX', False),
    (AVX512, 'SomeFutureCore', 'SomeFutureCore', False),
    (set(), 'Haswell', 'Haswell', False),
]

failures = 0
for flags, user, expected, raised in CASES:
    core, source = blas_env.choose_core(flags, user)
    if core != expected or source.startswith('raised') != raised:
        failures += 1
        print('FAIL: flags %s, environment %s: chose %s (%s), expected %s%s' % (
            sorted(flags), user, core, source, expected, ', raised' if raised else ''))
print('%d of %d cases as expected' % (len(CASES) - failures, len(CASES)))
sys.exit(1 if failures else 0)
