"""The ``torch.nn.functional`` op families of the random program generator: convolutions,
pooling, interpolation, normalization, activations, losses and attention, with random valid
parameters on tiny shapes. A mixin of ``generator._Gen`` (uses its ``r``, ``pick``, ``emit``).

Parameters (weights, biases, affine terms) are ramps shifted by a program value, so their
gradients flow into the program's inputs: ``linspace(...) * c + v.mean().tanh() * d``.
Max-pool inputs get a small ramp added so that no window holds a tie (the gradient at a tie
is a convention, and equal values come from relu/clamp)."""
from __future__ import annotations

import numpy as np

F = "torch.nn.functional"


def _conv_len(n, k, s, p, d):
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


def _pool_len(n, k, s, p, d, ceil):
    span = n + 2 * p - d * (k - 1) - 1
    if not ceil:
        return span // s + 1
    out = -(-span // s) + 1
    if (out - 1) * s >= n + p:   # PyTorch: the last window must start inside the input or left padding
        out -= 1
    return out


def _tup(v):
    return str(v[0]) if len(set(v)) == 1 else f"({', '.join(map(str, v))})"


class NNOps:
    def _fl(self, lo, hi):
        return round(float(self.r.uniform(lo, hi)), 2)

    def param(self, shape, b):
        """Source of a float64 parameter tensor of ``shape`` that depends on value ``b``."""
        n = int(np.prod(shape))
        return (f"(torch.linspace({self._fl(-1, -0.2)}, {self._fl(0.2, 1)}, {n}, dtype=torch.float64)"
                f".reshape({tuple(int(d) for d in shape)}) + {b}.mean().tanh() * {self._fl(0.1, 0.5)})")

    def as_spatial(self, a, nsp, batched=True):
        """``a`` reshaped to ``(N, C, *spatial)`` (or ``(C, *spatial)``): its text and shape."""
        s = self.shapes[a]
        need = nsp + (2 if batched else 1)
        sh = [1] * max(0, need - len(s)) + list(s)
        while len(sh) > need:
            sh[:2] = [sh[0] * sh[1]]
        sh = tuple(sh)
        return (a if sh == s else f"{a}.reshape({sh})"), sh

    def spatial_input(self, nsp, batched=True, max_numel=48):
        a = self.pick(lambda s: int(np.prod(s)) <= max_numel)
        if a is None:
            return None, None, None
        t, sh = self.as_spatial(a, nsp, batched)
        return a, t, sh

    # --- families ---
    def conv(self):
        nsp = int(self.r.integers(1, 3))
        transposed = bool(self.r.random() < 0.35)
        a, x, sh = self.spatial_input(nsp, batched=bool(self.r.random() < 0.7))
        if a is None:
            return False
        b = self.pick()
        cin, sp = sh[-nsp - 1], sh[-nsp:]
        divs = [g for g in range(1, cin + 1) if cin % g == 0]
        for _ in range(6):
            g = int(self.r.choice(divs))
            cout = g * int(self.r.integers(1, 3))
            k = [int(v) for v in self.r.integers(1, 4, nsp)]
            st = int(self.r.integers(1, 3))
            d = int(self.r.integers(1, 3))
            pad = int(self.r.integers(0, max(k)))
            if transposed:
                op = int(self.r.integers(0, max(st, d)))
                out = [(n - 1) * st - 2 * pad + d * (kk - 1) + op + 1 for n, kk in zip(sp, k)]
                wshape = (cin, cout // g) + tuple(k)
                extra = f", output_padding={op}, groups={g}, dilation={d}"
                padt = str(pad)
            else:
                same = st == 1 and self.r.random() < 0.2
                out = list(sp) if same else [_conv_len(n, kk, st, pad, d) for n, kk in zip(sp, k)]
                wshape = (cout, cin // g) + tuple(k)
                extra = f", dilation={d}, groups={g}"
                padt = "'same'" if same else str(pad)
            if min(out) >= 1 and int(np.prod(sh[:-nsp - 1])) * cout * int(np.prod(out)) <= 256:
                break
        else:
            return False
        bias = self.param((cout,), b) if self.r.random() < 0.5 else "None"
        name = f"conv_transpose{nsp}d" if transposed else f"conv{nsp}d"
        return self.emit(f"{F}.{name}({x}, {self.param(wshape, b)}, {bias}, stride={st}, padding={padt}{extra})",
                         [a, b], sh[:-nsp - 1] + (cout,) + tuple(out))

    def pool(self):
        nsp = int(self.r.integers(1, 3))
        kind = self.r.choice(["max", "avg", "adaptive_max", "adaptive_avg"])
        a, x, sh = self.spatial_input(nsp, batched=bool(self.r.random() < 0.7), max_numel=64)
        if a is None:
            return False
        sp = sh[-nsp:]
        if "max" in kind:
            x = f"({x} + torch.linspace(0.0, 0.01, {int(np.prod(sh))}, dtype=torch.float64).reshape({sh}))"
        if kind.startswith("adaptive"):
            out = [int(v) for v in self.r.integers(1, 4, nsp)]
            return self.emit(f"{F}.{kind}_pool{nsp}d({x}, {_tup(out)})", [a], sh[:-nsp] + tuple(out))
        k = [int(v) for v in self.r.integers(1, 4, nsp)]
        k = [min(kk, n) for kk, n in zip(k, sp)]
        st = int(self.r.integers(1, 3)) if self.r.random() < 0.7 else None
        pad = int(self.r.integers(0, min(k) // 2 + 1))
        ceil = bool(self.r.random() < 0.3)
        d = int(self.r.integers(1, 3)) if kind == "max" else 1
        if d > 1 and any(d * (kk - 1) + 1 > n + 2 * pad for kk, n in zip(k, sp)):
            d = 1
        out = [_pool_len(n, kk, st or kk, pad, d, ceil) for n, kk in zip(sp, k)]
        if min(out) < 1:
            return False
        stt = "" if st is None else f", stride={st}"
        if kind == "max":
            extra = f", dilation={d}"
        else:
            extra = f", count_include_pad={bool(self.r.random() < 0.5)}"
        return self.emit(f"{F}.{kind}_pool{nsp}d({x}, {_tup(k)}{stt}, padding={pad}, ceil_mode={ceil}{extra})",
                         [a], sh[:-nsp] + tuple(out))

    def interp(self):
        nsp = int(self.r.integers(1, 3))
        a, x, sh = self.spatial_input(nsp)
        if a is None:
            return False
        sp = sh[-nsp:]
        mode = self.r.choice(["nearest", "linear" if nsp == 1 else "bilinear"])
        ac = f", align_corners={bool(self.r.random() < 0.5)}" if mode != "nearest" else ""
        if self.r.random() < 0.5:
            out = [int(v) for v in self.r.integers(1, 6, nsp)]
            size = f"size={_tup(out)}"
        else:
            f = float(self.r.choice([0.5, 1.5, 2.0]))
            out = [int(np.floor(n * f)) for n in sp]
            if min(out) < 1:
                return False
            size = f"scale_factor={f}"
        return self.emit(f"{F}.interpolate({x}, {size}, mode='{mode}'{ac})", [a], sh[:-nsp] + tuple(out))

    def norm(self):
        kind = self.r.choice(["batch_train", "batch_eval", "group", "instance", "layer", "rms", "normalize"])
        b = self.pick()
        if kind in ("layer", "rms", "normalize"):
            a = self.pick(lambda s: len(s) >= 1)
            if a is None:
                return False
            s = self.shapes[a]
            if kind == "normalize":
                p = self.r.choice(["2.0", "1.0", "3.0"])
                return self.emit(f"{F}.normalize({a}, p={p}, dim={self.dim(len(s))})", [a], s)
            ns = s[-int(self.r.integers(1, min(2, len(s)) + 1)):]
            w = self.param(ns, b) if self.r.random() < 0.6 else "None"
            if kind == "rms":
                return self.emit(f"{F}.rms_norm({a}, {list(ns)}, {w}, eps={self.r.choice(['None', '1e-5'])})",
                                 [a, b], s)
            bias = self.param(ns, b) if self.r.random() < 0.5 else "None"
            return self.emit(f"{F}.layer_norm({a}, {list(ns)}, {w}, {bias})", [a, b], s)
        nsp = int(self.r.integers(0, 3))
        a, x, sh = self.spatial_input(nsp, max_numel=64)
        if a is None:
            return False
        c = sh[1]
        per_channel = int(np.prod(sh)) // c
        w = self.param((c,), b) if self.r.random() < 0.6 else "None"
        # PyTorch's group_norm fails on a bias without a weight ("tensor does not have a device")
        bias = self.param((c,), b) if w != "None" and self.r.random() < 0.6 else "None"
        if kind == "batch_train" and per_channel > 1:
            stats = "None, None" if self.r.random() < 0.5 else \
                f"torch.zeros({c}, dtype=torch.float64), torch.ones({c}, dtype=torch.float64)"
            return self.emit(f"{F}.batch_norm({x}, {stats}, {w}, {bias}, training=True)", [a, b], sh)
        if kind == "group" and per_channel > 1:
            g = int(self.r.choice([g for g in range(1, c + 1) if c % g == 0]))
            return self.emit(f"{F}.group_norm({x}, {g}, {w}, {bias})", [a, b], sh)
        if kind == "instance" and nsp and int(np.prod(sh[2:])) > 1:
            return self.emit(f"{F}.instance_norm({x}, weight={w}, bias={bias})", [a, b], sh)
        stats = (f"torch.linspace(-0.5, 0.5, {c}, dtype=torch.float64), "
                 f"torch.linspace(0.5, 1.5, {c}, dtype=torch.float64)")
        return self.emit(f"{F}.batch_norm({x}, {stats}, {w}, {bias}, training=False)", [a, b], sh)

    ACTS = ["{F}.selu({a})", "{F}.celu({a}, alpha={al})", "{F}.mish({a})", "{F}.hardtanh({a})",
            "{F}.hardtanh({a}, -0.6, 0.8)", "{F}.relu6({a} * 4.0)", "{F}.hardsigmoid({a} * 2.0)",
            "{F}.hardswish({a} * 2.0)", "{F}.softsign({a})", "{F}.leaky_relu({a}, {al})",
            "{F}.elu({a}, alpha={al})", "{F}.silu({a})", "{F}.softplus({a})",
            "{F}.softplus({a}, beta={al}, threshold=5.0)"]

    def act(self):
        a = self.pick()
        s = self.shapes[a]
        ch = self.r.random()
        if ch < 0.12:
            even = [i for i, n in enumerate(s) if n % 2 == 0]
            if not even:
                return False
            d = int(self.r.choice(even))
            return self.emit(f"{F}.glu({a}, {d - len(s) if self.r.random() < 0.5 else d})",
                             [a], s[:d] + (s[d] // 2,) + s[d + 1:])
        if ch < 0.24:
            b = self.pick()
            n = s[1] if len(s) >= 2 and self.r.random() < 0.6 else 1
            return self.emit(f"{F}.prelu({a}, {self.param((n,), b)})", [a, b], s)
        t = self.r.choice(self.ACTS)
        return self.emit(t.format(F=F, a=a, al=self._fl(0.1, 2.0)), [a], s)

    def loss(self):
        a = self.pick(lambda s: len(s) >= 1)
        if a is None:
            return False
        s = self.shapes[a]
        b = self.pick(lambda t: t == s)
        red = str(self.r.choice(["mean", "sum", "none"]))
        out = s if red == "none" else ()
        kind = self.r.choice(["kl", "smooth_l1", "huber", "cos", "pdist", "margin", "triplet"])
        if kind == "kl":
            red = str(self.r.choice(["mean", "sum", "none", "batchmean"]))
            lt = bool(self.r.random() < 0.5)
            tgt = f"{b}.log_softmax(-1)" if lt else f"{b}.softmax(-1)"
            return self.emit(f"{F}.kl_div({a}.log_softmax(-1), {tgt}, reduction='{red}', log_target={lt})",
                             [a, b], s if red == "none" else ())
        if kind == "smooth_l1":
            return self.emit(f"{F}.smooth_l1_loss({a}, {b}, reduction='{red}', beta={self._fl(0.2, 2)})",
                             [a, b], out)
        if kind == "huber":
            return self.emit(f"{F}.huber_loss({a}, {b}, reduction='{red}', delta={self._fl(0.2, 2)})",
                             [a, b], out)
        if kind == "cos":
            d = self.dim(len(s))
            return self.emit(f"{F}.cosine_similarity({a}, {b}.flip({d}), dim={d})", [a, b],
                             s[:d % len(s)] + s[d % len(s) + 1:])
        if kind == "pdist":
            keep = bool(self.r.random() < 0.5)
            p = self.r.choice(["2.0", "1.0", "3.0"])
            o = s[:-1] + (1,) if keep else s[:-1]
            if len(s) == 1:
                o = (1,) if keep else ()
            return self.emit(f"{F}.pairwise_distance({a}, {b}.flip(-1), p={p}, keepdim={keep})", [a, b], o)
        if kind == "margin":
            y = np.where(self.r.random(s) < 0.5, -1.0, 1.0).tolist()
            return self.emit(f"{F}.margin_ranking_loss({a}, {b}.flip(-1), torch.tensor({y}, dtype=torch.float64), "
                             f"margin={self._fl(0, 1)}, reduction='{red}')", [a, b], out)
        if len(s) > 2:
            return False
        c = self.pick(lambda t: t == s)
        o = () if red != "none" else s[:-1] if len(s) == 2 else ()
        return self.emit(f"{F}.triplet_margin_loss({a}, {b}.flip(-1), {c}.sin(), margin={self._fl(0.2, 2)}, "
                         f"swap={bool(self.r.random() < 0.3)}, reduction='{red}')", [a, b, c], o)

    def sdpa(self):
        q = self.pick(lambda s: len(s) >= 2)
        if q is None:
            return False
        s = self.shapes[q]
        k = self.pick(lambda t: len(t) == len(s) and t[-1] == s[-1] and t[:-2] == s[:-2])
        sk = self.shapes[k]
        v = self.pick(lambda t: len(t) == len(s) and t[-2] == sk[-2] and t[:-2] == s[:-2])
        sv = self.shapes[v]
        L, S = s[-2], sk[-2]
        ch = self.r.choice(["none", "causal", "bool", "float"])
        extra = ""
        if ch == "causal":
            extra = ", is_causal=True"
        elif ch == "bool":
            m = self.r.random((L, S)) < 0.6
            m[:, 0] = True    # no row fully masked (its softmax would be 0/0)
            extra = f", attn_mask=torch.tensor({m.tolist()})"
        elif ch == "float":
            extra = f", attn_mask=torch.tensor({np.round(self.r.standard_normal((L, S)), 2).tolist()}, " \
                    f"dtype=torch.float64)"
        if self.r.random() < 0.3:
            extra += f", scale={self._fl(0.2, 1.5)}"
        return self.emit(f"{F}.scaled_dot_product_attention({q}, {k}, {v}{extra})", [q, k, v],
                         s[:-1] + (sv[-1],))

    NN_FAMILIES = [("conv", 0.7), ("pool", 0.5), ("interp", 0.3), ("norm", 0.7), ("act", 1.2),
                   ("loss", 0.6), ("sdpa", 0.35)]

