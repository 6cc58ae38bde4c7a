"""(f) Compile time of every example: `energyc X.energy -o Y.so`, wall time
of the process, each example compiled `COMPILE_RUNS` times (the median is
judged against the 2 s target; the slowest is shown too)."""
import glob
import os
import statistics
import time

from benchlib import ROOT, BenchError, display_command

LIMIT_S = 2.0
COMPILE_RUNS = 3


def run(ctx):
    out = ctx.path('examples')
    os.makedirs(out, exist_ok=True)
    rows = []
    for source in sorted(glob.glob(os.path.join(ROOT, 'examples', '*.energy'))):
        name = os.path.splitext(os.path.basename(source))[0]
        artifact = os.path.join(out, name + '.so')
        command = [ctx.energyc, source, '-o', artifact]
        times, error = [], None
        for _ in range(COMPILE_RUNS):
            begin = time.perf_counter()
            try:
                ctx.run_tool(command)
            except BenchError as failure:
                error = str(failure)
                break
            times.append(time.perf_counter() - begin)
        row = {'name': name, 'command': command}
        if error:
            row['error'] = error
            ctx.log('compile: %s FAILED: %s' % (name, error.splitlines()[0]))
        else:
            row.update(median_s=statistics.median(times), max_s=max(times),
                       met=statistics.median(times) < LIMIT_S)
            ctx.log('compile: %-22s %.2f s (slowest of %d: %.2f s)' % (
                name, row['median_s'], COMPILE_RUNS, row['max_s']))
        rows.append(row)
    return {'rows': rows, 'limit_s': LIMIT_S, 'runs': COMPILE_RUNS,
            'example_command': display_command(rows[0]['command']) if rows else '',
            'met': bool(rows) and all(row.get('met') for row in rows)}
