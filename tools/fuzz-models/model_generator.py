"""Random energy models over the whole language, for differential testing.

A ModelGenerator draws, from a seed, a model that the front end accepts:
dims (some derived), inputs, params and states of rank 0 to 3
(multi-head params, batch axes), consts, lets with indices (read whole,
by row or per element), fns, energy terms (attention-like lse terms with
projections, normalisations, heads, batches, every predicate form and
its equivalent respellings, temperatures, learned scales, now and then
the hard maximum in place of the lse; Hopfield,
mixture, dense and quadratic terms; and random expressions), outputs,
losses that read them, and dynamics of every kind (gd, momentum,
nesterov, newton, precond, ode euler/heun, explicit rules, stationary
for the centres of mixture terms (without losses), order sequential).
Every expression is a tree of Node objects whose shape is known, so that
a reducer can replace a node by a simpler one of the same shape and
still have a valid model.

Values stay moderate: exp only of bounded arguments, log and sqrt of
arguments bounded away from zero, divisions by 1 + x^2, small step sizes.
"""

import random
import re


class Node:
    """An expression: `template` with `{0}`, `{1}`, ... for the children's
    text; `shape` is a tuple of dim names (() for a scalar); `binds` the
    index names it introduces for its children; `uses` the index names a
    leaf reads."""

    def __init__(self, template, shape, children=(), binds=(), uses=()):
        self.template = template
        self.shape = tuple(shape)
        self.children = list(children)
        self.binds = frozenset(binds)
        self.uses = frozenset(uses)

    def text(self):
        return self.template.format(*[c.text() for c in self.children])

    def free(self):
        names = set(self.uses)
        for child in self.children:
            names |= child.free()
        return names - self.binds

    def size(self):
        return 1 + sum(c.size() for c in self.children)

    def walk(self):
        yield self
        for child in self.children:
            yield from child.walk()


def scalar(value):
    return Node('%g' % value if value >= 0 else '(%g)' % value, ())


class Tensor:
    def __init__(self, name, role, shape, init=''):
        self.name, self.role, self.shape, self.init = name, role, tuple(shape), init


class Model:
    """Declarations in order, each a (kind, name, text-producing object)."""

    def __init__(self, name):
        self.name = name
        self.dims = []          # (name, value, derived text or None)
        self.tensors = []       # Tensor
        self.consts = []        # (name, value)
        self.lets = []          # (name, domain [(index, dim)], Node)
        self.fns = []           # (name, [(param, shape)], result shape, Node)
        self.terms = []         # (name, Node)
        self.outputs = []       # (name, domain, Node)
        self.losses = []        # (name, Node)
        self.rules = []         # text of each dynamics rule
        self.steps = 1
        self.until = None       # a stopping condition
        self.backward = None    # how losses differentiate through the run
        self.sequential = False

    def dim_value(self, name):
        for dim, value, _ in self.dims:
            if dim == name:
                return value
        raise KeyError(name)

    def source(self):
        lines = ['model %s {' % self.name]
        if self.dims:
            parts = []
            for name, value, derived in self.dims:
                parts.append('%s = %s' % (name, derived if derived else value))
            lines.append('  dim %s;' % ', '.join(parts))
        for t in self.tensors:
            shape = '[%s]' % ', '.join(t.shape)
            init = ' = %s' % t.init if t.init else ''
            lines.append('  %s %s : %s%s;' % (t.role, t.name, shape, init))
        for name, value in self.consts:
            lines.append('  const %s = %g;' % (name, value))
        for name, params, result, body in self.fns:
            ps = ', '.join('%s: [%s]' % (p, ', '.join(s)) for p, s in params)
            lines.append('  fn %s(%s) -> [%s] = %s;' % (name, ps, ', '.join(result), body.text()))
        for name, domain, body in self.lets:
            dom = '[%s]' % ', '.join('%s: %s' % d for d in domain) if domain else ''
            lines.append('  let %s%s = %s;' % (name, dom, body.text()))
        for name, body in self.terms:
            lines.append('  energy %s = %s;' % (name, body.text()))
        for name, domain, body in self.outputs:
            dom = '[%s]' % ', '.join('%s: %s' % d for d in domain)
            lines.append('  output %s%s = %s;' % (name, dom, body.text()))
        for name, body in self.losses:
            lines.append('  loss %s = %s;' % (name, body.text()))
        if self.rules:
            lines.append('  dynamics {')
            for rule in self.rules:
                lines.append('    %s;' % rule)
            until = ' until %s' % self.until if self.until else ''
            lines.append('    steps %d%s;' % (self.steps, until))
            if self.sequential:
                lines.append('    order sequential;')
            if self.backward:
                lines.append('    backward %s;' % self.backward)
            lines.append('  }')
        lines.append('}')
        return '\n'.join(lines) + '\n'

    def nodes(self):
        """Every expression root, with a function that replaces it."""
        roots = []
        for i, (name, domain, body) in enumerate(self.lets):
            roots.append((body, lambda n, i=i: self._set('lets', i, 2, n)))
        for i, (name, params, result, body) in enumerate(self.fns):
            roots.append((body, lambda n, i=i: self._set('fns', i, 3, n)))
        for i, (name, body) in enumerate(self.terms):
            roots.append((body, lambda n, i=i: self._set('terms', i, 1, n)))
        for i, (name, domain, body) in enumerate(self.outputs):
            roots.append((body, lambda n, i=i: self._set('outputs', i, 2, n)))
        for i, (name, body) in enumerate(self.losses):
            roots.append((body, lambda n, i=i: self._set('losses', i, 1, n)))
        return roots

    def _set(self, field, index, position, node):
        entries = getattr(self, field)
        entry = list(entries[index])
        entry[position] = node
        entries[index] = tuple(entry)


DIM_NAMES = ['N', 'M', 'K', 'D', 'E', 'T', 'B', 'S']
FUNCTIONS = ['tanh', 'sigmoid', 'softplus', 'silu', 'gelu']
# How often a model has a wide dim, and the sizes it draws from.
WIDE_DIM_CHANCE = 0.15
WIDE_DIM_SIZES = [9, 17, 27, 30, 33]


class ModelGenerator:
    def __init__(self, seed):
        self.seed = seed
        self.r = random.Random(seed)
        # The variations of vary(), drawn apart so that the rest of a seed's
        # model stays what it was before they were added.
        self.rv = random.Random(seed * 7919 + 17)
        self.counter = 0
        self.mixtures = {}      # id of a mixture term's Node -> its centres' name
        self.relative_positions = None  # the dim of T5's relative biases
        self.predicate_kind = None      # the kind predicate() chose last
        self.predicate_width = None     # and the dim of its window

    def fresh(self, prefix):
        self.counter += 1
        return '%s%d' % (prefix, self.counter)

    # ------------------------------------------------------------------
    # Declarations
    # ------------------------------------------------------------------

    def generate(self):
        r = self.r
        m = Model('fuzz%d' % self.seed)
        self.m = m
        count = r.randint(2, 4)
        names = r.sample(DIM_NAMES, count)
        values = r.sample([2, 3, 4, 5], count) if count <= 4 else [r.randint(2, 5) for _ in names]
        # Sometimes one dim is wide, of a size off the kernels' vector and
        # tile widths in f64, the precision the check runs in (8 lanes, tiles
        # of up to four vectors: 27 and 30 leave four vectors past no whole
        # tile), so that their wide paths and tails are checked too.
        wide = None
        if r.random() < WIDE_DIM_CHANCE:
            wide = r.randrange(count)
            small, values[wide] = values[wide], r.choice(WIDE_DIM_SIZES)
        for name, value in zip(names, values):
            m.dims.append((name, value, None))
        # Heads: H with a derived per-head width, sometimes.
        if r.random() < 0.3:
            h = r.choice([2, 3])
            width = r.choice([2, 3])
            m.dims.append(('H', h, None))
            m.dims.append(('Dw', h * width, None))
            m.dims.append(('Dh', width, 'Dw / H'))
            # Grouped heads: G groups of R query heads sharing a key head.
            if r.random() < 0.5:
                m.dims.append(('G', r.choice([2, 3]), None))
                m.dims.append(('R', r.choice([2, 3]), None))
        self.dimnames = [d[0] for d in m.dims]

        # Tensors: one or two states, some inputs and params.
        vector_dims = [d for d in self.dimnames]
        for role, count in (('state', r.randint(1, 2)), ('input', r.randint(0, 2)),
                            ('param', r.randint(1, 3))):
            for _ in range(count):
                shape = self.random_shape(role)
                m.tensors.append(Tensor(self.fresh(role[0]), role, shape))
        # A state initialised from an input of its shape.
        for t in m.tensors:
            if t.role == 'state' and r.random() < 0.3:
                sources = [s for s in m.tensors if s.role == 'input' and s.shape == t.shape]
                if sources:
                    t.init = sources[0].name
                elif r.random() < 0.3:
                    t.init = 'zeros'
        if 'H' in self.dimnames:
            # Multi-head projections Wq[h] : [Dh, Dw] over tokens of width Dw.
            tokens = (self.pick_dim(exclude=('H', 'Dh', 'Dw')), 'Dw')
            if r.random() < 0.4:
                # A batch of sequences.
                tokens = (self.pick_dim(exclude=('H', 'Dh', 'Dw')),) + tokens
            m.tensors.append(Tensor(self.fresh('hx'), 'state', tokens))
            for _ in range(2):
                m.tensors.append(Tensor(self.fresh('Wh'), 'param', ('H', 'Dh', 'Dw')))
            if self.rv.random() < 0.4:
                # A learned bias per head and relative offset of two tokens
                # (T5's), of 2·N − 1 offsets.
                n = tokens[-2]
                m.dims.append(('Rel', 2 * m.dim_value(n) - 1, '2 * %s - 1' % n))
                m.tensors.append(Tensor(self.fresh('Wb'), 'param', ('H', 'Rel')))
                self.relative_positions = n
        if 'G' in self.dimnames:
            m.tensors.append(Tensor(self.fresh('Wg'), 'param', ('G', 'R', 'Dh', 'Dw')))
            m.tensors.append(Tensor(self.fresh('Wg'), 'param', ('G', 'Dh', 'Dw')))
        if r.random() < 0.5:
            m.consts.append((self.fresh('c'), round(r.uniform(0.3, 2.0), 2)))

        # Lets and fns the terms may use.
        for _ in range(r.randint(0, 2)):
            self.add_let()
        if r.random() < 0.3:
            self.add_fn()

        for _ in range(r.randint(1, 3)):
            m.terms.append((self.fresh('e'), self.term()))
        if r.random() < 0.25:
            self.add_output()
        self.add_dynamics()
        # Losses differentiate through the steps, which closed-form M-steps
        # do not support.
        if r.random() < 0.45 and m.rules and not any('stationary' in rule for rule in m.rules):
            self.add_loss()
        self.vary()
        # A wide dim stays in the model only where no tensor has it twice
        # (61³ elements and their pairs take the check past its time).
        shapes = [t.shape for t in m.tensors] + [
            tuple(dim for _, dim in domain) for _, domain, _ in m.lets]
        if wide is not None and any(shape.count(names[wide]) > 1
                                    for shape in shapes):
            m.dims = [(name, small if name == names[wide] else value, derived)
                      for name, value, derived in m.dims]
        return m

    def vary(self):
        """Sometimes: Newton by a Taylor series, adaptive ODE steps, a
        stopping rule, losses differentiated at the fixed point, a log
        determinant or an inverse of a matrix of a state or param."""
        rv, m = self.rv, self.m
        minimising = ('gd(', 'momentum(', 'nesterov(', 'newton(', 'precond(', 'ode(')
        if (m.losses and all(any(kind in rule for kind in minimising) for rule in m.rules)
                and rv.random() < 0.2):
            m.backward = 'implicit(cg = %d, tol = 1e-8)' % rv.choice([10, 50])
        for index, rule in enumerate(m.rules):
            if 'newton(' in rule and rv.random() < 0.3:
                m.rules[index] = re.sub(r'cg = \d+', 'taylor = %d' % rv.choice([1, 2]), rule)
            elif 'ode(' in rule and rv.random() < 0.3 and (m.backward or not m.losses):
                # Adaptive steps are not differentiated through step by step.
                m.rules[index] = rule[:-1] + ', rtol = 1e-3, atol = 1e-4)'
        # `grad` is the gradient of the nodes that optimizers update.
        if any(any(kind in rule for kind in minimising) for rule in m.rules) and rv.random() < 0.15:
            m.until = rv.choice(['maxabs(grad) < 1e-3', 'sqnorm(grad) < 1e-6'])
        # Not of a state solved in closed form (its M-step is for one term).
        matrices = [t for t in m.tensors if t.role in ('state', 'param') and len(t.shape) == 2
                    and '%s: stationary' % t.name not in m.rules]
        if matrices and rv.random() < 0.1:
            a = rv.choice(matrices)
            square = 'eye(%s) + %s @ %s.T' % (a.shape[0], a.name, a.name)
            form = rv.choice(['(0.1 * logdet(%s))', '(0.1 * sum(inverse(%s)))'])
            m.terms.append((self.fresh('e'), Node(form % square, ())))
        self.vary_image_descent()

    def vary_image_descent(self):
        """Sometimes, where one descent rule moves a matrix state x, gd:
        the energy terms that read x read it only through one param W (W @
        x[i]), and maybe in a linear term, so that artifacts descend in the
        image of W (energy-change-of-variables) while the interpreter runs
        the steps as written."""
        rv, m = self.rv, self.m
        descents = ('gd(', 'momentum(', 'nesterov(', 'newton(')
        if (len(m.rules) != 1 or not any(': ' + kind in m.rules[0] for kind in descents)
                or m.until or m.backward or rv.random() >= 0.5):
            return
        x = next(t for t in m.tensors if m.rules[0].startswith(t.name + ':'))
        if len(x.shape) != 2:
            return
        m.rules[0] = '%s: gd(lr = %s)' % (
            x.name, re.search(r'lr = ([0-9.]+)', m.rules[0]).group(1))
        maps = [t for t in m.tensors if t.role == 'param' and len(t.shape) == 2
                and t.shape[1] == x.shape[-1]]
        if any(re.search(r'\b%s\b' % x.name, body.text()) for _, _, body in m.lets):
            return
        if not maps:
            maps.append(Tensor(self.fresh('w'), 'param',
                               (rv.choice(self.dimnames[:len(m.dims)]), x.shape[1])))
            m.tensors.append(maps[0])
        w = rv.choice(maps)
        reads = re.compile(r'\b%s\b' % x.name)
        m.terms = [(name, body) for name, body in m.terms if not reads.search(body.text())]
        i = self.fresh('i')
        act = rv.choice(['tanh', 'softplus', 'sigmoid', 'silu'])
        dense = '(-sum(%s: %s) sum(%s(%s @ %s[%s])))' % (i, x.shape[0], act, w.name, x.name, i)
        m.terms.append((self.fresh('e'), Node(dense, ())))
        if rv.random() < 0.5:
            p = Tensor(self.fresh('p'), 'param', (x.shape[1],))
            m.tensors.append(p)
            linear = '(0.3 * sum(%s: %s) dot(%s, %s[%s]))' % (i, x.shape[0], p.name, x.name, i)
            m.terms.append((self.fresh('e'), Node(linear, ())))
        # Enough steps that the steps save more than a call adds (the
        # small dims make the Gram matrix cost as much as a few steps).
        m.steps = rv.choice([5, 6, 8])

    def random_shape(self, role):
        r = self.r
        rank = r.choices([0, 1, 2, 3], weights=[1, 4, 8, 2] if role != 'param' else [1, 3, 8, 2])[0]
        plain = [d for d in self.dimnames if d not in ('H', 'Dh', 'Dw')]
        return tuple(r.choice(plain) for _ in range(rank))

    def pick_dim(self, exclude=()):
        return self.r.choice([d for d in self.dimnames if d not in exclude])

    def tensors(self, roles=('input', 'param', 'state')):
        return [t for t in self.m.tensors if t.role in roles]

    def add_let(self):
        r, m = self.r, self.m
        domain = []
        for _ in range(r.choice([0, 1, 1, 2])):
            domain.append((self.fresh('i'), self.pick_dim(exclude=('Dh', 'Dw'))))
        shape = r.choice([(), (), (self.pick_dim(),)])
        body = self.expr(shape, domain, 2, lets=False)
        m.lets.append((self.fresh('L'), domain, body))

    def add_fn(self):
        r, m = self.r, self.m
        dim = self.pick_dim(exclude=('H',))
        param = self.fresh('v')
        result = r.choice([(), (dim,)])
        # The body reads the parameter as a leaf of shape [dim].
        self.fn_param = (param, (dim,))
        body = self.expr(result, [], 3, lets=False)
        self.fn_param = None
        import re
        if not re.search(r'\b%s\b' % param, body.text()):
            body = Node('({0} + sum(%s))' % param if result == () else '({0} + tanh(%s))' % param,
                        result, [body])
        m.fns.append((self.fresh('f'), [(param, (dim,))], result, body))

    def add_output(self):
        r, m = self.r, self.m
        dim = self.pick_dim(exclude=('Dh', 'Dw'))
        index = self.fresh('i')
        shape = r.choice([(), (self.pick_dim(),)])
        body = self.expr(shape, [(index, dim)], 3)
        m.outputs.append((self.fresh('o'), [(index, dim)], body))

    def add_dynamics(self):
        r, m = self.r, self.m
        states = self.tensors(('state',))
        kinds = ['gd', 'gd', 'momentum', 'nesterov', 'newton', 'precond', 'euler', 'heun', 'explicit']
        self.pending_losses = []
        for state in states:
            kind = r.choice(kinds)
            if kind == 'precond' and len(state.shape) not in (1, 2):
                kind = 'gd'
            if self.solvable_in_closed_form(state) and r.random() < 0.6:
                kind = 'stationary'
            elif len(state.shape) == 2 and r.random() < 0.15:
                kind = 'explicit'
            lr = r.choice([0.05, 0.1, 0.2])
            if kind == 'gd':
                rule = '%s: gd(lr = %g)' % (state.name, lr)
            elif kind == 'momentum':
                rule = '%s: momentum(lr = %g, beta = %g)' % (state.name, lr, r.choice([0.5, 0.9]))
            elif kind == 'nesterov':
                rule = '%s: nesterov(lr = %g, beta = 0.8)' % (state.name, lr)
            elif kind == 'newton':
                rule = '%s: newton(lr = %g, cg = %d)' % (state.name, lr, r.choice([1, 2, 3]))
            elif kind == 'precond':
                last = state.shape[-1]
                d = Tensor(self.fresh('p'), 'param', (last,))
                m.tensors.append(d)
                rule = '%s: precond(lr = %g, P = diag(softplus(%s)) + 0.1 * eye(%s))' % (
                    state.name, lr, d.name, last)
            elif kind == 'stationary':
                rule = '%s: stationary' % state.name
            elif kind in ('euler', 'heun'):
                rule = '%s: ode(%s, dt = %g)' % (state.name, kind, lr)
            else:
                rule = '%s <- %s' % (state.name, self.explicit_rule(state).text())
            m.rules.append(rule)
        m.steps = r.choice([1, 1, 2, 3])
        m.sequential = len(states) > 1 and r.random() < 0.3
        # Losses of explicit rules' states, where every rule can be
        # differentiated through (no stationary rule).
        if not any('stationary' in rule for rule in m.rules):
            m.losses.extend(self.pending_losses)

    def explicit_rule(self, state):
        """A whole-array update of `state`'s shape."""
        r = self.r
        x = Node(state.name, state.shape)
        options = [Node('0.9 * {0} + 0.1 * tanh({0})', state.shape, [x])]
        if len(state.shape) == 2:
            same = [t for t in self.tensors(('param',)) if t.shape == (state.shape[1], state.shape[1])]
            if same:
                options.append(Node('{0} - 0.1 * tanh({0} @ %s)' % r.choice(same).name, state.shape, [x]))
            options.append(Node('0.8 * {0} + 0.2 * softmax_rows({0} @ {0}.T) @ {0}', state.shape, [x]))
            # A learned map of an input at every step (LISTA's We x): the
            # products by the input are the same at every step.
            inputs = [t for t in self.tensors(('input',))
                      if len(t.shape) == 2 and t.shape[0] == state.shape[0]]
            if r.random() < 0.5:
                # Only that, with a loss of the state: what the steps'
                # backward pass differentiates.
                options = []
                if not inputs:
                    inputs = [Tensor(self.fresh('u'), 'input', (state.shape[0], self.pick_dim()))]
                    self.m.tensors.append(inputs[0])
                j = self.fresh('j')
                self.pending_losses.append((self.fresh('l'), Node(
                    '0.5 * mean(%s: %s) sqnorm(%s[%s])' % (j, state.shape[0], state.name, j),
                    (), binds=[j])))
            if inputs:
                source = r.choice(inputs)
                w = Tensor(self.fresh('w'), 'param', (state.shape[1], source.shape[1]))
                self.m.tensors.append(w)
                options.append(Node('0.5 * {0} + 0.5 * tanh(%s @ %s.T + 0.3 * {0})' % (
                    source.name, w.name), state.shape, [x]))
                # The same through a let read by rows (a gradient program
                # differentiates it, as LISTA's).
                b, name = self.fresh('b'), self.fresh('L')
                self.m.lets.append((name, [(b, state.shape[0])], Node(
                    '0.5 * %s[%s] + 0.5 * tanh(%s @ %s[%s] + 0.3 * %s[%s])' % (
                        state.name, b, w.name, source.name, b, state.name, b),
                    (state.shape[1],), uses=[b])))
                options.append(Node(name, state.shape))
        return r.choice(options)

    def add_loss(self):
        r, m = self.r, self.m
        if m.outputs and r.random() < 0.5:
            name, domain, body = m.outputs[0]
            index, dim = domain[0]
            j = self.fresh('j')
            if body.shape:
                read = Node('sqnorm(%s[%s])' % (name, j), (), uses=[j])
            else:
                read = Node('(%s[%s]) ^ 2' % (name, j), (), uses=[j])
            loss = Node('mean(%s: %s) {0}' % (j, dim), (), [read], binds=[j])
        else:
            loss = self.expr((), [], 3, loss=True)
        m.losses.append((self.fresh('l'), loss))

    # ------------------------------------------------------------------
    # Terms
    # ------------------------------------------------------------------

    def term(self):
        r = self.r
        makers = [self.attention_term, self.attention_term, self.hopfield_term,
                  self.mixture_term, self.dense_term, self.quadratic_term,
                  self.random_term]
        if 'H' in self.dimnames:
            makers += [self.multihead_term, self.multihead_term]
        for _ in range(20):
            node = r.choice(makers)()
            if node is not None:
                return node
        return self.random_term()

    def rows_of(self, tensor_roles=('state', 'input', 'param')):
        """Tensors of rank 2 or 3 (rows of vectors), with their row shape."""
        return [t for t in self.tensors(tensor_roles) if len(t.shape) >= 2
                and 'H' not in t.shape[:1]]

    def row_read(self, tensor, scope):
        """A read of one row of `tensor` (leading axes indexed from `scope`,
        else a fresh summed index is not possible: returns None)."""
        indices = []
        used = []
        for dim in tensor.shape[:-1]:
            match = [name for name, d in scope if d == dim and name not in used]
            if not match:
                return None
            name = match[-1]
            used.append(name)
            indices.append(name)
        return Node('%s[%s]' % (tensor.name, ', '.join(indices)), tensor.shape[-1:], uses=indices)

    def projection(self, vector, scope):
        """A row projected: W @ v, a normalisation, both, or v itself."""
        r = self.r
        dim = vector.shape[0]
        squares = [t for t in self.tensors(('param',)) if len(t.shape) == 2 and t.shape[1] == dim]
        choice = r.random()
        v = vector
        if choice < 0.3:
            v = Node(r.choice(['layernorm({0})', 'rmsnorm({0})', 'tanh({0})', 'softmax({0})']),
                     v.shape, [v])
        if squares and r.random() < 0.6:
            w = r.choice(squares)
            v = Node('%s @ {0}' % w.name, (w.shape[0],), [v])
        if r.random() < 0.15:
            v = Node(r.choice(['layernorm({0})', 'rmsnorm({0})', 'tanh({0})']), v.shape, [v])
        return v

    def predicate(self, j, i):
        """A predicate over the new index j and an outer index i of the same
        dim, in one of its equivalent spellings."""
        r = self.r
        forms = {
            'causal': ['%(j)s <= %(i)s', '%(j)s < %(i)s + 1', '%(i)s >= %(j)s', '%(j)s - %(i)s <= 0',
                       '%(i)s + 1 > %(j)s'],
            'strict': ['%(j)s < %(i)s', '%(j)s <= %(i)s - 1', '%(i)s > %(j)s', '%(j)s + 1 <= %(i)s'],
            'exclude': ['%(j)s != %(i)s', '%(i)s != %(j)s', '%(j)s < %(i)s or %(j)s > %(i)s'],
            'anticausal': ['%(j)s >= %(i)s', '%(i)s <= %(j)s', '%(j)s > %(i)s - 1'],
            'band': ['%(j)s <= %(i)s and %(j)s >= %(i)s - 1', '%(j)s < %(i)s + 1 and %(i)s - %(j)s <= 1',
                     '%(i)s >= %(j)s and %(j)s + 1 >= %(i)s'],
            # A window whose width is a dim, known when the kernel runs.
            'window': ['%(j)s <= %(i)s and %(j)s > %(i)s - %(w)s', '%(i)s - %(j)s < %(w)s and %(j)s <= %(i)s',
                       '%(j)s + %(w)s > %(i)s and %(i)s >= %(j)s'],
        }
        kind = r.choice(list(forms))
        width = r.choice([name for name, _, _ in self.m.dims])
        self.predicate_kind, self.predicate_width = kind, width
        return r.choice(forms[kind]) % {'j': j, 'i': i, 'w': width}

    def attention_term(self):
        r = self.r
        rows = self.rows_of()
        states = [t for t in rows if t.role == 'state']
        if not rows:
            return None
        child = r.choice(states or rows)
        parent = r.choice(rows)
        # Children and parents share leading (batch) axes when both have them.
        scope = []
        outer = []
        for dim in child.shape[:-1]:
            name = self.fresh('c')
            scope.append((name, dim))
            outer.append((name, dim))
        cvec = self.row_read(child, scope)
        pscope = list(scope)
        inner = []
        batch = [d for d in parent.shape[:-1]]
        # Parent's leading axes: reuse the child's batch indices where the
        # dims match (all but the last), a new index for the last.
        for position, dim in enumerate(batch):
            if position < len(batch) - 1:
                match = [n for n, d in outer if d == dim]
                if match:
                    continue
            name = self.fresh('p')
            inner.append((name, dim))
        pscope = scope + inner
        pvec = self.row_read(parent, pscope)
        if cvec is None or pvec is None:
            return None
        q = self.projection(cvec, scope)
        k = self.projection(pvec, pscope)
        if q.shape != k.shape:
            squares = [t for t in self.tensors(('param',)) if t.shape == (q.shape[0], k.shape[0])]
            if squares:
                k = Node('%s @ {0}' % squares[0].name, q.shape, [k])
            else:
                return None
        score = Node('dot({0}, {1})', (), [q, k])
        extra = r.random()
        if extra < 0.2:
            score = Node('{0} / sqrt(%s)' % q.shape[0], (), [score])
        elif extra < 0.35 and self.m.consts:
            score = Node('%s * {0}' % self.m.consts[0][0], (), [score])
        elif extra < 0.5:
            bias = self.expr((), pscope, 1)
            score = Node('({0} + 0.3 * {1})', (), [score, bias])
        score = self.learned_scale(score)
        where = ''
        last_inner = inner[-1] if inner else None
        same_dim = [n for n, d in outer if last_inner and d == last_inner[1]]
        if last_inner and same_dim and r.random() < 0.5:
            where = ' where ' + self.predicate(last_inner[0], same_dim[-1])
        temp = ''
        if r.random() < 0.2:
            temp = '; temp = %s' % (self.m.consts[0][0] if self.m.consts else '1.5')
        domain = ', '.join('%s: %s' % d for d in inner)
        # Now and then the hard maximum or minimum (hard attention, a
        # nearest centre), its derivative the indicator of the extremum.
        reduction = 'lse'
        if not temp and self.rv.random() < 0.1:
            reduction = self.rv.choice(['max', 'min'])
        lse = Node('%s(%s%s%s) {0}' % (reduction, domain, where, temp), (), [score],
                   binds=[n for n, _ in inner])
        agg = r.choice(['sum', 'sum', 'mean'])
        body = Node('-%s(%s) {0}' % (agg, ', '.join('%s: %s' % d for d in outer)), (), [lse],
                    binds=[n for n, _ in outer])
        return Node('({0})', (), [body])

    def learned_scale(self, score):
        """`score` times a learned scalar now and then (an inverse
        temperature, cosine attention's g): its training contractions weigh
        sums by products of two pair terms."""
        if self.rv.random() >= 0.25:
            return score
        scales = [t for t in self.m.tensors if t.role == 'param' and t.shape == ()]
        if scales and self.rv.random() < 0.5:
            name = self.rv.choice(scales).name
        else:
            name = self.fresh('g')
            self.m.tensors.append(Tensor(name, 'param', ()))
        return Node('%s * {0}' % name, (), [score])

    def multihead_term(self):
        r = self.r
        tokens = [t for t in self.m.tensors
                  if len(t.shape) in (2, 3) and t.shape[-1] == 'Dw']
        heads = [t for t in self.m.tensors if t.shape == ('H', 'Dh', 'Dw')]
        if not tokens or len(heads) < 2:
            return None
        x = r.choice(tokens)
        n = x.shape[-2]
        h, c, p = self.fresh('h'), self.fresh('c'), self.fresh('p')
        wq, wk = r.sample(heads, 2)
        # A batch of sequences: the tokens of sequence b attend to each other.
        batch = [(self.fresh('b'), x.shape[0])] if len(x.shape) == 3 else []
        at = ''.join('%s, ' % b for b, _ in batch)
        xc = Node('%s[%s%s]' % (x.name, at, c), ('Dw',), uses=[b for b, _ in batch] + [c])
        xp = Node('%s[%s%s]' % (x.name, at, p), ('Dw',), uses=[b for b, _ in batch] + [p])
        if r.random() < 0.4:
            norm = r.choice(['layernorm', 'rmsnorm'])
            xc = Node(norm + '({0})', ('Dw',), [xc])
            xp = Node(norm + '({0})', ('Dw',), [xp])
        grouped = [t for t in self.m.tensors if t.shape == ('G', 'R', 'Dh', 'Dw')]
        group_keys = [t for t in self.m.tensors if t.shape == ('G', 'Dh', 'Dw')]
        if grouped and group_keys and r.random() < 0.5:
            # Grouped-query heads: Wq[g, r] against the group's Wk[g].
            g, head = self.fresh('g'), self.fresh('r')
            q = Node('%s[%s, %s] @ {0}' % (grouped[0].name, g, head), ('Dh',), [xc],
                     uses=[g, head])
            k = Node('%s[%s] @ {0}' % (group_keys[0].name, g), ('Dh',), [xp], uses=[g])
            heads = ['%s: G' % g, '%s: R' % head]
            head_binds = [g, head]
        else:
            q = Node('%s[%s] @ {0}' % (wq.name, h), ('Dh',), [xc], uses=[h])
            k = Node('%s[%s] @ {0}' % (wk.name, h), ('Dh',), [xp], uses=[h])
            heads = ['%s: H' % h]
            head_binds = [h]
        score = self.learned_scale(Node('dot({0}, {1}) / sqrt(Dh)', (), [q, k]))
        where = ' where ' + self.predicate(p, c) if r.random() < 0.5 else ''
        biases = [t for t in self.m.tensors if t.shape == ('H', 'Rel')]
        if (biases and head_binds == [h] and n == self.relative_positions
                and self.rv.random() < 0.6):
            kind = self.predicate_kind if where else None
            if kind in ('causal', 'window') and self.rv.random() < 0.7:
                # A table of the offsets i - j the mask admits alone: 0 to
                # N - 1, or to the window's width W - 1.
                table = self.fresh('Wc')
                width = n if kind == 'causal' else self.predicate_width
                self.m.tensors.append(Tensor(table, 'param', ('H', width)))
                read = '%s[%s, %s - %s]' % (table, h, c, p)
            else:
                read = '%s[%s, %s - %s + %s - 1]' % (biases[0].name, h, c, p, n)
            score = Node('({0} + %s)' % read, (), [score], uses=[h, c, p])
        token = '%s: %s' % (c, n)
        order = r.choice([', '.join(heads + [token]), ', '.join([token] + heads)])
        if batch:
            order = '%s: %s, %s' % (batch[0][0], batch[0][1], order)
        if r.random() < 0.3:
            # A pair energy with no normaliser (sigmoid attention's softplus).
            pair = Node(r.choice(['softplus({0})', 'softplus({0} - 1.0)']), (), [score])
            inner = Node('sum(%s: %s%s) {0}' % (p, n, where), (), [pair], binds=[p])
        else:
            inner = Node('lse(%s: %s%s) {0}' % (p, n, where), (), [score], binds=[p])
        return Node('(-sum(%s) {0})' % order, (), [inner],
                    binds=[b for b, _ in batch] + head_binds + [c])

    def hopfield_term(self):
        r = self.r
        rows = self.rows_of()
        if len(rows) < 1:
            return None
        x = r.choice([t for t in rows if t.role == 'state'] or rows)
        memories = [t for t in rows if t.shape[-1] == x.shape[-1] and len(t.shape) == 2]
        if not memories:
            return None
        mem = r.choice(memories)
        scope = [(self.fresh('i'), d) for d in x.shape[:-1]]
        mu = self.fresh('mu')
        xv = self.row_read(x, scope)
        mv = Node('%s[%s]' % (mem.name, mu), mem.shape[-1:], uses=[mu])
        beta = r.choice(['1.0', '2.0', self.m.consts[0][0] if self.m.consts else '0.5'])
        score = Node('%s * dot({0}, {1})' % beta, (), [xv, mv])
        if r.random() < 0.3:
            score = Node('(%s * sqnorm({0} - {1}) * -0.5)' % beta, (), [xv, mv])
        lse = Node('lse(%s: %s) {0}' % (mu, mem.shape[0]), (), [score], binds=[mu])
        outer = ', '.join('%s: %s' % d for d in scope)
        return Node('(-sum(%s) {0})' % outer, (), [lse], binds=[n for n, _ in scope])

    def mixture_term(self):
        r = self.r
        rows = self.rows_of()
        if not rows:
            return None
        x = r.choice(rows)
        d = x.shape[-1]
        centres = [t for t in rows if len(t.shape) == 2 and t.shape[-1] == d and t is not x]
        if not centres:
            return None
        mu = r.choice(centres)
        k = mu.shape[0]
        weights = [t for t in self.tensors() if t.shape == (k,)]
        scope = [(self.fresh('i'), dd) for dd in x.shape[:-1]]
        j = self.fresh('k')
        xv = self.row_read(x, scope)
        mv = Node('%s[%s]' % (mu.name, j), (d,), uses=[j])
        body = Node('-0.5 * sqnorm({0} - {1})', (), [xv, mv])
        if weights:
            w = r.choice(weights)
            body = Node('(log_softmax(%s)[%s] + {0})' % (w.name, j), (), [body], uses=[j])
        lse = Node('lse(%s: %s) {0}' % (j, k), (), [body], binds=[j])
        outer = ', '.join('%s: %s' % dd for dd in scope)
        term = Node('(-sum(%s) {0})' % outer, (), [lse], binds=[n for n, _ in scope])
        if len(scope) == 1:             # the M-step's form: one sum over points
            self.mixtures[id(term)] = mu.name
        return term

    def solvable_in_closed_form(self, state):
        """Whether `state` may be `stationary`: the centres of a mixture
        term, read by no other term, let or fn (the M-step is built for one
        such term; with responsibilities held, it is quadratic in the rows)."""
        m = self.m
        mentions = re.compile(r'\b%s\b' % re.escape(state.name))
        readers = [body for _, body in m.terms if mentions.search(body.text())]
        others = [body.text() for _, _, body in m.lets] + [body.text() for _, _, _, body in m.fns]
        return (len(state.shape) == 2 and len(readers) == 1 and
                all(self.mixtures.get(id(body)) == state.name for body in readers) and
                not any(mentions.search(text) for text in others))

    def dense_term(self):
        r = self.r
        rows = self.rows_of()
        if not rows:
            return None
        x = r.choice(rows)
        d = x.shape[-1]
        mats = [t for t in self.tensors(('param',)) if len(t.shape) == 2 and t.shape[1] == d]
        if not mats:
            return None
        w = r.choice(mats)
        scope = [(self.fresh('i'), dd) for dd in x.shape[:-1]]
        xv = self.row_read(x, scope)
        act = r.choice(['sigmoid', 'tanh', 'softplus', 'relu', 'silu_int', 'layernorm', 'softmax'])
        hidden = Node('%s(%s @ {0})' % (act, w.name), (w.shape[0],), [xv])
        if act in ('relu',):
            body = Node('0.5 * sqnorm({0})', (), [hidden])
        else:
            body = Node('sum({0})', (), [hidden]) if r.random() < 0.5 else Node('-lse({0})', (), [hidden])
        outer = ', '.join('%s: %s' % dd for dd in scope)
        return Node('(-sum(%s) {0})' % outer, (), [body], binds=[n for n, _ in scope])

    def quadratic_term(self):
        r = self.r
        states = [t for t in self.tensors(('state',))]
        x = r.choice(states)
        if not x.shape:
            return Node('(0.5 * %s ^ 2)' % x.name, ())
        scope = [(self.fresh('i'), d) for d in x.shape[:-1]]
        xv = self.row_read(x, scope) if scope else Node(x.name, x.shape)
        body = Node('0.5 * sqnorm({0})', (), [xv])
        if not scope:
            return Node('({0})', (), [body])
        outer = ', '.join('%s: %s' % d for d in scope)
        return Node('(sum(%s) {0})' % outer, (), [body], binds=[n for n, _ in scope])

    def random_term(self):
        return Node('({0})', (), [self.expr((), [], 3)])

    # ------------------------------------------------------------------
    # Expressions of a given shape
    # ------------------------------------------------------------------

    def leaves(self, shape, scope, lets=True):
        """Reads of tensors, lets, fn parameters and index values of
        `shape` with the indices in scope."""
        out = []
        for t in self.m.tensors:
            node = self.read_as(t.name, t.shape, shape, scope)
            if node is not None:
                out.append(node)
        if lets:
            for name, domain, body in self.m.lets:
                full = tuple(d for _, d in domain) + body.shape
                node = self.read_as(name, full, shape, scope)
                if node is not None:
                    out.append(node)
        param = getattr(self, 'fn_param', None)
        if param and param[1] == shape:
            out.append(Node(param[0], shape))
        if shape == ():
            for name, _ in self.m.consts:
                out.append(Node(name, ()))
            for name, _ in scope:
                out.append(Node('(0.3 * %s)' % name, (), uses=[name]))
        return out

    def read_as(self, name, full, shape, scope):
        """`name[indices]` of shape `shape` when its leading axes can be
        indexed from `scope` (or by 0)."""
        k = len(full) - len(shape)
        if k < 0 or tuple(full[k:]) != tuple(shape):
            return None
        indices = []
        for dim in full[:k]:
            match = [n for n, d in scope if d == dim]
            if match:
                indices.append(self.r.choice(match))
            elif self.r.random() < 0.3:
                indices.append('0')
            else:
                return None
        if not indices:
            return Node(name, shape)
        used = [i for i in indices if i != '0']
        return Node('%s[%s]' % (name, ', '.join(indices)), shape, uses=used)

    def terminal(self, shape):
        """A constant of `shape` that reads nothing."""
        if shape == ():
            return scalar(round(self.r.uniform(-1, 1), 2))
        if len(shape) == 1:
            return Node('eye(%s)[0]' % shape[0], shape)
        if shape[0] == shape[1]:
            return Node('eye(%s)' % shape[0], shape)
        return Node('outer(eye(%s)[0], eye(%s)[1])' % shape, shape)

    def expr(self, shape, scope, depth, lets=True, loss=False):
        r = self.r
        leaves = self.leaves(shape, scope, lets)
        if depth <= 0 or (leaves and r.random() < 0.35):
            return r.choice(leaves) if leaves else self.terminal(shape)
        makers = [self.elementwise, self.binary, self.binary]
        if shape == ():
            makers += [self.vector_to_scalar, self.vector_to_scalar, self.domain_reduction,
                       self.domain_reduction]
            if self.m.fns:
                makers.append(self.fn_call)
        if len(shape) == 1:
            makers += [self.matvec, self.along_axis, self.domain_reduction]
            if self.m.fns:
                makers.append(self.fn_call)
        if len(shape) == 2:
            makers += [self.outer, self.matmul]
        for _ in range(10):
            node = r.choice(makers)(shape, scope, depth - 1, lets)
            if node is not None:
                return node
        return r.choice(leaves) if leaves else self.terminal(shape)

    def elementwise(self, shape, scope, depth, lets):
        r = self.r
        inner = self.expr(shape, scope, depth, lets)
        form = r.choice(FUNCTIONS + ['exp(tanh({0}))', 'log(1 + ({0}) ^ 2)', 'sqrt(1 + ({0}) ^ 2)',
                                     '(({0}) ^ 2)', '(-({0}))', '(0.5 * ({0}))', 'abs({0})',
                                     'relu({0})'])
        if '{0}' not in form:
            form = form + '({0})'
        # Now and then the functions of position encodings and graph
        # attention (drawn apart, so that other models stay as they were).
        if self.rv.random() < 0.1:
            form = self.rv.choice(['sin({0})', 'cos({0})', 'elu({0})', 'leaky_relu({0}, 0.2)'])
        return Node(form, shape, [inner])

    def binary(self, shape, scope, depth, lets):
        r = self.r
        a = self.expr(shape, scope, depth, lets)
        if r.random() < 0.3:
            b = self.expr((), scope, depth, lets)
        else:
            b = self.expr(shape, scope, depth, lets)
        op = r.choice(['+', '-', '*', '/'])
        if op == '/':
            return Node('({0} / (1 + ({1}) ^ 2))', shape, [a, b])
        return Node('({0} %s {1})' % op, shape, [a, b])

    def vector_to_scalar(self, shape, scope, depth, lets):
        r = self.r
        dim = self.pick_dim()
        v = self.expr((dim,), scope, depth, lets)
        form = r.choice(['sum({0})', 'mean({0})', 'lse({0})', 'sqnorm({0})', 'dot({0}, {1})',
                         'quad({0}, {1})', 'norm({0})', 'softmax({0})[0]'])
        if form == 'dot({0}, {1})':
            return Node(form, (), [v, self.expr((dim,), scope, depth, lets)])
        if form == 'quad({0}, {1})':
            return Node(form, (), [v, self.expr((dim, dim), scope, depth, lets)])
        return Node(form, (), [v])

    def along_axis(self, shape, scope, depth, lets):
        form = self.r.choice(['softmax({0})', 'log_softmax({0})', 'layernorm({0})', 'rmsnorm({0})'])
        return Node(form, shape, [self.expr(shape, scope, depth, lets)])

    def matvec(self, shape, scope, depth, lets):
        r = self.r
        inner = self.pick_dim()
        m = self.expr((shape[0], inner), scope, depth, lets)
        v = self.expr((inner,), scope, depth, lets)
        return Node('({0} @ {1})', shape, [m, v])

    def outer(self, shape, scope, depth, lets):
        a = self.expr(shape[:1], scope, depth, lets)
        b = self.expr(shape[1:], scope, depth, lets)
        return Node('outer({0}, {1})', shape, [a, b])

    def matmul(self, shape, scope, depth, lets):
        r = self.r
        inner = self.pick_dim()
        if r.random() < 0.5:
            a = self.expr((shape[0], inner), scope, depth, lets)
            b = self.expr((inner, shape[1]), scope, depth, lets)
            return Node('({0} @ {1})', shape, [a, b])
        a = self.expr((shape[1], shape[0]), scope, depth, lets)
        return Node('({0}).T', shape, [a])

    def fn_call(self, shape, scope, depth, lets):
        for name, params, result, body in self.m.fns:
            if tuple(result) == tuple(shape):
                args = [self.expr(s, scope, depth, lets) for _, s in params]
                return Node('%s(%s)' % (name, ', '.join('{%d}' % i for i in range(len(args)))),
                            shape, args)
        return None

    def domain_reduction(self, shape, scope, depth, lets):
        r = self.r
        dim = self.pick_dim(exclude=('Dh', 'Dw'))
        index = self.fresh('j')
        inner_scope = scope + [(index, dim)]
        kind = r.choice(['sum', 'mean', 'lse'] if shape == () else ['sum', 'mean'])
        body = self.expr(shape, inner_scope, depth, lets)
        if index not in body.free():
            # Make the body depend on the index: read something at it.
            reads = [n for n in self.leaves(shape, inner_scope, lets) if index in n.free()]
            if reads:
                body = Node('({0} + {1})', shape, [body, r.choice(reads)])
        where = ''
        same = [n for n, d in scope if d == dim]
        if same and r.random() < 0.5:
            where = ' where ' + self.predicate(index, same[-1])
        temp = ''
        if kind == 'lse' and r.random() < 0.3:
            temp = '; temp = %s' % (self.m.consts[0][0] if self.m.consts else '0.7')
        return Node('(%s(%s: %s%s%s) {0})' % (kind, index, dim, where, temp), shape, [body],
                    binds=[index])


def reductions(model):
    """Candidate simplifications of `model`, as functions that apply one
    and return a description (each applied to a copy by the caller)."""
    import copy
    candidates = []
    for field in ('terms', 'losses', 'outputs', 'lets', 'fns'):
        for index in range(len(getattr(model, field))):
            def drop(m, field=field, index=index):
                del getattr(m, field)[index]
            candidates.append(('drop %s %d' % (field[:-1], index), drop))
    for index in range(len(model.rules)):
        def drop_rule(m, index=index):
            del m.rules[index]
        candidates.append(('drop rule %d' % index, drop_rule))
    if model.steps > 1:
        candidates.append(('one step', lambda m: setattr(m, 'steps', 1)))
    if model.sequential:
        candidates.append(('no order', lambda m: setattr(m, 'sequential', False)))
    for index, (name, value, derived) in enumerate(model.dims):
        if derived is None and value > 2:
            def smaller(m, index=index):
                name, value, derived = m.dims[index]
                m.dims[index] = (name, value - 1, derived)
            candidates.append(('dim %s smaller' % name, smaller))
    # Expression nodes: replace a node by one of its children of the same
    # shape that needs no index the node binds.
    for root_index, (root, _) in enumerate(model.nodes()):
        for node_index, node in enumerate(root.walk()):
            for child_index, child in enumerate(node.children):
                if child.shape == node.shape and not (child.free() & node.binds):
                    def hoist(m, root_index=root_index, node_index=node_index,
                              child_index=child_index):
                        root, replace = m.nodes()[root_index]
                        target = list(root.walk())[node_index]
                        child = target.children[child_index]
                        if target is root:
                            replace(child)
                        else:
                            for parent in root.walk():
                                for k, c in enumerate(parent.children):
                                    if c is target:
                                        parent.children[k] = child
                    candidates.append(('node %d.%d -> child %d' % (root_index, node_index,
                                                                 child_index), hoist))
    return candidates
