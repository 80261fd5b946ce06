"""Random program generator.

A program is a straight-line Python function of 1-3 float64 tensors written against the
``torch`` namespace, so the same source runs with ``fusegrad`` bound to ``torch`` and with
PyTorch itself. It is built from a seed by a ``numpy.random.Generator``; ``Program.script()``
prints it as a standalone, runnable reproduction."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from .nn_ops import NNOps

UNARY = [
    "{a}.sin()", "{a}.cos()", "{a}.tanh()", "torch.sigmoid({a})", "torch.exp({a}.clamp(-4.0, 4.0))",
    "torch.log({a}.abs() + 0.5)", "torch.sqrt({a} * {a} + 1.0)", "torch.relu({a})", "{a}.abs()", "-{a}",
    "torch.log1p({a}.abs())", "torch.expm1({a}.tanh())", "torch.erf({a})", "torch.rsqrt({a} * {a} + 1.0)",
    "{a} ** 2", "{a}.pow(3)", "torch.tan({a}.tanh())", "{a} * 2.5", "1.5 - {a}", "{a} / 3.0",
    "{a}.clamp(-0.5, 0.7)", "torch.atan2({a}, {a} * {a} + 1.0)",
]
NONSMOOTH = ["{a}.floor()", "{a}.ceil()", "{a}.round()", "{a}.trunc()", "{a}.sign()"]
BINARY = [
    "{a} + {b}", "{a} - {b}", "{a} * {b}", "{a} / ({b} * {b} + 1.0)", "torch.maximum({a}, {b})",
    "torch.minimum({a}, {b})", "torch.atan2({a}, {b} * {b} + 0.5)", "torch.where({a} > {b}, {a} * 2.0, {b})",
]


@dataclass
class Stmt:
    out: str
    text: str            # one or more lines; may define helper names prefixed with _t
    args: list
    shape: tuple
    smooth: bool = True


@dataclass
class Program:
    seed: int
    in_shapes: list
    stmts: list = field(default_factory=list)
    outputs: list = field(default_factory=list)

    @property
    def n_in(self):
        return len(self.in_shapes)

    @property
    def smooth(self):
        return all(s.smooth for s in self.stmts)

    def body(self, name="prog", indent="    "):
        args = ", ".join(f"x{i}" for i in range(self.n_in))
        lines = [f"def {name}({args}):"]
        for s in self.stmts:
            lines += [indent + ln for ln in s.text.split("\n")]
        lines.append(f"{indent}return ({', '.join(self.outputs)},)")
        return "\n".join(lines)

    def make(self, torch_mod, name="prog"):
        ns = {"torch": torch_mod}
        exec(compile(self.body(name), f"<fuzz seed={self.seed}>", "exec"), ns)
        return ns[name]

    def inputs(self, np_seed=None):
        r = np.random.default_rng(self.seed + 7919 if np_seed is None else np_seed)
        return [r.standard_normal(s) for s in self.in_shapes]

    def script(self, note=""):
        arrays = self.inputs()
        mk = "\n".join(f"x{i} = torch.tensor(np.array({a.tolist()!r}, dtype=np.float64), requires_grad=True)"
                       for i, a in enumerate(arrays))
        xs = ", ".join(f"x{i}" for i in range(self.n_in))
        return (f"# fusegrad fuzz program, seed={self.seed}{' -- ' + note if note else ''}\n"
                f"import numpy as np\nimport fusegrad as torch\n\n{self.body()}\n\n{mk}\n"
                f"outs = prog({xs})\nprint([o.tolist() for o in outs])\n"
                f"# the checker backpropagates seeded random cotangents; summing the outputs is the plain variant\n"
                f"sum(o.sum() for o in outs).backward()\nprint([x.grad for x in ({xs},)])\n"
                f"print([o.tolist() for o in torch.compile(prog, backend='cpu')({xs})])\n")


def _bcast(a, b):
    try:
        return tuple(np.broadcast_shapes(a, b))
    except ValueError:
        return None


class _Gen(NNOps):
    def __init__(self, seed, n_ops, exclude=()):
        self.r = np.random.default_rng(seed)
        self.exclude = set(exclude)
        self.seed = seed
        self.n_ops = n_ops
        self.shapes = {}
        self.stmts = []
        self.k = 0

    def pick(self, pred=lambda s: True, names=None):
        cands = [n for n, s in self.shapes.items() if pred(s)] if names is None else names
        if not cands:
            return None
        # prefer recent values so programs form chains rather than flat fans
        w = np.arange(1, len(cands) + 1, dtype=float) ** 1.5
        return cands[self.r.choice(len(cands), p=w / w.sum())]

    def dim(self, nd):
        return int(self.r.integers(-nd, nd))

    def emit(self, text, args, shape, smooth=True):
        out = f"v{self.k}"
        self.k += 1
        lines = text.split("\n")
        lines[-1] = f"{out} = {lines[-1]}"
        self.stmts.append(Stmt(out, "\n".join(lines), args, tuple(int(d) for d in shape), smooth))
        self.shapes[out] = tuple(int(d) for d in shape)
        return out

    # --- op families: each returns True when it emitted a statement ---
    def unary(self):
        a = self.pick()
        if self.r.random() < 0.06:
            return self.emit(self.r.choice(NONSMOOTH).format(a=a), [a], self.shapes[a], smooth=False)
        return self.emit(self.r.choice(UNARY).format(a=a), [a], self.shapes[a])

    def binary(self):
        a = self.pick()
        sa = self.shapes[a]
        if sa and self.r.random() < 0.25:   # broadcast against a keepdim reduction of a value
            d = self.dim(len(sa))
            t = self.r.choice(BINARY).format(a=a, b=f"{a}.sum({d}, keepdim=True)")
            return self.emit(t, [a], sa)
        b = self.pick(lambda s: _bcast(sa, s) is not None)
        sh = _bcast(sa, self.shapes[b])
        if self.r.random() < 0.5:
            a, b = b, a
        return self.emit(self.r.choice(BINARY).format(a=a, b=b), [a, b], sh)

    def reduce(self):
        a = self.pick(lambda s: len(s) >= 1)
        if a is None:
            return False
        s = self.shapes[a]
        nd = len(s)
        op = self.r.choice(["sum", "mean", "amax", "amin", "prod", "logsumexp", "var", "std", "norm",
                            "sum_all", "mean_all", "max_all", "sum_multi"])
        d = self.dim(nd)
        keep = bool(self.r.random() < 0.4)
        out = tuple(1 if i == d % nd else n for i, n in enumerate(s)) if keep else \
            tuple(n for i, n in enumerate(s) if i != d % nd)
        if op in ("var", "std") and s[d] < 2:
            op = "sum"
        if op == "sum_all":
            return self.emit(f"{a}.sum()", [a], ())
        if op == "mean_all":
            return self.emit(f"torch.mean({a})", [a], ())
        if op == "max_all":
            return self.emit(f"{a}.amax()", [a], ())
        if op == "sum_multi":
            if nd < 2:
                return self.emit(f"{a}.sum(dim=0)", [a], ())
            dims = sorted(self.r.choice(nd, 2, replace=False).tolist())
            out = tuple(1 if i in dims else n for i, n in enumerate(s)) if keep else \
                tuple(n for i, n in enumerate(s) if i not in dims)
            return self.emit(f"{a}.sum(dim=({dims[0]}, {dims[1]}), keepdim={keep})", [a], out)
        if op == "norm":
            return self.emit(f"{a}.norm(dim={d}, keepdim={keep})", [a], out)
        if op == "logsumexp":
            return self.emit(f"torch.logsumexp({a}, dim={d}, keepdim={keep})", [a], out)
        if op == "prod":
            return self.emit(f"({a}.tanh() + 1.5).prod({d}, keepdim={keep})", [a], out)
        return self.emit(f"{a}.{op}({d}, keepdim={keep})", [a], out)

    def matmul(self):
        a = self.pick(lambda s: len(s) >= 1)
        if a is None:
            return False
        s = self.shapes[a]
        if len(s) == 1:
            b = self.pick(lambda t: t == s)
            if self.r.random() < 0.5:
                return self.emit(f"torch.dot({a}, {b})" if self.r.random() < 0.5 else f"{a} @ {b}", [a, b], ())
            m = self.pick(lambda t: len(t) == 2 and t[0] == s[0])
            if m is not None:
                return self.emit(f"{a} @ {m}", [a, m], (self.shapes[m][1],))
            return self.emit(f"torch.outer({a}, {b})", [a, b], (s[0], s[0]))
        b = self.pick(lambda t: len(t) == 2 and t[0] == s[-1])
        if b is not None and self.r.random() < 0.6:
            return self.emit(f"{a} @ {b}" if self.r.random() < 0.5 else f"torch.matmul({a}, {b})",
                             [a, b], s[:-1] + (self.shapes[b][1],))
        b = self.pick(lambda t: t == s)
        return self.emit(f"{a} @ {b}.transpose(-1, -2)", [a, b], s[:-1] + (s[-2],))

    def view(self):
        a = self.pick()
        s = self.shapes[a]
        nd = len(s)
        ch = self.r.choice(["transpose", "permute", "flat", "merge", "unsqueeze", "slice0", "step", "flip",
                            "expand", "squeeze", "T", "contig", "slice_last"])
        if nd >= 2 and ch == "transpose":
            i, j = self.r.choice(nd, 2, replace=False).tolist()
            sh = list(s); sh[i], sh[j] = sh[j], sh[i]
            return self.emit(f"{a}.transpose({i}, {j})", [a], sh)
        if nd >= 2 and ch == "permute":
            p = self.r.permutation(nd).tolist()
            return self.emit(f"{a}.permute({', '.join(map(str, p))})", [a], [s[i] for i in p])
        if nd >= 2 and ch == "T":
            return self.emit(f"{a}.mT", [a], s[:-2] + (s[-1], s[-2]))
        if ch == "flat":
            return self.emit(f"{a}.reshape(-1)" if self.r.random() < 0.5 else f"{a}.flatten()",
                             [a], (int(np.prod(s)),))
        if nd >= 2 and ch == "merge":
            return self.emit(f"{a}.reshape({s[0] * s[1]}{''.join(', ' + str(n) for n in s[2:])})",
                             [a], (s[0] * s[1],) + s[2:])
        if ch == "unsqueeze" and nd < 4:
            d = int(self.r.integers(-nd - 1, nd + 1))
            sh = list(s); sh.insert(d % (nd + 1), 1)
            return self.emit(f"{a}.unsqueeze({d})", [a], sh)
        if nd >= 1 and ch == "slice0" and s[0] >= 2:
            lo = int(self.r.integers(0, s[0] - 1))
            hi = int(self.r.integers(lo + 1, s[0] + 1))
            return self.emit(f"{a}[{lo}:{hi}]", [a], (hi - lo,) + s[1:])
        if nd >= 1 and ch == "step":
            return self.emit(f"{a}[..., ::2]", [a], s[:-1] + ((s[-1] + 1) // 2,))
        if nd >= 2 and ch == "slice_last" and s[1] >= 2:
            return self.emit(f"{a}[:, 1:]", [a], (s[0], s[1] - 1) + s[2:])
        if nd >= 1 and ch == "flip":
            return self.emit(f"{a}.flip({self.dim(nd)})", [a], s)
        if ch == "expand" and nd < 4:
            return self.emit(f"{a}.unsqueeze(0).expand(2{''.join(', ' + str(n) for n in s)})", [a], (2,) + s)
        if ch == "squeeze" and 1 in s:
            d = s.index(1)
            return self.emit(f"{a}.squeeze({d})", [a], s[:d] + s[d + 1:])
        if ch == "contig":
            return self.emit(f"{a}.contiguous()", [a], s)
        return False

    def cat(self):
        a = self.pick(lambda s: len(s) >= 1)
        if a is None:
            return False
        s = self.shapes[a]
        if self.r.random() < 0.3:
            b = self.pick(lambda t: t == s)
            d = int(self.r.integers(-len(s) - 1, len(s) + 1))
            sh = list(s); sh.insert(d % (len(s) + 1), 2)
            return self.emit(f"torch.stack([{a}, {b}], dim={d})", [a, b], sh)
        d = self.dim(len(s))
        b = self.pick(lambda t: len(t) == len(s) and all(x == y for i, (x, y) in enumerate(zip(s, t))
                                                       if i != d % len(s)))
        sh = list(s); sh[d] += self.shapes[b][d]
        return self.emit(f"torch.cat([{a}, {b}.sin()], dim={d})", [a, b], sh)

    def index(self):
        a = self.pick(lambda s: len(s) >= 1)
        if a is None:
            return False
        s = self.shapes[a]
        ch = self.r.choice(["int", "neg", "tensor", "tensor1", "gather"])
        if ch == "int":
            return self.emit(f"{a}[{int(self.r.integers(0, s[0]))}]", [a], s[1:])
        if ch == "neg":
            return self.emit(f"{a}[{-int(self.r.integers(1, s[0] + 1))}]", [a], s[1:])
        n = int(self.r.integers(1, 5))
        idx = [int(i) for i in self.r.integers(-s[0], s[0], n)] if ch != "tensor1" or len(s) < 2 else \
            [int(i) for i in self.r.integers(0, s[1], n)]
        if ch == "tensor1" and len(s) >= 2:
            return self.emit(f"{a}[:, torch.tensor({idx})]", [a], (s[0], n) + s[2:])
        if ch == "gather" and len(s) >= 1:
            d = len(s) - 1
            ix = self.r.integers(0, s[d], s).tolist()
            return self.emit(f"torch.gather({a}, {d}, torch.tensor({ix}))", [a], s)
        idx = [i % s[0] for i in idx] if ch == "gather" else idx
        return self.emit(f"{a}[torch.tensor({idx})]", [a], (n,) + s[1:])

    def softmax(self):
        a = self.pick(lambda s: len(s) >= 1)
        if a is None:
            return False
        d = self.dim(len(self.shapes[a]))
        t = self.r.choice([f"{a}.softmax({d})", f"torch.log_softmax({a}, dim={d})",
                           f"torch.softmax({a}, dim={d})", f"{a}.cumsum({d})"])
        if "cumsum" in self.exclude and "cumsum" in t:
            t = f"{a}.softmax({d})"
        return self.emit(t, [a], self.shapes[a])

    def inplace(self):
        a = self.pick()
        sa = self.shapes[a]
        b = self.pick(lambda s: _bcast(sa, s) == sa)
        t = f"_t{self.k}"
        op = self.r.choice(["add_", "mul_", "sub_"])
        return self.emit(f"{t} = {a}.clone()\n{t}.{op}({b}.tanh())\n{t}", [a, b], sa)

    def where(self):
        a = self.pick()
        sa = self.shapes[a]
        b = self.pick(lambda s: _bcast(sa, s) is not None)
        return self.emit(f"torch.where({b} > 0.1, {a}.sin(), {a} * {b})", [a, b], _bcast(sa, self.shapes[b]))

    FAMILIES = [("unary", 5), ("binary", 5), ("reduce", 2), ("matmul", 1.5), ("view", 3), ("cat", 1),
                ("index", 1.2), ("softmax", 1), ("inplace", 0.5), ("where", 0.8)] + NNOps.NN_FAMILIES

    def run(self):
        full = tuple(int(n) for n in self.r.integers(1, 5, 3))
        n_in = int(self.r.integers(1, 4))
        shapes = []
        for _ in range(n_in):
            nd = int(self.r.integers(0, 4))
            sh = list(full[3 - nd:])
            for i in range(nd):
                if self.r.random() < 0.2:
                    sh[i] = 1
            shapes.append(tuple(sh))
        for i, sh in enumerate(shapes):
            self.shapes[f"x{i}"] = sh
        names, w = zip(*[f for f in self.FAMILIES if f[0] not in self.exclude])
        w = np.array(w) / sum(w)
        while len(self.stmts) < self.n_ops:
            fam = names[self.r.choice(len(names), p=w)]
            before = len(self.stmts)
            getattr(self, fam)()
            if len(self.stmts) > before and int(np.prod(self.shapes[self.stmts[-1].out])) > 512:
                self.stmts.pop()   # keep tensors small (jacobians are dense)
                self.shapes.pop(f"v{self.k - 1}")
        outs = [self.stmts[-1].out]
        others = [s.out for s in self.stmts[:-1]]
        if others and self.r.random() < 0.4:
            outs.append(others[int(self.r.integers(len(others)))])
        return Program(self.seed, shapes, list(self.stmts), outs)


def generate(seed: int, n_ops: int | None = None, exclude=()) -> Program:
    """The program for ``seed``: deterministic; retried internally (still from the seed) until
    eager fusegrad runs it with finite, moderate values and gradients. ``exclude`` names op
    families (``"index"``, ``"cumsum"``, ...) to leave out, e.g. for a backend still lacking them."""
    import fusegrad
    for attempt in range(20):
        r = np.random.default_rng([seed, attempt])
        k = n_ops or int(r.integers(2, 9))
        p = _Gen([seed, attempt], k, exclude).run()
        p.seed = seed
        p.attempt = attempt
        if _well_behaved(p, fusegrad):
            return p
    return p


def _well_behaved(p, fg):
    try:
        xs = [fg.tensor(a, requires_grad=True) for a in p.inputs()]
        with np.errstate(all="ignore"):
            outs = p.make(fg)(*xs)
            fg.autograd.backward([o for o in outs], [fg.ones_like(o) for o in outs])
        for t in list(outs) + [x.grad for x in xs if x.grad is not None]:
            a = t.detach().numpy()
            if not np.all(np.isfinite(a)) or (a.size and np.abs(a).max() > 1e4):
                return False
        return all(o.numel() <= 512 for o in outs)
    except Exception:
        return False


def drop_stmt(p: Program, i: int):
    """``p`` without statement ``i``: uses of its output are replaced by an argument of the same
    shape; None when no argument fits."""
    s = p.stmts[i]
    sub = next((a for a in s.args if _shape_of(p, a) == s.shape), None)
    if sub is None:
        return None
    pat = re.compile(rf"\b{s.out}\b")
    stmts = [Stmt(t.out, pat.sub(sub, t.text), [sub if x == s.out else x for x in t.args], t.shape, t.smooth)
             for t in p.stmts[:i] + p.stmts[i + 1:]]
    outs = list(dict.fromkeys(sub if o == s.out else o for o in p.outputs))
    if any(o.startswith("x") for o in outs) and not any(o.startswith("v") for o in outs):
        return None
    q = Program(p.seed, p.in_shapes, stmts, outs)
    q.attempt = getattr(p, "attempt", 0)
    return q


def _shape_of(p, name):
    if name.startswith("x"):
        return tuple(p.in_shapes[int(name[1:])])
    return next(s.shape for s in p.stmts if s.out == name)


def dead_code(p: Program) -> Program:
    live = set(p.outputs)
    keep = []
    for s in reversed(p.stmts):
        if s.out in live:
            keep.append(s)
            live.update(s.args)
    q = Program(p.seed, p.in_shapes, keep[::-1], p.outputs)
    q.attempt = getattr(p, "attempt", 0)
    return q
