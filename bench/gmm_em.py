"""(c) One EM iteration of a full-covariance Gaussian mixture, against
scikit-learn.

Ours: examples/gmm.energy, `energy-run --eval run --steps 1`, with x, mu,
prec (precision matrices) and w (log weights, softmax-normalised) bound from
one safetensors file. One step of its dynamics is one EM iteration: the
responsibilities at the entry values, then the closed-form means,
precisions and weights. A run also evaluates the energy after the step and
the model's stopping rule (`until maxabs(grad) < 1e-6`, a gradient with
respect to mu, prec and w), which sklearn's iteration does not do; they are
timed separately (--eval energy, --eval grad) to show their share, and so
is a run of one step of the same model without its `until`
(build/bench/gmm_no_until.energy, written here): the EM step and the energy
alone.

Anchor: sklearn.mixture.GaussianMixture(covariance_type='full', tol=0,
reg_covar=1e-6) started from the same means, precisions and weights
(means_init, precisions_init, weights_init). An iteration is measured as
(time of fit with max_iter = 1 + m) - (time of fit with max_iter = 1),
over m, each time the median of the same number of fits after a warm-up fit;
the set-up and the final E-step of fit cancel out.

The data: K well-separated clusters in D dimensions (means uniform in
[-8, 8]^D, covariances with eigenvalues in [0.5, 1.5]), N points; the start
is the true means moved by N(0, 0.5^2) noise, identity precisions and equal
weights. One iteration of ours and of sklearn from that start must give the
same parameters (ours in f32, sklearn in f64) within the tolerances below.
"""
import os
import re
import time
import warnings

import numpy as np

from benchlib import ROOT, write_safetensors

# Ours is f32: sums over N points of f32 products, an inverse of a D x D
# covariance. Relative to the largest entry of each parameter.
TOLERANCE = {'means': 1e-4, 'precisions': 1e-3, 'weights': 1e-4}
EXTRA_ITERATIONS = 10  # m


def make_problem(n, k, d, seed=2026):
    rng = np.random.default_rng(seed)
    means = rng.uniform(-8, 8, size=(k, d))
    covariances = np.empty((k, d, d))
    for j in range(k):
        q, _ = np.linalg.qr(rng.standard_normal((d, d)))
        covariances[j] = (q * rng.uniform(0.5, 1.5, size=d)) @ q.T
    weights = rng.uniform(1, 2, size=k)
    weights /= weights.sum()
    labels = rng.choice(k, size=n, p=weights)
    chol = np.linalg.cholesky(covariances)
    x = means[labels] + np.einsum('nij,nj->ni', chol[labels], rng.standard_normal((n, d)))
    start = {
        'means': means + 0.5 * rng.standard_normal((k, d)),
        'precisions': np.broadcast_to(np.eye(d), (k, d, d)).copy(),
        'weights': np.full(k, 1.0 / k),
    }
    return x.astype(np.float32), start


def sklearn_fit(x, start, iterations):
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.mixture import GaussianMixture
    model = GaussianMixture(
        n_components=len(start['weights']), covariance_type='full', tol=0,
        reg_covar=1e-6, max_iter=iterations, init_params='random',
        means_init=start['means'], precisions_init=start['precisions'],
        weights_init=start['weights'], random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', ConvergenceWarning)
        model.fit(x)
    return model


def linearity_check(ctx, artifact, k, d):
    """Times one step of ours at N = 10 000 and 20 000 (the M-step used to
    be quadratic in N): returns (t10, t20)."""
    times = []
    for n in (10000, 20000):
        x, start = make_problem(n, k, d, seed=7)
        path = ctx.path('gmm_check_in.safetensors')
        write_safetensors(path, {'x': x, 'mu': start['means'],
                                 'prec': start['precisions'],
                                 'w': np.log(start['weights'])})
        times.append(ctx.bench_ours(artifact, ['--in', path, '--eval', 'run',
                                               '--steps', '1'], 1)['median_s'])
    return times


def run(ctx):
    k, d = 16, 16
    n = ctx.options.gmm_n
    reps = ctx.options.gmm_reps or ctx.reps
    artifact = ctx.compile('gmm')
    result = {'k': k, 'd': d, 'requested_n': n, 'reps': reps,
              'extra_iterations': EXTRA_ITERATIONS, 'tolerance': TOLERANCE}

    if n > 20000 and not ctx.options.gmm_no_check:
        ctx.log('gmm: is one step linear in N? timing N = 10 000 and 20 000')
        t10, t20 = linearity_check(ctx, artifact, k, d)
        result['check_s'] = [t10, t20]
        ctx.log('gmm: one step at N = 10 000: %.3f s, at 20 000: %.3f s (x %.2f)' % (
            t10, t20, t20 / t10))
        if t20 / t10 > 2.6:
            ctx.log('gmm: more than linear (x %.2f for twice N): running N = 10 000, '
                    'not %d' % (t20 / t10, n))
            result['fallback_reason'] = (
                'one step took %.3f s at N = 10 000 and %.3f s at N = 20 000 (x %.2f '
                'for twice N, more than linear), so N = %d was not attempted' % (
                    t10, t20, t20 / t10, n))
            n = 10000
    result['n'] = n

    x, start = make_problem(n, k, d)
    inputs = ctx.path('gmm_in.safetensors')
    write_safetensors(inputs, {'x': x, 'mu': start['means'],
                               'prec': start['precisions'],
                               'w': np.log(start['weights'])})
    args = ['--in', inputs, '--eval', 'run', '--steps', '1']

    ctx.log('gmm: N = %d, K = %d, D = %d: one step of ours, values' % (n, k, d))
    ours_values = ctx.values_ours(artifact, args, 'gmm')
    ctx.log('gmm: timing ours (energy-run --eval run --steps 1 --bench %d)' % reps)
    ours = ctx.bench_ours(artifact, args, reps)
    result.update(command=ours['command'], ours_s=ours['median_s'],
                  ours_rss=ours['rss_bytes'])
    ctx.log('gmm: ours %.1f ms per run of one step' % (ours['median_s'] * 1e3))
    # The share of the energy and of the gradient the stopping rule needs.
    for what in ('energy', 'grad'):
        part = ctx.bench_ours(artifact, ['--in', inputs, '--eval', what], reps)
        result['ours_%s_s' % what] = part['median_s']
        ctx.log('gmm: ours --eval %s %.1f ms' % (what, part['median_s'] * 1e3))
    # The step without the stopping rule.
    with open(os.path.join(ROOT, 'examples', 'gmm.energy')) as f:
        text, count = re.subn(r'\s+until [^;]*;', ';', f.read())
    if count == 1:
        source = ctx.path('gmm_no_until.energy')
        with open(source, 'w') as f:
            f.write(text)
        variant = ctx.compile('gmm', name='gmm_no_until', source=source)
        part = ctx.bench_ours(variant, args, reps)
        result['ours_no_until_s'] = part['median_s']
        ctx.log('gmm: ours without the until, one step %.1f ms' % (part['median_s'] * 1e3))

    ctx.log('gmm: sklearn, one iteration from the same start (values)')
    one = sklearn_fit(x.astype(np.float64), start, 1)
    ctx.log('gmm: timing sklearn fits with max_iter = 1 and %d (%d each after a warm-up)' % (
        1 + EXTRA_ITERATIONS, reps))
    x64 = x.astype(np.float64)
    medians = {}
    for iterations in (1, 1 + EXTRA_ITERATIONS):
        sklearn_fit(x64, start, iterations)
        times = []
        for _ in range(reps):
            begin = time.perf_counter()
            fitted = sklearn_fit(x64, start, iterations)
            times.append(time.perf_counter() - begin)
            if fitted.n_iter_ != iterations:
                raise RuntimeError('sklearn stopped after %d iterations, not %d' % (
                    fitted.n_iter_, iterations))
        medians[iterations] = float(np.median(times))
    per_iteration = (medians[1 + EXTRA_ITERATIONS] - medians[1]) / EXTRA_ITERATIONS
    result.update(anchor_fit1_s=medians[1],
                  anchor_fitm_s=medians[1 + EXTRA_ITERATIONS],
                  anchor_s=per_iteration, ratio=per_iteration / ours['median_s'])
    ctx.log('gmm: sklearn fit(max_iter=1) %.1f ms, fit(max_iter=%d) %.1f ms: %.2f ms per '
            'iteration' % (medians[1] * 1e3, 1 + EXTRA_ITERATIONS,
                           medians[1 + EXTRA_ITERATIONS] * 1e3, per_iteration * 1e3))

    ours_weights = np.exp(ours_values['w'] - ours_values['w'].max())
    ours_weights /= ours_weights.sum()
    differences = {
        'means': np.abs(ours_values['mu'] - one.means_).max() / np.abs(one.means_).max(),
        'precisions': (np.abs(ours_values['prec'] - one.precisions_).max()
                       / np.abs(one.precisions_).max()),
        'weights': np.abs(ours_weights - one.weights_).max() / np.abs(one.weights_).max(),
    }
    result['differences'] = {key: float(value) for key, value in differences.items()}
    result['values_agree'] = all(differences[key] <= TOLERANCE[key] for key in TOLERANCE)
    result['step_counter'] = float(np.asarray(ours_values.get('step', np.nan)).reshape(-1)[0])
    ctx.log('gmm: sklearn / ours = %.2f (target >= 5); differences after one iteration: '
            'means %.1e, precisions %.1e, weights %.1e' % (
                result['ratio'], differences['means'], differences['precisions'],
                differences['weights']))
    return result
