"""What the benchmark parts share: running energyc and energy-run, timing
the anchors, progress lines, tensor files.

Import it after blas_env.configure (it imports numpy, which loads OpenBLAS).

Our side is timed by `energy-run ARTIFACT ... --bench K --json`: one warm-up
evaluation, then K timed repetitions, median printed as {"median_ms": M};
loading, compiling and reading the --in files are not timed. An anchor is
timed here the same way: one warm-up call, then the median of K calls, each
timed alone with time.perf_counter.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, 'tools', 'python'))
from attention_numpy import read_safetensors, write_safetensors  # noqa: E402

__all__ = ['BenchError', 'Context', 'ROOT', 'display_command', 'read_safetensors',
           'relative_difference', 'write_safetensors']


TIME = '/usr/bin/time'


class BenchError(Exception):
    """A benchmark could not produce its figure (a tool failed)."""


class Context:
    def __init__(self, build_dir, threads, reps, options):
        self.build_dir = build_dir
        self.energyc = os.path.join(build_dir, 'bin', 'energyc')
        self.energy_run = os.path.join(build_dir, 'bin', 'energy-run')
        self.out_dir = os.path.join(build_dir, 'bench')
        self.threads = threads
        self.reps = reps
        self.options = options
        self.start = time.perf_counter()
        self.rss_method = None
        os.makedirs(self.out_dir, exist_ok=True)

    # -- progress ---------------------------------------------------------
    def log(self, message):
        print('[%6.1f s] %s' % (time.perf_counter() - self.start, message),
              flush=True)

    def path(self, name):
        return os.path.join(self.out_dir, name)

    # -- energyc ----------------------------------------------------------
    def compile(self, model, extra=(), name=None, source=None):
        """Compiles examples/MODEL.energy (or SOURCE) into
        build/bench/NAME.so (NAME defaults to MODEL)."""
        source = source or os.path.join(ROOT, 'examples', model + '.energy')
        artifact = self.path((name or model) + '.so')
        command = [self.energyc, source, '-o', artifact, *extra]
        self.log('compiling: %s' % display_command(command))
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise BenchError('energyc failed (%d): %s\n%s' % (
                result.returncode, ' '.join(command), result.stderr))
        return artifact

    # -- energy-run -------------------------------------------------------
    def run_tool(self, command, env=None):
        """Runs a command; returns (stdout, stderr, wall seconds, peak RSS in
        bytes of that process alone).

        The peak comes from /usr/bin/time -f %M (GNU time, which forks the
        command from its own small image). wait4's rusage of a child of this
        process would not do: the child starts as a (v)fork of this Python,
        torch loaded, and Linux folds that image's peak into the child's
        ru_maxrss when it execs. Without /usr/bin/time the figure is that
        overestimate, and says so."""
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
                tempfile.NamedTemporaryFile(mode='r') as peak:
            use_time = os.path.exists(TIME)
            timed = ([TIME, '-f', '%M', '-o', peak.name] if use_time else []) + list(command)
            begin = time.perf_counter()
            process = subprocess.Popen(timed, stdout=out, stderr=err, env=env)
            _, status, usage = os.wait4(process.pid, 0)
            wall = time.perf_counter() - begin
            process.returncode = os.waitstatus_to_exitcode(status)
            out.seek(0)
            err.seek(0)
            stdout, stderr = out.read().decode(), err.read().decode()
            if process.returncode != 0:
                raise BenchError('exit status %d: %s\n%s%s' % (
                    process.returncode, display_command(command), stdout, stderr[-4000:]))
            if use_time:
                rss = int(peak.read().split()[-1]) * 1024
                self.rss_method = '/usr/bin/time -f %M'
            else:
                rss = usage.ru_maxrss * 1024
                self.rss_method = 'wait4 (an overestimate: includes the forked Python image)'
        return stdout, stderr, wall, rss

    def energy_run_command(self, artifact, args, threads=None):
        return [self.energy_run, artifact, *args, '--threads',
                str(threads or self.threads)]

    def bench_ours(self, artifact, args, reps, env=None, threads=None):
        """Median seconds of one evaluation over `reps` repetitions after a
        warm-up (energy-run --bench), and the process's peak RSS; on
        `threads` threads (default: the run's)."""
        command = self.energy_run_command(artifact, args, threads) + [
            '--bench', str(reps), '--json']
        stdout, _, wall, rss = self.run_tool(command, env)
        try:
            median = json.loads(stdout)['median_ms'] / 1e3
        except (ValueError, KeyError) as error:
            raise BenchError('unexpected output of %s: %r (%s)' % (
                ' '.join(command), stdout, error))
        return {'median_s': median, 'reps': reps, 'rss_bytes': rss,
                'process_wall_s': wall, 'command': command}

    def values_ours(self, artifact, args, name):
        """Runs energy-run once with --out and returns the file's tensors."""
        output = self.path(name + '.out.safetensors')
        command = self.energy_run_command(artifact, args) + ['--out', output]
        self.run_tool(command)
        return read_safetensors(output)

    # -- anchors ----------------------------------------------------------
    @staticmethod
    def time_anchor(function, reps):
        """Median seconds of `function()` over `reps` calls after one warm-up
        call, with the fastest and slowest."""
        function()
        times = []
        for _ in range(reps):
            begin = time.perf_counter()
            function()
            times.append(time.perf_counter() - begin)
        return {'median_s': statistics.median(times), 'min_s': min(times),
                'max_s': max(times), 'reps': reps}


def environment_without_malloc_settings():
    return {key: value for key, value in os.environ.items()
            if not key.startswith('MALLOC_') and key != 'ENERGY_BENCH_MALLOC_APPLIED'}


def time_torch_anchor_default_malloc(ctx, which, inputs, reps):
    """The median seconds of a torch anchor (bench/torch_anchors.py) in a
    process of its own with glibc malloc at its defaults, or None when this
    run does not change malloc's settings."""
    if not any(key.startswith('MALLOC_') for key in os.environ):
        return None
    command = [sys.executable, os.path.join(HERE, 'torch_anchors.py'), which, inputs,
               str(reps), str(ctx.threads)]
    stdout, _, _, _ = ctx.run_tool(command, environment_without_malloc_settings())
    return json.loads(stdout)['median_s']


def relative_difference(a, b):
    """max |a - b| over max |b|, in float64."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return float(np.abs(a - b).max() / np.abs(b).max())


def display_command(command):
    """A command as text, with paths under the checkout made relative."""
    return ' '.join(os.path.relpath(c, ROOT) if isinstance(c, str) and c.startswith(ROOT + '/')
                    else str(c) for c in command)
