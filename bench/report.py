"""Turns the figures of bench/run_all.py into docs/benchmarks.md and a
summary on the terminal.

The document is generated whole from the results, except the hand-written
notes between the NOTES_BEGIN and NOTES_END markers, which are carried over
from the file being replaced.
"""
import os

from benchlib import display_command

NOTES_BEGIN = '<!-- notes: begin (hand-written; bench/report.py keeps this block) -->'
NOTES_END = '<!-- notes: end -->'


def ms(seconds):
    return '%.1f ms' % (seconds * 1e3) if seconds < 10 else '%.2f s' % seconds


def mib(size):
    return '%.1f MiB' % (size / 2**20)


def status_text(met):
    return {True: '**met**', False: '**not met**', None: 'not run'}[met]


def ratio_target(part, required, what):
    """A target 'anchor / ours >= required' of a part with ours_s, anchor_s."""
    ratio = part['ratio']
    met = ratio >= required and part.get('values_agree', True)
    figure = 'anchor / ours = %.2f (anchor %s, ours %s)' % (
        ratio, ms(part['anchor_s']), ms(part['ours_s']))
    miss = ''
    if ratio < required:
        needed = part['anchor_s'] / required
        miss = ('%.2f× short: ours would have to take %s or less, it takes %s '
                '(%.1f× too slow)' % (required / ratio, ms(needed), ms(part['ours_s']),
                                      part['ours_s'] / needed))
    if not part.get('values_agree', True):
        miss = (miss + '; ' if miss else '') + 'the values differ beyond the tolerance'
    if part.get('anchor_default_malloc_s'):
        figure += '; %.2f against torch with glibc malloc at its defaults (%s)' % (
            part['anchor_default_malloc_s'] / part['ours_s'], ms(part['anchor_default_malloc_s']))
    return {'name': what, 'figure': figure, 'required': '≥ %g' % required,
            'met': met, 'miss': miss}


def targets(results):
    parts, errors = results['parts'], results['errors']
    rows = []

    def missing(key, name, required):
        rows.append({'name': name, 'required': required, 'met': None,
                     'figure': 'FAILED: ' + errors[key] if key in errors else 'not run',
                     'miss': ''})

    if 'hopfield' in parts:
        p = parts['hopfield']
        rows.append(ratio_target(
            p, 3, '(a) Hopfield gradient, N = %d, K = %d, D = %d, vs torch' % (
                p['n'], p['k'], p['d'])))
    else:
        missing('hopfield', '(a) Hopfield gradient vs torch', '≥ 3')
    if 'self_attention' in parts:
        p = parts['self_attention']
        rows.append(ratio_target(
            p, 4, '(b) self-attention gradient, N = %d, D = %d, vs torch.autograd' % (
                p['n'], p['d'])))
    else:
        missing('self_attention', '(b) self-attention gradient vs torch.autograd', '≥ 4')
    if 'gmm' in parts:
        p = parts['gmm']
        row = ratio_target(p, 5, '(c) GMM EM iteration, N = %d, K = %d, D = %d, vs sklearn' % (
            p['n'], p['k'], p['d']))
        if p['n'] != p['requested_n']:
            row['miss'] = (row['miss'] + '; ' if row['miss'] else '') + (
                'measured at N = %d, not %d (see (c))' % (p['n'], p['requested_n']))
            if row['met']:
                row['met'] = False
        rows.append(row)
    else:
        missing('gmm', '(c) GMM EM iteration vs sklearn', '≥ 5')
    if 'hopfield' in parts and 'sgemm' in parts:
        p, s = parts['hopfield'], parts['sgemm']
        share = p['ours_gflops'] / s['best']['gflops']
        row = {'name': '(d) kernel of (a) against sgemm, same run',
               'figure': '%.1f GFLOP/s = %.0f %% of sgemm %.1f GFLOP/s' % (
                   p['ours_gflops'], 100 * share, s['best']['gflops']),
               'required': '≥ 50 %', 'met': share >= 0.5, 'miss': ''}
        if share < 0.5:
            row['miss'] = ('%.2f× short: %.1f GFLOP/s needed (ours at most %s)' % (
                0.5 / share, 0.5 * s['best']['gflops'],
                ms(p['flops'] / (0.5 * s['best']['gflops'] * 1e9))))
        rows.append(row)
    else:
        missing('sgemm' if 'sgemm' in errors else 'hopfield',
                '(d) kernel of (a) against sgemm', '≥ 50 %')
    if 'scaling' in parts:
        p = parts['scaling']
        largest = p['rows'][-1]
        row = {'name': '(e) self-attention gradient, N = %d, D = %d: peak memory' % (
                   largest['n'], p['d']),
               'figure': '%s peak RSS' % mib(largest['rss_bytes']),
               'required': '< 256 MiB at N = 65 536', 'met': p['memory_met'], 'miss': ''}
        if largest['n'] < 65536:
            row['miss'] = 'largest N run was %d' % largest['n']
        elif not p['memory_met']:
            row['miss'] = '%s over' % mib(largest['rss_bytes'] - p['limit_bytes'])
        rows.append(row)
        growth = ', '.join('%.2f' % r['per_n2_normalised'] for r in p['rows'])
        worst = max(r['per_n2_normalised'] for r in p['rows'])
        rows.append({'name': '(e) time / N², normalised to N = %d (N = %s)' % (
                         p['rows'][0]['n'], ', '.join(str(r['n']) for r in p['rows'])),
                     'figure': growth, 'required': 'N² growth (≤ 1.25)',
                     'met': worst <= 1.25,
                     'miss': '' if worst <= 1.25 else 'grows %.2f× faster than N²' % worst})
    else:
        missing('scaling', '(e) self-attention gradient at N = 65 536: memory', '< 256 MiB')
    if 'compile' in parts:
        p = parts['compile']
        slow = [r for r in p['rows'] if not r.get('met')]
        slowest = max((r for r in p['rows'] if 'median_s' in r), key=lambda r: r['median_s'],
                      default=None)
        row = {'name': '(f) energyc on each of the %d examples' % len(p['rows']),
               'figure': 'slowest %s: %.2f s' % (slowest['name'], slowest['median_s'])
               if slowest else '-', 'required': '< 2 s each', 'met': p['met'], 'miss': ''}
        if slow:
            row['miss'] = ', '.join(
                '%s %s' % (r['name'], 'failed' if 'error' in r else '%.2f s' % r['median_s'])
                for r in slow)
        rows.append(row)
    else:
        missing('compile', '(f) energyc on every example', '< 2 s each')
    if 'training' in parts:
        p = parts['training']
        row = ratio_target(
            p, 2, 'training step (%d momentum steps + backward), B = %d, N = %d, D = %d, '
            'vs torch' % (p['steps'], p['b'], p['n'], p['d']))
        if 'ratio_checkpointed' in p:
            row['figure'] += ('; every step\'s state kept (--store-all-steps), as torch '
                              'keeps every step\'s graph; with the default checkpoints '
                              '%.2f (ours %s)' % (p['ratio_checkpointed'],
                                                  ms(p['ours_checkpointed_s'])))
        rows.append(row)
    else:
        missing('training', 'training step (run + backward) vs torch', '≥ 2')
    if 'zoo' in parts:
        rows += zoo_targets(parts['zoo'])
    else:
        missing('zoo', 'zoo: every model vs its PyTorch implementation', '≥ 1')
    return rows


def zoo_ratio(model, mode, threads=1):
    return model['timings'].get(str(threads), {}).get(mode, {}).get('ratio')


def zoo_targets(p):
    """The zoo's targets, judged at 1 thread: every model ≥ 1× its PyTorch
    implementation in inference and training, geometric means ≥ 2×, the
    Energy Transformer ≥ 2× in inference (and, a goal of our own, in
    training)."""
    rows = []
    for mode in ('inference', 'training'):
        ratios = [(m['name'], zoo_ratio(m, mode)) for m in p['models']]
        ratios = [(name, r) for name, r in ratios if r is not None]
        below = sorted((r, name) for name, r in ratios if r < 1)
        worst = min(ratios, key=lambda item: item[1]) if ratios else None
        rows.append({
            'name': 'zoo %s: each of %d models vs its PyTorch implementation, 1 thread' % (
                mode, len(ratios)),
            'required': '≥ 1 each', 'met': bool(ratios) and not below,
            'figure': 'lowest %s %.2f' % worst if worst else '-',
            'miss': '%d below: %s' % (len(below), ', '.join(
                '%s %.2f' % (name, r) for r, name in below)) if below else ''})
        mean = p['geomean'].get('%s_1' % mode)
        rows.append({'name': 'zoo %s: geometric mean, 1 thread' % mode, 'required': '≥ 2',
                     'met': mean is not None and mean >= 2,
                     'figure': '%.2f' % mean if mean is not None else '-',
                     'miss': '%.1f× short' % (2 / mean) if mean and mean < 2 else ''})
    et = next((m for m in p['models'] if m['name'] == 'energy_transformer'), None)
    if et:
        for mode in ('inference', 'training'):
            r = zoo_ratio(et, mode)
            rows.append({'name': 'Energy Transformer %s (%s), 1 thread%s' % (
                             mode, ', '.join('%s = %d' % kv for kv in et['dims'].items()),
                             ' (a goal of our own; the target set for it is inference)'
                             if mode == 'training' else ''),
                         'required': '≥ 2', 'met': r is not None and r >= 2,
                         'figure': '%.2f' % r if r is not None else '-',
                         'miss': '%.1f× short' % (2 / r) if r and r < 2 else ''})
    return rows


def zoo_lines(p):
    lines = [
        '## The zoo: models from the literature against their PyTorch implementations',
        '',
        'Each model of tests/zoo at its BENCH_DIMS, f32, the same inputs on both sides. '
        'Inference: the dynamics, `energy-run ARTIFACT --eval run`, against the PyTorch '
        'version (autograd of the energy at each step). Training: the run and the gradient '
        'of the loss through it, `--eval loss-grad --store-all-steps`, against the run '
        'with create_graph=True and loss.backward(). The two sides are timed in turn, in '
        '%d rounds of %d calls each; a time is the median over the rounds of each round\'s '
        'median, and the ratio, PyTorch\'s time / ours (above 1, ours is faster), the '
        'median of the rounds\' ratios. Judged at 1 thread; torch\'s '
        'OpenMP with 2 threads is erratic on small ops on this machine. "agrees": the final '
        'states of the two runs match (relative difference ≤ 2e-2 in f32).' % (
            p.get('rounds', 3), p['reps']),
        '',
    ]
    threads = p['threads']
    header = '| model | dims | steps | agrees |'
    rule = '|---|---|---|---|'
    for t in threads:
        for mode in ('inference', 'training'):
            header += ' %s, %d thread%s: ours / PyTorch (ratio) |' % (
                mode, t, '' if t == 1 else 's')
            rule += '---|'
    lines += [header, rule]
    for m in p['models']:
        row = '| %s | %s | %d | %s |' % (
            m['name'], ', '.join('%s=%d' % kv for kv in m['dims'].items()), m['steps'],
            'yes' if m['agrees'] else '**no** (%.2g)' % m['difference'])
        for t in threads:
            for mode in ('inference', 'training'):
                cell = m['timings'].get(str(t), {}).get(mode)
                row += (' %s / %s (%.2f) |' % (ms(cell['ours_s']), ms(cell['torch_s']),
                                                cell['ratio']) if cell else ' - |')
        lines.append(row)
    means = ', '.join('%s at %s thread%s %.2f' % (
        key.split('_')[0], key.split('_')[1], '' if key.endswith('_1') else 's', value)
        for key, value in p['geomean'].items() if value is not None)
    lines += ['', 'Geometric means of the ratios: %s.' % means]
    return lines


def summary_text(results):
    lines = ['target                                                          '
             'required       status     figure']
    for row in targets(results):
        lines.append('%-63s %-14s %-10s %s' % (
            row['name'][:63], row['required'],
            {True: 'met', False: 'NOT MET', None: 'not run'}[row['met']], row['figure']))
        if row['miss']:
            lines.append('%63s   miss: %s' % ('', row['miss']))
    for part, error in results['errors'].items():
        lines.append('FAILED %s: %s' % (part, error.splitlines()[0]))
    return '\n'.join(lines)


def kept_notes(path):
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return None
    begin, end = text.find(NOTES_BEGIN), text.find(NOTES_END)
    if begin < 0 or end < begin:
        return None
    return text[begin + len(NOTES_BEGIN):end].strip('\n')


def machine_section(results):
    m = results['machine']
    setup, blas = m['blas_setup'], m['openblas'] or {}
    lines = [
        '## Machine and setup',
        '',
        '| | |',
        '|---|---|',
        '| CPU | %s (family %s, model %s) |' % (m['cpu'], m['family'], m['model']),
        '| flags that matter | %s |' % ', '.join(m['flags']),
        '| cores | %d (%d usable by this process) |' % (m['cores'], m['usable_cores']),
        '| threads, both sides | %d: `energy-run --threads %d`; torch.set_num_threads(%d) '
        '(torch reports %d); OPENBLAS_NUM_THREADS = OMP_NUM_THREADS = %d |' % (
            setup['threads'], setup['threads'], setup['threads'], m['torch_threads'],
            setup['threads']),
        '| OpenBLAS | %s |' % (blas.get('config') or 'not loaded'),
        '| OpenBLAS core | **%s** as reported by `openblas_get_corename()` in the anchors\' '
        'process, %s threads; `OPENBLAS_CORETYPE=%s` (%s). Our artifacts load the same '
        'library (runtime/lib/KernelSupport/MatrixProduct.cpp, which names a core only '
        'where the environment names none); they inherit the variable here |' % (
            blas.get('core'), blas.get('threads'), setup['coretype'], setup['coretype_source']),
        '| glibc malloc | %s |' % (
            ', '.join('%s=%s' % item for item in sorted(m['malloc'].items())) +
            ' (set by bench/run_all.py unless the user had: freed blocks stay in the heap '
            'for reuse, so the anchors do not page-fault a fresh N × N matrix in at every '
            'call; energy-run inherits them, except in (e))' if m.get('malloc') else
            'defaults'),
        '| software | Python %s (%s), torch %s, numpy %s, scikit-learn %s |' % (
            m['python'], m['executable'], m['torch'], m['numpy'], m['sklearn']),
        source_line(m.get('source')),
        '| date | %s; the whole run took %.0f s |' % (m['date'], m['elapsed_s']),
        '| load average (1, 5, 15 min) | %.2f %.2f %.2f at the start, %.2f %.2f %.2f at '
        'the end (the machine is shared; for how much figures vary between runs see the notes) |' % (
            *m['loadavg_start'], *m['loadavg_end']),
    ]
    others = ['%s %s (attempt %d of %d)' % (
        name, '?' if part.get('others_share') is None else '%.0f %%' % (100 * part['others_share']),
        part.get('attempt', 1), part.get('attempts', 1))
        for name, part in results['parts'].items()]
    if others:
        lines.append('| share of the machine other processes used during each part '
                     '(/proc/stat less this run\'s CPU time; a part above 10 %% is run '
                     'again with --retries, the least disturbed run kept) | %s |' %
                     ', '.join(others))
    if m.get('core_warning'):
        lines += ['', '**Warning: OpenBLAS did not take the core that was asked for; the '
                      'anchors ran slower than they could.**']
    return lines


def source_line(source):
    if not source or not source.get('commit'):
        return '| source | not a git checkout |'
    text = 'commit %s' % source['commit']
    if source['changed']:
        text += (', with uncommitted changes (the build measured includes them) in ' +
                 ', '.join('`%s`' % path for path in source['changed']))
    else:
        text += ', no uncommitted changes outside bench/ and docs/'
    return '| source | %s |' % text


def method_lines():
    return [
        '## How it is measured',
        '',
        '- **Ours**: `energy-run ARTIFACT ... --bench K --json`: one warm-up evaluation, '
        'then K timed repetitions, the median printed as `{"median_ms": M}`. Loading the '
        'artifact and reading the `--in` files are not timed. The artifacts are compiled '
        'by `build/bin/energyc examples/MODEL.energy -o build/bench/MODEL.so` (f32, '
        '`--cpu=native`).',
        '- **Anchors**: in the same Python process that starts energy-run, one warm-up '
        'call and then the median of the same K calls, each timed alone '
        '(`time.perf_counter`).',
        '- **Same inputs**: every input is drawn once (NumPy, fixed seeds), written to '
        'a safetensors file that energy-run binds with `--in`, and handed to the anchor '
        'as the same float32 arrays. Ours\' values come from one more run with '
        '`--out`, and are compared with the anchor\'s and with a float64 NumPy '
        'evaluation; a difference is max |a − b| over max |b|.',
        '- **Ratio**: anchor time / our time; above 1 we are faster.',
    ]


def default_malloc_rows(p):
    if not p.get('anchor_default_malloc_s'):
        return []
    return ['| torch, own process, glibc malloc at its defaults | %s | %.1f |' % (
                ms(p['anchor_default_malloc_s']), p['flops'] / p['anchor_default_malloc_s'] / 1e9),
            '| anchor with malloc defaults / ours | %.2f | |' % (
                p['anchor_default_malloc_s'] / p['ours_s'])]


def hopfield_lines(p, sgemm):
    lines = [
        '## (a) Hopfield / cross-attention gradient, N = %d, K = %d, D = %d, f32' % (
            p['n'], p['k'], p['d']),
        '',
        'Ours: examples/hopfield.energy, dE/dx of E = −Σᵢ lse_μ(β xᵢ·m_μ), β = 1 '
        '(`%s`). Anchor: torch `softmax(X @ M.T, dim=1) @ M`, which is −dE/dx. '
        'x, m have N(0, D^−1/2) entries (scores about N(0, 1)). %d repetitions.' % (
            display_command(p['command']), p['reps']),
        '',
        '| | time | GFLOP/s (4·N·K·D) |',
        '|---|---|---|',
        '| ours | %s | %.1f |' % (ms(p['ours_s']), p['ours_gflops']),
        '| torch | %s (fastest %s, slowest %s) | %.1f |' % (
            ms(p['anchor_s']), ms(p['anchor_min_s']), ms(p['anchor_max_s']),
            p['anchor_gflops']),
        '| **anchor / ours** | **%.2f** (target ≥ 3) | |' % p['ratio'],
    ] + default_malloc_rows(p) + [
        '',
        'Values: ours against torch %.1e, ours against float64 %.1e, torch against '
        'float64 %.1e (tolerance %.0e of the largest entry): %s. Peak RSS of the '
        'timed energy-run process %s.' % (
            p['diff_ours_torch'], p['diff_ours_f64'], p['diff_torch_f64'],
            p['tolerance'], 'they agree' if p['values_agree'] else '**they differ**',
            mib(p['ours_rss'])),
    ]
    if p['ratio'] < 3:
        needed = p['flops'] / (p['anchor_s'] / 3) / 1e9
        text = ('To reach 3× ours would have to run at %.0f GFLOP/s' % needed)
        if sgemm:
            text += ', %.1f× the best sgemm rate of this run (%.1f GFLOP/s)' % (
                needed / sgemm['best']['gflops'], sgemm['best']['gflops'])
            kernel = (sgemm.get('kernel_bench') or {}).get('kernel child side (4 N^2 D)')
            if kernel:
                text += ('; the softmax-contract kernel alone (bench/kernels, child side, '
                         'the same computation at N = 4096, D = 64) runs at %.1f GFLOP/s '
                         'here, a ratio of %.2f if the artifact ran at its rate' % (
                             kernel, p['anchor_s'] / (p['flops'] / kernel / 1e9)))
        lines += ['', text + '.']
    return lines


def sgemm_lines(p, hopfield):
    lines = ['## (d) The kernel of (a) against sgemm, same run', '',
             '| product | time | GFLOP/s |', '|---|---|---|']
    for row in p['rates']:
        lines.append('| %s float32 %d × %d × %d | %s | %.1f |' % (
            row['library'], row['size'], row['size'], row['size'], ms(row['median_s']),
            row['gflops']))
    lines.append('')
    if hopfield:
        share = hopfield['ours_gflops'] / p['best']['gflops']
        lines.append('Kernel of (a): 4·N·K·D / ours(a) = %.2f GFLOP / %s = **%.1f GFLOP/s, '
                     '%.0f %% of the best sgemm rate (%s %d³, %.1f GFLOP/s)**; target ≥ 50 %%.'
                     % (hopfield['flops'] / 1e9, ms(hopfield['ours_s']),
                        hopfield['ours_gflops'], 100 * share, p['best']['library'],
                        p['best']['size'], p['best']['gflops']))
        lines.append('')
    if 'kernel_bench_output' in p:
        lines += ['`%s` (bench/kernels; the kernel the artifacts call, alone, against '
                  'OpenBLAS sgemm in C, in the same run):' % display_command(p['kernel_bench_command']),
                  '', '```', p['kernel_bench_output'].rstrip(), '```']
    elif 'kernel_bench_error' in p:
        lines.append('softmax-contract-bench failed: `%s`' % p['kernel_bench_error'])
    else:
        lines.append('softmax-contract-bench was not built (%s).' % p.get('kernel_bench_missing'))
    return lines


def self_attention_lines(p):
    lines = [
        '## (b) Self-attention energy gradient, N = %d, D = %d, f32' % (p['n'], p['d']),
        '',
        'Ours: examples/self_attention.energy (`%s`). Anchor: torch.autograd.grad of '
        'E = −Σ_c logsumexp_p((x Wqᵀ)_c·(x Wkᵀ)_p) with respect to x, forward pass '
        'included. x has N(0, 1) entries, Wq and Wk N(0, D^−3/2) (scores about N(0, 1)). '
        '%d repetitions.' % (display_command(p['command']), p['reps']),
        '',
        '| | time | GFLOP/s (8·N²·D) |',
        '|---|---|---|',
        '| ours | %s | %.1f |' % (ms(p['ours_s']), p['ours_gflops']),
        '| torch.autograd | %s (fastest %s, slowest %s) | %.1f |' % (
            ms(p['anchor_s']), ms(p['anchor_min_s']), ms(p['anchor_max_s']),
            p['flops'] / p['anchor_s'] / 1e9),
        '| **anchor / ours** | **%.2f** (target ≥ 4) | |' % p['ratio'],
    ] + default_malloc_rows(p) + [
        '',
        'Gradients: ours against torch %.1e, ours against the float64 closed form '
        '(tools/python/attention_numpy.py) %.1e, torch against it %.1e (tolerance %.0e '
        'of the largest entry): %s.' % (
            p['diff_ours_torch'], p['diff_ours_f64'], p['diff_torch_f64'], p['tolerance'],
            'they agree' if p['values_agree'] else '**they differ**'),
    ]
    if p['ratio'] < 4:
        lines += ['', 'To reach 4× ours would have to take %s, %.0f GFLOP/s in the 8·N²·D '
                  'count.' % (ms(p['anchor_s'] / 4), p['flops'] / (p['anchor_s'] / 4) / 1e9)]
    return lines


def gmm_lines(p):
    d = p['differences']
    lines = [
        '## (c) One full-covariance GMM EM iteration, N = %d, K = %d, D = %d' % (
            p['n'], p['k'], p['d']),
        '',
    ]
    if p['n'] != p['requested_n']:
        lines += ['**Run at N = %d, not %d**: %s.' % (p['n'], p['requested_n'],
                                                     p['fallback_reason']), '']
    elif 'check_s' in p:
        lines += ['One step of ours at N = 10 000 took %s, at 20 000 %s (×%.2f for twice '
                  'N): linear, so N = %d was run.' % (
                      ms(p['check_s'][0]), ms(p['check_s'][1]),
                      p['check_s'][1] / p['check_s'][0], p['n']), '']
    lines += [
        'Ours: examples/gmm.energy, `%s` (f32): one step of its dynamics is one EM '
        'iteration (responsibilities at the entry values, then the closed-form means, '
        'precisions and weights). **A run also evaluates the energy after the step and '
        'the model\'s stopping rule `until maxabs(grad) < 1e-6`** (the gradient with '
        'respect to mu, prec and w), which an sklearn iteration does not; both are timed '
        'alone below. Anchor: scikit-learn GaussianMixture(covariance_type=\'full\', '
        'tol=0, reg_covar=1e-6, init_params=\'random\') with means_init, precisions_init, '
        'weights_init equal to ours\' entry values, float64; one iteration = (fit with '
        'max_iter = %d − fit with max_iter = 1) / %d, each the median of %d fits after '
        'a warm-up fit. Data: %d well-separated clusters (means uniform in [−8, 8]^D, '
        'covariance eigenvalues in [0.5, 1.5]); start: true means + N(0, 0.5²), identity '
        'precisions, equal weights.' % (
            display_command(p['command']), 1 + p['extra_iterations'], p['extra_iterations'],
            p['reps'], p['k']),
        '',
        '| | time |',
        '|---|---|',
        '| ours, `--eval run --steps 1` (step + energy + stopping rule) | %s |' % ms(p['ours_s']),
        '| ours, `--eval energy` alone | %s |' % ms(p['ours_energy_s']),
        '| ours, `--eval grad` alone (mu, prec, w: what the stopping rule needs) | %s |' % ms(
            p['ours_grad_s']),
    ] + ([
        '| ours without the `until` (gmm_no_until.energy), `--eval run --steps 1`: the EM '
        'step and the energy | %s |' % ms(p['ours_no_until_s']),
        '| sklearn / ours without the `until` | %.2f |' % (p['anchor_s'] / p['ours_no_until_s']),
    ] if p.get('ours_no_until_s') else []) + [
        '| sklearn fit, max_iter = 1 | %s |' % ms(p['anchor_fit1_s']),
        '| sklearn fit, max_iter = %d | %s |' % (1 + p['extra_iterations'], ms(p['anchor_fitm_s'])),
        '| sklearn, one iteration | %s |' % ms(p['anchor_s']),
        '| **sklearn / ours** | **%.2f** (target ≥ 5) |' % p['ratio'],
        '',
        'After one iteration from the same start, ours (f32) against sklearn (f64): means '
        '%.1e, precisions %.1e, weights %.1e of the largest entry (tolerances %.0e, %.0e, '
        '%.0e): %s.' % (
            d['means'], d['precisions'], d['weights'], p['tolerance']['means'],
            p['tolerance']['precisions'], p['tolerance']['weights'],
            'they agree' if p['values_agree'] else '**they differ**'),
    ]
    if p['ratio'] < 5:
        lines += ['', 'To reach 5× a run of one step would have to take %s.' % ms(
            p['anchor_s'] / 5)]
    return lines


def scaling_lines(p):
    lines = [
        '## (e) Self-attention gradient at growing N, D = %d' % p['d'],
        '',
        '`%s` and the same at every N (repetitions below). Peak RSS is the energy-run '
        'process\'s own maximum resident set, measured with %s: start-up, inputs and '
        'the warm-up included.' % (display_command(p['rows'][-1]['command']),
                                   p.get('rss_method')),
        '',
        '| N | repetitions | time | time / N², ÷ that at N = %d | peak RSS | dense N × N '
        'f32 scores would take |' % p['rows'][0]['n'],
        '|---|---|---|---|---|---|',
    ]
    for row in p['rows']:
        lines.append('| %d | %d | %s | %.2f | %s | %s |' % (
            row['n'], row['reps'], ms(row['ours_s']), row['per_n2_normalised'],
            mib(row['rss_bytes']), mib(row['dense_scores_bytes'])))
    lines += ['', 'Peak memory at N = %d: %s, limit 256 MiB: %s.' % (
        p['largest_n'], mib(p['largest_rss']), status_text(p['memory_met']))]
    return lines


def compile_lines(p):
    lines = [
        '## (f) Compile time of every example',
        '',
        '`%s` for every examples/*.energy, wall time of the process, %d runs each; the '
        'median is judged against 2 s.' % (p['example_command'], p['runs']),
        '',
        '| example | median | slowest | < 2 s |',
        '|---|---|---|---|',
    ]
    for row in p['rows']:
        if 'error' in row:
            lines.append('| %s | failed: %s | | **no** |' % (
                row['name'], row['error'].splitlines()[0]))
        else:
            lines.append('| %s | %.2f s | %.2f s | %s |' % (
                row['name'], row['median_s'], row['max_s'], 'yes' if row['met'] else '**no**'))
    return lines


def write_document(results, path):
    notes = kept_notes(path)
    parts = results['parts']
    lines = [
        '# Benchmarks',
        '',
        '<!-- Generated by bench/report.py from a run of bench/run_all.py; edit the '
        'scripts, or the notes block at the end, not the figures. -->',
        '',
        '`make bench` builds (`build/`), compiles the artifacts into `build/bench/`, '
        'runs ours and the anchors (PyTorch %s, scikit-learn %s) in the same run on the '
        'same inputs, and writes this file. The figures below are from one full run of' % (
            results['machine']['torch'], results['machine']['sklearn']),
        '',
        '```sh',
        'make bench',
        '# which runs, after building and compiling bench/kernels:',
        results['command'],
        '```',
        '',
        'Each part runs alone too, e.g. `/usr/bin/python3 bench/run_all.py --only gmm '
        '--gmm-n 10000` (see `--help`). All figures of the run are in '
        '`build/bench/results.json`.',
        '',
        '## Targets',
        '',
        '| target | required | status | figure | miss |',
        '|---|---|---|---|---|',
    ]
    for row in targets(results):
        lines.append('| %s | %s | %s | %s | %s |' % (
            row['name'], row['required'], status_text(row['met']), row['figure'], row['miss']))
    for part, error in results['errors'].items():
        lines += ['', '**%s failed**: `%s`' % (part, error.splitlines()[0])]
    lines += [''] + machine_section(results) + [''] + method_lines()
    if 'hopfield' in parts:
        lines += [''] + hopfield_lines(parts['hopfield'], parts.get('sgemm'))
    if 'sgemm' in parts:
        lines += [''] + sgemm_lines(parts['sgemm'], parts.get('hopfield'))
    if 'self_attention' in parts:
        lines += [''] + self_attention_lines(parts['self_attention'])
    if 'gmm' in parts:
        lines += [''] + gmm_lines(parts['gmm'])
    if 'scaling' in parts:
        lines += [''] + scaling_lines(parts['scaling'])
    if 'compile' in parts:
        lines += [''] + compile_lines(parts['compile'])
    if 'zoo' in parts:
        lines += [''] + zoo_lines(parts['zoo'])
    lines += ['', '## Notes', '', NOTES_BEGIN]
    if notes:
        lines.append(notes)
    lines += [NOTES_END, '']
    text = '\n'.join(lines)
    temporary = path + '.tmp'
    with open(temporary, 'w') as f:
        f.write(text)
    os.replace(temporary, path)
