"""The rewrite behind `energy-run --shard DIM`, checked without MPI: every
zoo model, sharded along each of its dims over 2 and 3 ranks, each rank's
model (energyc --shard DIM --emit=source) evaluated in its own session on
its rows, and the ranks' energies and gradients put together as
energy-run --shard does (energies and the gradients of tensors without the
dim summed; a sharded tensor's gradient: its rows' own, plus the sum over
the ranks of its gathered copy's gradient at those rows) must equal the
model's own, in float64. With --ring, the same on a ring too (energyc
--shard DIM --ring, where the rewrite accepts the model; on 2 ranks): each
rank's lse merged over every rank's block from the block model's outputs,
its gradients the rank model's plus the block model's at each block, as
energy-run --shard --ring puts them together (the length a multiple of the
rank count). A model list that starts at `FIRST:` checks the models from
FIRST on (make test runs the zoo in two halves, with --quick: 3 ranks
along every dim).

Usage: check_rank_models.py ENERGYC [--ring] [--quick] [MODEL... | FIRST: | :END]
"""
import os
import re
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


def gradients_of(model):
    """The tensors `model` has gradient kernels for."""
    return {buffer['tensor'] for buffer in model.manifest['buffers']
            if buffer.get('kind') == 'gradient'}


def rewrite(energyc, source, dim, ranks, *extra):
    """energyc --shard's model (`extra` options: --ring, --ring-block), or
    the message refusing it; raises where the rewrite's own model fails."""
    command = [energyc, source, '--shard', dim, '--shard-ranks', str(ranks),
               '--emit=source'] + list(extra)
    rewritten = subprocess.run(command, capture_output=True, text=True)
    if rewritten.returncode != 0:
        message = rewritten.stderr.strip().splitlines()[0]
        if 'error: ' not in message or 'one rank' in message:
            raise AssertionError('%s --shard %s: %s' % (source, dim, rewritten.stderr))
        return None, message.split('error: ', 1)[1]
    return rewritten.stdout, None


def check(energyc, name, dim, ranks, ring=False):
    model = zoo.load(name)
    dims = dict(model.TEST_DIMS)
    if ring and dims[dim] % ranks:
        dims[dim] = ranks * (dims[dim] // ranks + 1)  # blocks of one length
    if dims[dim] < ranks:
        return 'skipped (%s=%d < %d ranks)' % (dim, dims[dim], ranks)
    arrays = model.make_inputs(dims, np.random.default_rng(5))
    for state, source in getattr(model, 'COPIES', {}).items():
        arrays[state] = arrays[source]
    extra = ['--ring'] if ring else []
    rank_source, refusal = rewrite(energyc, model.SOURCE, dim, ranks, *extra)
    if refusal:
        return 'refused: ' + refusal

    whole = compiled(model.SOURCE)
    # The spec's tensors (the backward program's have dotted names).
    names = [n for n in whole.tensors if '.' not in n]
    session = whole.session(**dims)
    for key in names:
        session[key] = arrays[key]
    expected_energy = session.energy()
    expected = session.grad(wrt=names)

    if ring:
        block_source, _ = rewrite(energyc, model.SOURCE, dim, ranks, *extra, '--ring-block')
        total, grads = put_together_ring(whole, compiled(rank_source), rank_source,
                                         compiled(block_source), block_source, names, arrays,
                                         dims, dim, ranks)
    else:
        total, grads = put_together(whole, compiled(rank_source), rank_source, names, arrays,
                                    dims, dim, ranks)
    worst = relative(total, expected_energy)
    for key in names:
        worst = max(worst, relative(grads[key], expected[key]))
    if not worst <= TOLERANCE:
        raise AssertionError('%s --shard %s%s over %d ranks: largest relative difference %.3g'
                             % (name, dim, ' --ring' if ring else '', ranks, worst))
    striped = '%s__offset + %d * k' % (dim, ranks) in rank_source
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


def put_together_ring(whole, rank_model, rank_source, block_model, block_source, names, arrays,
                      dims, dim, ranks):
    """The same from `ranks` rank models and their block models on a ring:
    each rank's sites' lse merged over the blocks (the block model's outputs
    of each row's lse over a block, and where given the count of columns it
    admits), then the rank model's gradients plus the block model's at each
    block (its copy's gradient at that block's rows)."""
    whole_dim, offset_dim = dim + '__all', dim + '__offset'
    block_dim, block_offset_dim = dim + '__blk', dim + '__blkoff'
    striped = re.search(r'rows \S+ \+ %d \* k' % ranks, rank_source) is not None
    gathered = {n[:-len('__all')]: n for n in block_model.tensors if n.endswith('__all')}
    merged = re.findall(r'input (\S+) : ', rank_source)
    merged = [n for n in merged if n not in whole.tensors]
    outputs = re.findall(r'output (\S+)\[', block_source)
    partials = [n for n in outputs if '__block_lse' in n]
    counts = {n.replace('__block_count', '__block_lse'): n for n in outputs
              if '__block_count' in n}
    # Each site's input of the rows' shares of its gradient in a block.
    weights = [n for n in re.findall(r'input (\S+) : ', block_source) if '__weight' in n]
    assert len(partials) == len(merged) == len(weights), (merged, outputs, weights)
    first_rank = 'shard__first' in rank_source_consts(rank_source)
    length = dims[dim]
    parts = [shard_rows(length, rank, ranks, striped) for rank in range(ranks)]

    def bind(model, rank, block, sites):
        rows, offset = parts[rank]
        rank_dims = dict(dims)
        rank_dims[dim] = len(rows)
        for extra, value in ((whole_dim, length), (offset_dim, offset),
                             (block_dim, len(rows)), (block_offset_dim, parts[block][1])):
            if extra in model.dims:
                rank_dims[extra] = value
        consts = {'shard__first': 1.0 if rank == 0 else 0.0} if first_rank else {}
        s = model.session(rank_dims, consts=consts)
        if sites is None:  # the merged lse and shares, before they are known: zeros
            sites = {name: np.zeros([rank_dims[axis.strip()] for axis in
                                     model.tensors[name]['shape'].strip('[]').split(',')])
                     for name in merged + weights if name in model.tensors}
        for key in names:
            axis = axis_of(whole.tensors[key]['shape'], dim)
            value = np.asarray(arrays[key])
            s[key] = value if axis is None else np.take(value, rows, axis=axis)
            if key in gathered and gathered[key] in model.tensors:
                s[gathered[key]] = np.take(value, parts[block][0], axis=axis)
        for name, value in sites.items():
            s[name] = value
        return s

    total = 0.0
    grads = {n: np.zeros(np.shape(arrays[n])) for n in names}
    for rank in range(ranks):
        lse, block_lse = {}, {}
        for block in range(ranks):
            s = bind(block_model, rank, block, None)
            for name, partial in zip(merged, partials):
                value = np.asarray(s[partial], dtype=np.float64)
                if partial in counts:
                    value = np.where(np.asarray(s[counts[partial]]) == 0, -np.inf, value)
                block_lse[block, name] = value
                lse[name] = value if name not in lse else np.logaddexp(lse[name], value)
        lse = {name: np.where(np.isinf(value), 0.0, value) for name, value in lse.items()}
        rows = parts[rank][0]
        s = bind(rank_model, rank, rank, lse)
        total += s.energy()
        rank_gradients, block_gradients = gradients_of(rank_model), gradients_of(block_model)
        pieces = [(s.grad(wrt=[n for n in names if n in rank_gradients]), rows)]
        for block in range(ranks):
            shares = {weight: np.where(np.isinf(block_lse[block, name]), 0.0,
                                       np.exp(block_lse[block, name] - lse[name]))
                      for name, weight in zip(merged, weights)}
            b = bind(block_model, rank, block, dict(lse, **shares))
            g = b.grad(wrt=[n for n in names + list(gathered.values()) if n in block_gradients])
            pieces.append(({n: g[n] for n in names if n in g}, rows))
            pieces.append(({n: g[gathered[n]] for n in gathered if gathered[n] in g},
                           parts[block][0]))
        for g, at in pieces:
            for key, value in g.items():
                axis = axis_of(whole.tensors[key]['shape'], dim)
                if axis is None:
                    grads[key] += value
                else:
                    index = [slice(None)] * grads[key].ndim
                    index[axis] = at
                    grads[key][tuple(index)] += value
    return total, grads


def rank_source_consts(source):
    return {line.split()[1] for line in source.splitlines()
            if line.strip().startswith('const ')}


def main():
    energyc = sys.argv[1]
    arguments = sys.argv[2:]
    ring = '--ring' in arguments
    quick = '--quick' in arguments
    names = [a for a in arguments if a not in ('--ring', '--quick')] or zoo.model_names()
    if len(names) == 1 and ':' in names[0]:
        # A range of the zoo's models, by name: FIRST: or :END (excluded).
        first, end = names[0].split(':')
        everything = zoo.model_names()
        names = [n for n in everything if (not first or n >= first) and (not end or n < end)]
    failures = 0
    checked = 0
    for name in names:
        for dim in zoo.load(name).TEST_DIMS:
            # --quick (make test): 3 ranks along every dim (uneven rows,
            # striped by 3).
            for ranks in (3,) if quick else (2, 3):
                # A ring on 2 ranks (e2e-sequence-sharding runs 3 under MPI).
                for on_ring in (False, True) if ranks == 2 and ring else (False,):
                    try:
                        result = check(energyc, name, dim, ranks, on_ring)
                        checked += result.startswith('equal')
                    except Exception as error:  # noqa: BLE001 - reported, counted
                        result = 'FAILED: %s' % error
                        failures += 1
                    print('%-28s --shard %-3s%s %d ranks: %s'
                          % (name, dim, ' --ring' if on_ring else '       ', ranks, result),
                          flush=True)
    print('%d sharded models equal to their model, %d failures' % (checked, failures))
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
