"""The machine and the BLAS setup of a benchmark run.

Debian's OpenBLAS 0.3.21 (what numpy, torch and scikit-learn use here, and
what our artifacts load for their matrix products) does not recognise recent
Xeons and falls back to its SSE3 "Prescott" kernels, about five times slower
than its AVX-512 ones, unless OPENBLAS_CORETYPE names a core before the
library loads. `configure` names the core this CPU supports (SkylakeX with
AVX-512, Haswell with AVX2) unless the user set one, and the thread counts;
it must run before numpy, torch or sklearn are imported. `loaded_openblas`
asks the OpenBLAS this process loaded which core it chose, so the report
can say whether the setting took effect.

This module imports nothing that loads a BLAS.
"""
import ctypes
import os
import platform


def cpu_info():
    """Model name, flags, family/model of the first processor, and cores."""
    info = {'model_name': platform.processor() or '?', 'flags': set(),
            'family': None, 'model': None}
    try:
        with open('/proc/cpuinfo') as f:
            text = f.read()
    except OSError:
        text = ''
    for line in text.split('\n\n')[0].splitlines():
        key, _, value = line.partition(':')
        key, value = key.strip(), value.strip()
        if key == 'model name':
            info['model_name'] = value
        elif key == 'flags':
            info['flags'] = set(value.split())
        elif key == 'cpu family':
            info['family'] = value
        elif key == 'model':
            info['model'] = value
    info['cores'] = os.cpu_count() or 1
    try:
        info['usable_cores'] = len(os.sched_getaffinity(0))
    except AttributeError:
        info['usable_cores'] = info['cores']
    return info


# The flags that decide which kernels run (ours, OpenBLAS's, torch's).
RELEVANT_FLAGS = ['sse4_2', 'avx', 'avx2', 'fma', 'avx512f', 'avx512bw',
                  'avx512dq', 'avx512vl', 'avx512_vnni', 'avx512_bf16',
                  'avx512_fp16', 'amx_tile', 'amx_bf16']


def busy_fraction(seconds=3.0):
    """The fraction of the machine's CPU time spent busy over `seconds`
    (from /proc/stat), or None where that cannot be read."""
    import time

    def sample():
        with open('/proc/stat') as f:
            fields = [int(v) for v in f.readline().split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
        return sum(fields[:8]), idle

    try:
        total0, idle0 = sample()
        time.sleep(seconds)
        total1, idle1 = sample()
    except (OSError, ValueError, IndexError):
        return None
    total = total1 - total0
    return 1.0 - (idle1 - idle0) / total if total > 0 else None


def cpu_counters():
    """(CPU seconds the whole machine has been busy, CPU seconds this
    process and its reaped children have used), for measuring how much of
    the machine others used over an interval."""
    try:
        with open('/proc/stat') as f:
            fields = [int(v) for v in f.readline().split()[1:]]
        busy = (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf('SC_CLK_TCK')
    except (OSError, ValueError, IndexError):
        busy = None
    times = os.times()
    return busy, times.user + times.system + times.children_user + times.children_system


def others_share(before, after, wall, cores):
    """The share of the machine (0..1) that other processes used between two
    cpu_counters() readings `wall` seconds apart."""
    if before[0] is None or after[0] is None or wall <= 0:
        return None
    others = (after[0] - before[0]) - (after[1] - before[1])
    return max(0.0, others / (wall * cores))


def wait_until_idle(limit_s, threshold=0.15, log=print):
    """Waits (at most limit_s seconds) until the machine is busy less than
    `threshold` of the time over a few seconds, so that others' work does not
    slow the timings. Returns the busy fraction last seen."""
    import time
    begin = time.monotonic()
    while True:
        busy = busy_fraction()
        if busy is None or busy < threshold:
            return busy
        waited = time.monotonic() - begin
        if waited >= limit_s:
            log('the machine is still %.0f %% busy after %.0f s of waiting: going on' % (
                100 * busy, waited))
            return busy
        log('the machine is %.0f %% busy (others\' work): waiting for it to settle '
            '(%.0f s of at most %.0f)' % (100 * busy, waited, limit_s))
        time.sleep(10)


def openblas_core_for(flags):
    if 'avx512f' in flags:
        return 'SkylakeX'
    if 'avx2' in flags:
        return 'Haswell'
    return None


# OpenBLAS's x86-64 cores from the weakest to the strongest kernels.
CORE_STRENGTH = ['Prescott', 'Core2', 'Penryn', 'Dunnington', 'Nehalem',
                 'Sandybridge', 'Haswell', 'Zen', 'SkylakeX', 'CooperLake',
                 'SapphireRapids']


def stronger_core(wanted, user):
    """True when `wanted` names faster kernels than the user's `user`."""
    ranks = {name.lower(): i for i, name in enumerate(CORE_STRENGTH)}
    return (wanted is not None and user.lower() in ranks
            and ranks[wanted.lower()] > ranks[user.lower()])


def choose_core(flags, user):
    """The OpenBLAS core for a CPU with `flags` when the environment names
    `user` (or None), and why: the user's core is kept unless the CPU
    supports a stronger one. An environment that names Haswell on an
    AVX-512 machine (as some do, for safety) would halve the anchor's
    matrix products, and an anchor is never run weaker than it can be."""
    wanted = openblas_core_for(flags)
    if user and stronger_core(wanted, user):
        return wanted, ('raised by bench/blas_env.py from the environment\'s %s: '
                        'the CPU supports %s' % (user, wanted))
    if user:
        return user, 'set by the user'
    if wanted:
        return wanted, 'set by bench/blas_env.py from /proc/cpuinfo'
    return None, 'not set (no AVX2 on this CPU)'


def configure(threads):
    """Sets OPENBLAS_CORETYPE (choose_core) and the thread counts in
    os.environ, which this process's libraries read when they load and the
    processes it starts inherit. Returns what it did."""
    flags = cpu_info()['flags']
    expected = openblas_core_for(flags)
    core, source = choose_core(flags, os.environ.get('OPENBLAS_CORETYPE'))
    if core:
        os.environ['OPENBLAS_CORETYPE'] = core
    for variable in ('OPENBLAS_NUM_THREADS', 'OMP_NUM_THREADS',
                     'MKL_NUM_THREADS', 'ENERGY_NUM_THREADS'):
        os.environ[variable] = str(threads)
    return {'coretype': os.environ.get('OPENBLAS_CORETYPE'),
            'coretype_source': source, 'expected_core': expected,
            'threads': threads}


def set_anchor_threads(threads):
    """Runs this process's PyTorch on `threads` threads, its BLAS included:
    torch.set_num_threads does not reach the OpenBLAS that torch calls for
    its matrix products, which keeps the thread count it loaded with
    (OPENBLAS_NUM_THREADS), so that a 1-thread anchor would multiply
    matrices on every core."""
    import torch
    torch.set_num_threads(threads)
    loaded = loaded_openblas()
    if loaded is None:
        return
    function = getattr(ctypes.CDLL(loaded['path']), 'openblas_set_num_threads', None)
    if function is not None:
        function.argtypes = [ctypes.c_int]
        function.restype = None
        function(threads)


def loaded_openblas():
    """The core and thread count of the OpenBLAS loaded in this process (by
    numpy or torch), or None when none is loaded."""
    path = None
    with open('/proc/self/maps') as f:
        for line in f:
            fields = line.split()
            if len(fields) >= 6 and 'libopenblas' in os.path.basename(fields[-1]):
                path = fields[-1]
                break
    if path is None:
        return None
    library = ctypes.CDLL(path)
    result = {'path': path}
    for name, restype in (('openblas_get_corename', ctypes.c_char_p),
                          ('openblas_get_config', ctypes.c_char_p),
                          ('openblas_get_num_threads', ctypes.c_int)):
        function = getattr(library, name, None)
        if function is None:
            result[name] = None
            continue
        function.restype = restype
        function.argtypes = []
        value = function()
        result[name] = value.decode() if isinstance(value, bytes) else value
    return {'path': path, 'core': result['openblas_get_corename'],
            'config': result['openblas_get_config'],
            'threads': result['openblas_get_num_threads']}
