"""The rewrite behind `energy-run --shard DIM`, checked without MPI: every
zoo model, sharded along each of its dims over 2 and 3 ranks, each rank's
model (energyc --shard DIM --emit=source) evaluated in its own session on
its rows, and the ranks' energies and gradients put together as
energy-run --shard does (energies and the gradients of tensors without the
dim summed; a sharded tensor's gradient: its rows' own, plus the sum over
the ranks of its gathered copy's gradient at those rows) must equal the
model's own, in float64.

Usage: check_rank_models.py ENERGYC [MODEL...]
"""
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import zoo  # noqa: E402

import energy  # noqa: E402

# Float64 sums in another order (rows split over ranks): differences of a
# few ulps of the largest term; 1e-9 relative leaves room for cancellation
# in sums of many terms and still catches any term counted twice or lost.
TOLERANCE = 1e-9


def shard_rows(count, rank, size, striped):
    """The rank's rows and its offset: energy::shardOf's contiguous parts
    (the first count % size longer), or every size-th row from the rank's
    (a model that uses its rows' positions as numbers), as
    ShardedSession::globalRow."""
    if striped:
        return list(range(rank, count, size)), rank
    base, extra = divmod(count, size)
    begin = rank * base + min(rank, extra)
    return list(range(begin, begin + base + (1 if rank < extra else 0))), begin


def axis_of(shape_text, dim):
    names = [n.strip() for n in shape_text.strip('[]').split(',') if n.strip()]
    return names.index(dim) if dim in names else None


def relative(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    scale = max(1.0, float(np.max(np.abs(b))) if b.size else 1.0)
    return float(np.max(np.abs(a - b))) / scale if a.size else 0.0


_compiled = {}


def compiled(source):
    """The model of `source` (a path or text) in float64, compiled once."""
    if source not in _compiled:
        # Compiled quickly: the check is of values, not speed.
        _compiled[source] = energy.compile(source, dtype='f64', opt_level=0)
    return _compiled[source]


def check(energyc, name, dim, ranks):
    model = zoo.load(name)
    dims = dict(model.TEST_DIMS)
    if dims[dim] < ranks:
        return 'skipped (%s=%d < %d ranks)' % (dim, dims[dim], ranks)
    arrays = model.make_inputs(dims, np.random.default_rng(5))
    for state, source in getattr(model, 'COPIES', {}).items():
        arrays[state] = arrays[source]
    command = [energyc, model.SOURCE, '--shard', dim, '--shard-ranks', str(ranks),
               '--emit=source']
    rewritten = subprocess.run(command, capture_output=True, text=True)
    if rewritten.returncode != 0:
        message = rewritten.stderr.strip().splitlines()[0]
        if 'error: ' not in message or 'one rank' in message:
            raise AssertionError('%s --shard %s: %s' % (name, dim, rewritten.stderr))
        return 'refused: ' + message.split('error: ', 1)[1]

    whole = compiled(model.SOURCE)
    # The spec's tensors (the backward program's have dotted names).
    names = [n for n in whole.tensors if '.' not in n]
    session = whole.session(**dims)
    for key in names:
        session[key] = arrays[key]
    expected_energy = session.energy()
    expected = session.grad(wrt=names)

    rank_model = compiled(rewritten.stdout)
    total, grads = put_together(whole, rank_model, rewritten.stdout, names, arrays, dims, dim,
                                ranks)
    worst = relative(total, expected_energy)
    for key in names:
        worst = max(worst, relative(grads[key], expected[key]))
    if not worst <= TOLERANCE:
        raise AssertionError('%s --shard %s over %d ranks: largest relative difference %.3g'
                             % (name, dim, ranks, worst))
    striped = '%s__offset + %d * k' % (dim, ranks) in rewritten.stdout
    return 'equal (%.1e)%s' % (worst, ', rows striped' if striped else '')


def put_together(whole, rank_model, rank_source, names, arrays, dims, dim, ranks):
    """The energy and the gradients of `names` of the model `whole` at
    `arrays`, from `ranks` sessions of `rank_model` (its --shard `dim`
    rewrite), as energy-run --shard puts them together."""
    rank_tensors = rank_model.tensors
    whole_dim, offset_dim = dim + '__all', dim + '__offset'
    striped = '%s + %d * k' % (offset_dim, ranks) in rank_source
    gathered = {n[:-len('__all')]: n for n in rank_tensors if n.endswith('__all')}
    first_rank = 'shard__first' in rank_source_consts(rank_source)
    total = 0.0
    grads = {n: np.zeros(np.shape(arrays[n])) for n in names}
    for rank in range(ranks):
        rows, offset = shard_rows(dims[dim], rank, ranks, striped)
        rank_dims = dict(dims)
        rank_dims[dim] = len(rows)
        if whole_dim in rank_model.dims:
            rank_dims[whole_dim] = dims[dim]
        if offset_dim in rank_model.dims:
            rank_dims[offset_dim] = offset
        consts = {'shard__first': 1.0 if rank == 0 else 0.0} if first_rank else {}
        s = rank_model.session(rank_dims, consts=consts)
        for key in names:
            axis = axis_of(whole.tensors[key]['shape'], dim)
            value = np.asarray(arrays[key])
            s[key] = value if axis is None else np.take(value, rows, axis=axis)
            if key in gathered:
                s[gathered[key]] = value
        total += s.energy()
        g = s.grad(wrt=names + list(gathered.values()))
        for key in names:
            axis = axis_of(whole.tensors[key]['shape'], dim)
            if axis is None:
                grads[key] += g[key]
            else:
                index = [slice(None)] * grads[key].ndim
                index[axis] = rows
                grads[key][tuple(index)] += g[key]
            if key in gathered:
                grads[key] += g[gathered[key]]
    return total, grads


def rank_source_consts(source):
    return {line.split()[1] for line in source.splitlines()
            if line.strip().startswith('const ')}


def main():
    energyc = sys.argv[1]
    names = sys.argv[2:] or zoo.model_names()
    failures = 0
    checked = 0
    for name in names:
        for dim in zoo.load(name).TEST_DIMS:
            for ranks in (2, 3):
                try:
                    result = check(energyc, name, dim, ranks)
                    checked += result.startswith('equal')
                except Exception as error:  # noqa: BLE001 - reported, counted
                    result = 'FAILED: %s' % error
                    failures += 1
                print('%-28s --shard %-3s %d ranks: %s' % (name, dim, ranks, result), flush=True)
    print('%d sharded models equal to their model, %d failures' % (checked, failures))
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
