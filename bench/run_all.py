#!/usr/bin/env python3
"""Runs the benchmarks of bench/ against their anchors, in one process, and
writes the figures (build/bench/results.json) and, with --doc, the report
(docs/benchmarks.md). `make bench` runs all of it; each part runs alone too:

  /usr/bin/python3 bench/run_all.py                       # everything
  /usr/bin/python3 bench/run_all.py --only gmm --gmm-n 10000
  /usr/bin/python3 bench/run_all.py --only hopfield,sgemm  # (a) and (d)
  /usr/bin/python3 bench/run_all.py --only scaling --scaling-max-n 16384

Parts (targets of the issue):
  sgemm           the BLAS reference: torch/numpy float32 products, and
                  build/bin/softmax-contract-bench when built        (d)
  hopfield        Hopfield / cross-attention gradient vs torch        (a), (d)
  self_attention  self-attention energy gradient vs torch.autograd   (b)
  gmm             one full-covariance EM iteration vs scikit-learn   (c)
  scaling         self-attention gradient at N = 4096 .. 65 536:
                  time and peak memory                               (e)
  compile         energyc on every example                           (f)
  training        one training step (run + backward) vs torch        (issue 15)
  zoo             the literature's models (tests/zoo), inference and
                  a training step, each against its PyTorch version,
                  on 1 thread and on every core                      (issue 31)

Use Debian's /usr/bin/python3 (python3-torch, python3-sklearn). Before
numpy or torch load, OPENBLAS_CORETYPE is set to the strongest core this CPU
supports (unless the environment names one as strong) and every BLAS and
kernel pool gets --threads threads (default: every core); see
bench/blas_env.py.
"""
import argparse
import datetime
import json
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import blas_env  # noqa: E402  (loads no BLAS)

# glibc returns freed blocks above its mmap threshold (at most 32 MiB by
# default) to the system, so an anchor that allocates a fresh N x N score
# matrix at every call (torch) page-faults all of it in again each time,
# which costs as much as the product itself here. These settings keep such
# blocks in the heap for reuse, as a caching allocator would; they are set
# (unless the user set them) by re-executing this script, because glibc reads
# them when a process starts. energy-run inherits them too.
MALLOC_SETTINGS = {'MALLOC_MMAP_THRESHOLD_': str(2**30),
                   'MALLOC_TRIM_THRESHOLD_': str(2**32)}

# A part during which other processes used more of the machine than this is
# run again (--retries times at most), and the least disturbed run is kept.
DISTURBED = 0.10

PARTS = ['sgemm', 'hopfield', 'self_attention', 'gmm', 'scaling', 'compile', 'training',
         'zoo']


def parse_arguments():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--build-dir', default='build',
                        help='where bin/energyc and bin/energy-run are; artifacts '
                             'and results go to BUILD_DIR/bench (default: build)')
    parser.add_argument('--only', default=','.join(PARTS),
                        help='comma-separated parts to run (default: all): ' +
                             ', '.join(PARTS))
    parser.add_argument('--threads', type=int, default=os.cpu_count() or 1,
                        help='threads on both sides (default: every core)')
    parser.add_argument('--reps', type=int, default=20,
                        help='timed repetitions after a warm-up, ours and anchors '
                             '(default 20)')
    parser.add_argument('--hopfield-n', type=int, default=4096)
    parser.add_argument('--hopfield-k', type=int, default=4096)
    parser.add_argument('--attention-n', type=int, default=4096)
    parser.add_argument('--gmm-n', type=int, default=100000,
                        help='points of the GMM (default 100 000; falls back to '
                             '10 000 when one step of ours is not linear in N)')
    parser.add_argument('--gmm-reps', type=int, default=10,
                        help='repetitions of the GMM timings, ours and sklearn\'s fits '
                             '(default 10)')
    parser.add_argument('--gmm-no-check', action='store_true',
                        help='run --gmm-n even if one step is more than linear in N')
    parser.add_argument('--scaling-max-n', type=int, default=65536,
                        help='largest N of the scaling part (default 65 536)')
    parser.add_argument('--zoo-models', default=None,
                        help='comma-separated zoo models to run (default: all)')
    parser.add_argument('--zoo-reps', type=int, default=3,
                        help='timed repetitions of each zoo model (default 3)')
    parser.add_argument('--zoo-rounds', type=int, default=5,
                        help='rounds in which ours and PyTorch are timed in turn; '
                             'the ratio is the rounds\' median (default 5)')
    parser.add_argument('--wait-idle', type=float, default=0,
                        help='before each part, wait up to this many seconds for the '
                             'machine to be idle (others\' builds slow the timings)')
    parser.add_argument('--retries', type=int, default=0,
                        help='run a part again (at most this many times) when other '
                             'processes used more than 10 %% of the machine during it')
    parser.add_argument('--budget', type=float, default=600,
                        help='seconds after which the run no longer waits for an idle '
                             'machine nor runs parts again (default 600)')
    parser.add_argument('--no-malloc-settings', action='store_true',
                        help='leave glibc malloc at its defaults (see MALLOC_SETTINGS)')
    parser.add_argument('--json', default=None,
                        help='results file (default BUILD_DIR/bench/results.json)')
    parser.add_argument('--doc', default=None,
                        help='write the report there (make bench: docs/benchmarks.md)')
    parser.add_argument('--command', default=None,
                        help='the command to name in the report (default: this one)')
    arguments = parser.parse_args()
    arguments.only = [part.strip() for part in arguments.only.split(',') if part.strip()]
    unknown = [part for part in arguments.only if part not in PARTS]
    if unknown:
        parser.error('unknown part(s) %s; the parts are %s' % (
            ', '.join(unknown), ', '.join(PARTS)))
    return arguments


def source_state():
    """The commit measured, and the files outside bench/ and docs/ that differ
    from it (others may be working in the same checkout)."""
    import subprocess
    root = os.path.dirname(HERE)

    def git(*args):
        result = subprocess.run(['git', '-C', root, *args], capture_output=True, text=True)
        return result.stdout.rstrip() if result.returncode == 0 else None

    changed = git('status', '--porcelain', '--untracked-files=no')
    changed = [line[3:] for line in (changed or '').splitlines() if len(line) > 3
               if not line[3:].startswith(('bench/', 'docs/'))]
    return {'commit': git('rev-parse', '--short', 'HEAD'),
            'subject': git('log', '-1', '--format=%s'), 'changed': changed}


def apply_malloc_settings(arguments):
    """Re-executes this script with MALLOC_SETTINGS in its environment
    (those the user did not set); returns what is in effect."""
    marker = 'ENERGY_BENCH_MALLOC_APPLIED'
    if arguments.no_malloc_settings:
        return {}
    if os.environ.get(marker) != '1':
        environment = dict(os.environ)
        for key, value in MALLOC_SETTINGS.items():
            environment.setdefault(key, value)
        environment[marker] = '1'
        sys.stdout.flush()
        os.execve(sys.executable, [sys.executable, os.path.abspath(__file__)] + sys.argv[1:],
                  environment)
    return {key: os.environ.get(key) for key in MALLOC_SETTINGS}


def main():
    arguments = parse_arguments()
    malloc_settings = apply_malloc_settings(arguments)
    blas_setup = blas_env.configure(arguments.threads)

    # Only now may numpy, torch and sklearn load OpenBLAS.
    import numpy
    import torch
    import benchlib
    torch.set_num_threads(arguments.threads)

    build_dir = os.path.abspath(arguments.build_dir)
    context = benchlib.Context(build_dir, arguments.threads, arguments.reps, arguments)
    for tool in (context.energyc, context.energy_run):
        if not os.path.exists(tool):
            sys.exit('%s is missing: build first (make build, or cmake --build %s)' % (
                tool, arguments.build_dir))

    loaded = blas_env.loaded_openblas()
    cpu = blas_env.cpu_info()
    machine = {
        'cpu': cpu['model_name'], 'family': cpu['family'], 'model': cpu['model'],
        'flags': [flag for flag in blas_env.RELEVANT_FLAGS if flag in cpu['flags']],
        'cores': cpu['cores'], 'usable_cores': cpu['usable_cores'],
        'blas_setup': blas_setup, 'openblas': loaded, 'malloc': malloc_settings,
        'torch': torch.__version__, 'numpy': numpy.__version__,
        'torch_threads': torch.get_num_threads(),
        'python': sys.version.split()[0], 'executable': sys.executable,
        'loadavg_start': os.getloadavg(),
        'date': datetime.datetime.now().astimezone().isoformat(timespec='minutes'),
    }
    machine['source'] = source_state()
    try:
        import sklearn
        machine['sklearn'] = sklearn.__version__
    except ImportError:
        machine['sklearn'] = None
    core_line = ('OpenBLAS %s: core %s, %s threads (OPENBLAS_CORETYPE=%s, %s)' % (
        loaded and loaded['path'], loaded and loaded['core'], loaded and loaded['threads'],
        blas_setup['coretype'], blas_setup['coretype_source']))
    context.log(core_line)
    if loaded is None or (blas_setup['expected_core'] and
                          loaded['core'] != blas_setup['coretype']):
        context.log('WARNING: OpenBLAS does not use the core that was asked for; the '
                    'anchors are weaker than they could be')
        machine['core_warning'] = True
    context.log('CPU: %s, %d cores; load average %.2f %.2f %.2f' % (
        cpu['model_name'], cpu['cores'], *machine['loadavg_start']))

    import attention_scaling
    import blas_sgemm
    import compile_times
    import gmm_em
    import hopfield_grad
    import self_attention_torch
    import training_step
    import zoo_models
    modules = {'sgemm': blas_sgemm, 'hopfield': hopfield_grad,
               'self_attention': self_attention_torch, 'gmm': gmm_em,
               'scaling': attention_scaling, 'compile': compile_times,
               'training': training_step, 'zoo': zoo_models}

    results = {'machine': machine, 'parts': {}, 'errors': {},
               'arguments': {key: value for key, value in vars(arguments).items()},
               'command': arguments.command or ' '.join(
                   ['/usr/bin/python3' if sys.executable == '/usr/bin/python3'
                    else sys.executable, os.path.relpath(__file__)] + sys.argv[1:])}
    for part in PARTS:
        if part not in arguments.only:
            continue
        attempts = []
        for attempt in range(1 + arguments.retries):
            spent = time.perf_counter() - context.start
            if attempt and spent > arguments.budget:
                context.log('%s: not run again (%.0f s spent, --budget %.0f s)' % (
                    part, spent, arguments.budget))
                break
            context.log('== %s ==%s' % (part, ' (again: others used the machine)' if attempt else ''))
            wait = min(arguments.wait_idle, arguments.budget - spent)
            if wait > 0:
                busy = blas_env.wait_until_idle(wait, log=context.log)
            else:
                busy = blas_env.busy_fraction(1.0)
            before, begin = blas_env.cpu_counters(), time.perf_counter()
            try:
                result = modules[part].run(context)
            except Exception as error:  # a failing part must not hide the others
                context.log('%s FAILED: %s' % (part, error))
                traceback.print_exc()
                results['errors'][part] = '%s: %s' % (type(error).__name__, error)
                break
            elapsed = time.perf_counter() - begin
            share = blas_env.others_share(before, blas_env.cpu_counters(), elapsed,
                                          cpu['cores'])
            result.update(elapsed_s=elapsed, busy_before=busy, others_share=share,
                          attempt=attempt + 1)
            attempts.append(result)
            if share is not None:
                context.log('%s: other processes used %.0f %% of the machine meanwhile' % (
                    part, 100 * share))
            if share is None or share <= DISTURBED:
                break
        if attempts:
            # The least disturbed attempt.
            best = min(attempts, key=lambda r: r['others_share'] or 0)
            best['attempts'] = len(attempts)
            results['parts'][part] = best
    machine['loadavg_end'] = os.getloadavg()
    machine['rss_method'] = context.rss_method
    machine['elapsed_s'] = time.perf_counter() - context.start

    json_path = arguments.json or context.path('results.json')
    with open(json_path, 'w') as f:
        json.dump(results, f, indent=1, default=str)
    context.log('figures written to %s' % os.path.relpath(json_path))

    import report
    print()
    print(report.summary_text(results))
    if arguments.doc and set(arguments.only) != set(PARTS):
        context.log('not writing %s: only some parts ran (its figures are of one full '
                    'run)' % arguments.doc)
    elif arguments.doc:
        report.write_document(results, arguments.doc)
        context.log('report written to %s' % arguments.doc)
    return 1 if results['errors'] else 0


if __name__ == '__main__':
    sys.exit(main())
