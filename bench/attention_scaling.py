"""(e) Self-attention gradient at growing N, D = 64: time and peak memory.

`energy-run self_attention.so --eval grad --wrt x --bench R` at N = 4096,
16 384 and 65 536 (the last is 256 times the work of the first). The time of
one gradient over N^2, relative to N = 4096, shows how it grows (1.0 at
every N is exactly N^2); the peak resident memory of each energy-run process
(start-up, the inputs and the warm-up included; GNU time's %M, see
benchlib.Context.run_tool for why not wait4's rusage) must stay under
256 MiB at N = 65 536, where the children x parents matrix alone would take
16 GiB. energy-run runs here with glibc malloc at its defaults (without
run_all.py's MALLOC_SETTINGS), as a user would run it.
"""
from self_attention_torch import inputs_for
from benchlib import environment_without_malloc_settings, write_safetensors

LIMIT_BYTES = 256 * 2**20
SIZES = ((4096, 20), (16384, 3), (65536, 1))  # N and repetitions


def run(ctx):
    d = 64
    artifact = ctx.compile('self_attention')
    sizes = [(n, reps) for n, reps in SIZES if n <= ctx.options.scaling_max_n]
    environment = environment_without_malloc_settings()
    rows = []
    for n, reps in sizes:
        x, wq, wk = inputs_for(n, d)
        inputs = ctx.path('scaling_%d_in.safetensors' % n)
        write_safetensors(inputs, {'x': x, 'Wq': wq, 'Wk': wk})
        if rows:
            last = rows[-1]
            estimate = last['ours_s'] * (n / last['n']) ** 2 * (reps + 1)
            ctx.log('self-attention scaling: N = %d (--bench %d), about %.0f s' % (
                n, reps, estimate))
        else:
            ctx.log('self-attention scaling: N = %d (--bench %d)' % (n, reps))
        ours = ctx.bench_ours(artifact, ['--in', inputs, '--eval', 'grad', '--wrt', 'x'],
                              reps, env=environment)
        rows.append({'n': n, 'reps': reps, 'ours_s': ours['median_s'],
                     'rss_bytes': ours['rss_bytes'], 'command': ours['command'],
                     'dense_scores_bytes': 4 * n * n})
        ctx.log('self-attention scaling: N = %d: %.3f s, peak RSS %.1f MiB' % (
            n, ours['median_s'], ours['rss_bytes'] / 2**20))
    base = rows[0]
    for row in rows:
        row['per_n2_normalised'] = (row['ours_s'] / row['n'] ** 2) / (
            base['ours_s'] / base['n'] ** 2)
    largest = rows[-1]
    return {'d': d, 'rows': rows, 'limit_bytes': LIMIT_BYTES, 'rss_method': ctx.rss_method,
            'largest_n': largest['n'], 'largest_rss': largest['rss_bytes'],
            'memory_met': largest['n'] >= 65536 and largest['rss_bytes'] < LIMIT_BYTES}
