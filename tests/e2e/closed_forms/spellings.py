#!/usr/bin/env python3
"""Closed-form M-steps decided by algebra, whatever the spelling.

With responsibilities held, `stationary` solves a node in closed form when
the energy is quadratic in its rows (decided by differentiating: the
Hessian-vector product does not depend on the node), a Gaussian precision,
or normalised log weights. Each model below is one EM step (`mu:
stationary`, or `prec`) of a mixture energy written another way; the
compiled f64 step is compared with NumPy float64: responsibilities from the
model's own e(i, k) at entry, then the minimiser of -sum r e in the node,
computed from the formula of each energy (weighted means; with a prior, the
prior's pull; per-point matrices, a linear solve; precisions, the inverse
of the weighted scatter plus scikit-learn's ridge 1e-6). Tolerance 1e-10
relative: double precision through a D x D solve of well-conditioned
matrices. A non-quadratic energy gets the located error. Compiled at -O0:
what is checked is the plan's closed form, the same at every level.

Usage: spellings.py ENERGYC ENERGY_RUN
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..', '..',
                                'tools', 'python'))
from energy_tools import EnergyTools  # noqa: E402

energyc, energy_run = sys.argv[1:3]
failures = []
N, K, D = 40, 3, 4
rng = np.random.default_rng(8)
x = rng.normal(size=(N, D)) * 2
mu0 = rng.normal(size=(K, D))
lp = rng.normal(size=(K, D)) * 0.3            # log precisions
s = rng.normal(size=(K, D))                   # softplus weights
w = rng.normal(size=K) * 0.2
m0 = rng.normal(size=D)                       # a prior mean
a = rng.normal(size=(D, D))
prec = np.stack([np.eye(D) + 0.2 * (b @ b.T) for b in rng.normal(size=(K, D, D)) * 0.5])
per_point = np.stack([np.eye(D) + 0.1 * (b @ b.T) for b in rng.normal(size=(N, D, D))])
lam = 2.0


def log_softmax(v):
    return v - np.log(np.sum(np.exp(v - v.max()))) - v.max()


def responsibilities(e):
    e = e - e.max(axis=1, keepdims=True)
    r = np.exp(e)
    return r / r.sum(axis=1, keepdims=True)


def softplus(v):
    return np.log1p(np.exp(v))


weights = np.exp(lp)                            # [K, D]
diag_e = (log_softmax(w)[None, :] + 0.5 * lp.sum(axis=1)[None, :]
          - 0.5 * np.einsum('kd,ikd->ik', weights, (x[:, None, :] - mu0[None]) ** 2))
r = responsibilities(diag_e)
weighted_mean = (r.T @ x) / r.sum(axis=0)[:, None]

PRELUDE = '''model m {
  dim N, K, D;
  input x : [N, D], lp : [K, D], s : [K, D], w : [K], m0 : [D], P : [K, D, D], M : [N, D, D];
  const lambda = 2.0;
  state mu : [K, D], prec : [K, D, D];
'''
cases = []
# The same energy, written six ways: the means are the weighted means.
for name, spelling in [
        ('weighted squares summed over a vector', 'sum(exp(lp[k]) * (x[i] - mu[k]) ^ 2)'),
        ('sqnorm', 'sqnorm(exp(0.5 * lp[k]) * (x[i] - mu[k]))'),
        ('quad with a diagonal matrix', 'quad(x[i] - mu[k], diag(exp(lp[k])))'),
        ('quad with the node first', 'quad(mu[k] - x[i], diag(exp(lp[k])))'),
        ('expanded dot products', 'dot(x[i] * exp(lp[k]), x[i]) - 2 * dot(x[i] * exp(lp[k]), mu[k]) + dot(mu[k] * exp(lp[k]), mu[k])'),
        ('constants in between', '(sum(exp(lp[k]) * (x[i] - mu[k]) ^ 2) + 3.0) * 1 - 3.0')]:
    cases.append((name, '(log_softmax(w)[k] + 0.5 * sum(lp[k]) - 0.5 * (%s))' % spelling,
                  weighted_mean, r))

# softplus weights: other weights, other responsibilities.
sp = softplus(s)
sp_e = (log_softmax(w)[None, :] + 0.5 * lp.sum(axis=1)[None, :]
        - 0.5 * np.einsum('kd,ikd->ik', sp, (x[:, None, :] - mu0[None]) ** 2))
r_sp = responsibilities(sp_e)
cases.append(('softplus weights',
              '(log_softmax(w)[k] + 0.5 * sum(lp[k]) - 0.5 * sum(softplus(s[k]) * (x[i] - mu[k]) ^ 2))',
              (r_sp.T @ x) / r_sp.sum(axis=0)[:, None], r_sp))

# A sum of two quadratic terms: the data and a prior (inside the lse, so
# counted once per point), per coordinate
# mu_kd = (e^lp_kd sum_i r_ik x_id + lambda n_k m0_d) / (n_k (e^lp_kd + lambda)).
prior_e = diag_e - 0.5 * lam * ((mu0 - m0) ** 2).sum(axis=1)[None, :]
r_prior = responsibilities(prior_e)
n = r_prior.sum(axis=0)[:, None]
prior_mean = (weights * (r_prior.T @ x) + lam * n * m0) / (n * (weights + lam))
cases.append(('a sum of two quadratic terms (a prior)',
              '(log_softmax(w)[k] + 0.5 * sum(lp[k]) - 0.5 * sum(exp(lp[k]) * (x[i] - mu[k]) ^ 2) - 0.5 * lambda * sqnorm(mu[k] - m0))',
              prior_mean, r_prior))

# A matrix per point: mu_k = (sum_i r M_i)^-1 sum_i r M_i x_i.
pp_e = np.stack([[log_softmax(w)[k] - 0.5 * (x[i] - mu0[k]) @ per_point[i] @ (x[i] - mu0[k])
                  for k in range(K)] for i in range(N)])
r_pp = responsibilities(pp_e)
pp_mean = np.stack([np.linalg.solve(np.einsum('i,ide->de', r_pp[:, k], per_point),
                                    np.einsum('i,ide,ie->d', r_pp[:, k], per_point, x))
                    for k in range(K)])
cases.append(('a matrix per point', '(log_softmax(w)[k] - 0.5 * quad(x[i] - mu[k], M[i]))',
              pp_mean, r_pp))

inputs = {'x': x, 'lp': lp, 's': s, 'w': w, 'm0': m0, 'P': prec, 'M': per_point,
          'mu': mu0, 'prec': np.stack([np.eye(D)] * K)}


def check(condition, message):
    print(('ok    ' if condition else 'FAIL  ') + message)
    if not condition:
        failures.append(message)


with tempfile.TemporaryDirectory() as directory:
    tools = EnergyTools(energyc, energy_run, directory)
    for number, (name, body, expected, _) in enumerate(cases):
        source = os.path.join(directory, 'mean%d.energy' % number)
        with open(source, 'w') as f:
            f.write(PRELUDE + '  energy fit = -sum(i: N) lse(k: K) %s;\n' % body +
                    '  dynamics { mu: stationary; steps 1; }\n}\n')
        artifact = tools.compile(source, 'f64', opt_level=0)
        _, state = tools.run(artifact, inputs=inputs, steps=1)
        error = np.abs(state['mu'] - expected).max() / np.abs(expected).max()
        check(error <= 1e-10, 'mu, %s: %.1e' % (name, error))

    # Gaussian precisions, two spellings: prec_k = (S_k / n_k + 1e-6 I)^-1
    # with S_k the scatter about the (held) means.
    prec_e = np.stack([[log_softmax(w)[k] + 0.5 * np.linalg.slogdet(prec[k])[1]
                        - 0.5 * (x[i] - mu0[k]) @ prec[k] @ (x[i] - mu0[k])
                        for k in range(K)] for i in range(N)])
    r_prec = responsibilities(prec_e)
    expected = np.stack([np.linalg.inv(
        np.einsum('i,id,ie->de', r_prec[:, k], x - mu0[k], x - mu0[k]) / r_prec[:, k].sum()
        + 1e-6 * np.eye(D)) for k in range(K)])
    for name, body in [
            ('quad', '0.5 * logdet(prec[k]) - 0.5 * quad(x[i] - mu[k], prec[k])'),
            ('dot with a product, signs outside',
             '-0.5 * (dot(x[i] - mu[k], prec[k] @ (x[i] - mu[k])) - logdet(prec[k]))')]:
        source = os.path.join(directory, 'prec_%d.energy' % len(name))
        with open(source, 'w') as f:
            f.write(PRELUDE + '  energy fit = -sum(i: N) lse(k: K) (log_softmax(w)[k] + %s);\n' % body +
                    '  dynamics { prec: stationary; steps 1; }\n}\n')
        artifact = tools.compile(source, 'f64', opt_level=0)
        _, state = tools.run(artifact, inputs=dict(inputs, prec=prec), steps=1)
        error = np.abs(state['prec'] - expected).max() / np.abs(expected).max()
        check(error <= 1e-10, 'prec, %s: %.1e' % (name, error))

    # Not quadratic: an error at the rule, naming the node and why.
    source = os.path.join(directory, 'tanh.energy')
    with open(source, 'w') as f:
        f.write(PRELUDE + '  energy fit = -sum(i: N) lse(k: K) (log_softmax(w)[k] - sum(tanh(mu[k]) * x[i]) ^ 2);\n'
                '  dynamics { mu: stationary; steps 1; }\n}\n')
    result = subprocess.run([energyc, source, '-o', os.path.join(directory, 'tanh.so')],
                            capture_output=True, text=True)
    check(result.returncode != 0 and 'tanh.energy:7:14: error: no closed form for stationary node @mu' in result.stderr
          and 'not quadratic in it' in result.stderr,
          'a non-quadratic energy: %s' % next(
              (line for line in result.stderr.splitlines() if 'error:' in line), '(no error)'))

if failures:
    sys.exit('%d check(s) failed' % len(failures))
print('all checks passed')
