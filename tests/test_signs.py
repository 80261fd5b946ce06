"""passes.signs: which values a graph proves <= 0. Each program's outputs are listed with
whether the analysis may call them non-positive; every output it calls so is also checked
on data, including zeros of both signs, infinities and NaN."""
import numpy as np

import fusegrad as fg
from fusegrad.nn import functional as F
from fusegrad.passes.signs import nonpositive
from helpers import graph_of


def _cases(x, y):
    """(output, provably <= 0?) pairs over square inputs x and y (5, 5), so that a reduction without kept dims still broadcasts."""
    sq = x * x
    return [
        (-sq, True),
        (-x * x, True),                                     # neg(x) * x
        (x * -x, True),
        (-fg.abs(y) - fg.exp(x), True),                     # (<= 0) - (>= 0)
        (x - x.amax(dim=1, keepdim=True), True),            # softmax's shift
        (x - x.amax(dim=0, keepdim=True), True),
        (fg.minimum(-sq, y), True),
        (fg.maximum(-sq, -fg.relu(y)), True),
        ((-sq).sum(dim=1), True),
        (-sq * fg.sigmoid(y), True),                        # (<= 0) * (>= 0)
        (-sq + 0.0, True),
        (x * y, False),
        (-sq + 1.0, False),
        (-sq / fg.abs(y), False),                           # quotients: 1 / -0.0 is -inf
        (x - y.amax(dim=1, keepdim=True), False),           # the max of another value
        (x - x.amax(dim=1), False),                         # dims not kept: other axes align
        (fg.maximum(-sq, y), False),
        (-(-sq), False),
        (fg.sin(x), False),
    ]


def test_nonpositive_facts_and_their_truth(rng):
    x = rng.standard_normal((5, 5)) * 3
    x[0, :3] = [0.0, -0.0, np.inf]
    x[1, 0] = np.nan
    x = x.astype(np.float32)
    y = rng.standard_normal((5, 5)).astype(np.float32)
    y[2, :2] = [-0.0, 0.0]
    with np.errstate(all="ignore"):
        pairs = _cases(fg.tensor(x), fg.tensor(y))
    outs, want = [o for o, _ in pairs], [w for _, w in pairs]
    with np.errstate(all="ignore"):
        g = graph_of(lambda a, b: tuple(o for o, _ in _cases(a, b)), [x, y])
    facts = nonpositive(g)
    got = [v.id in facts for v in g.outputs]
    assert got == want
    for o, proved in zip(outs, got):
        if proved:
            v = o.numpy()
            assert np.all((v <= 0) | np.isnan(v)), v


def test_softmax_and_log_softmax_exp_arguments_are_nonpositive(rng):
    """Softmax and cross-entropy shift by the row maximum, so codegen's exp may take the
    cheaper variant: the exp's argument is proved <= 0."""
    x = rng.standard_normal((3, 7)).astype(np.float32)
    g = graph_of(lambda a: (F.softmax(a, dim=1), F.log_softmax(a, dim=1)), [x])
    facts = nonpositive(g)
    exps = [e for e in g.eqns if e.prim.name == "exp"]
    assert len(exps) == 2 and all(e.inputs[0].id in facts for e in exps)
