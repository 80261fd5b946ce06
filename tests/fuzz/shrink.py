"""Greedy shrinking of a failing program: drop dead code, statements, extra outputs and shrink
input shapes while the same kind of failure persists."""
from __future__ import annotations

from .generator import Program, dead_code, drop_stmt


def failure(p, check):
    try:
        check(p)
    except AssertionError as e:
        return getattr(e, "kind", type(e).__name__)
    except Exception as e:
        return type(e).__name__
    return None


def shrink(p: Program, check, kind=None, budget=200) -> Program:
    kind = kind or failure(p, check)
    if kind is None:
        return p

    def still(q):
        nonlocal budget
        if q is None or budget <= 0:
            return False
        budget -= 1
        return failure(q, check) == kind
    cur = dead_code(p)
    if not still(cur):
        cur = p
    changed = True
    while changed and budget > 0:
        changed = False
        for o in list(cur.outputs):
            if len(cur.outputs) > 1:
                q = dead_code(Program(cur.seed, cur.in_shapes, cur.stmts, [x for x in cur.outputs if x != o]))
                if still(q):
                    cur, changed = q, True
        for i in reversed(range(len(cur.stmts))):
            if i >= len(cur.stmts):
                continue
            q = drop_stmt(cur, i)
            q = dead_code(q) if q is not None else None
            if still(q):
                cur, changed = q, True
        for j, s in enumerate(cur.in_shapes):  # smaller inputs (statements with literal sizes may reject it)
            for d, n in enumerate(s):
                if n > 1:
                    sh = list(cur.in_shapes)
                    sh[j] = tuple(s[:d]) + ((n + 1) // 2 if n > 2 else 1,) + tuple(s[d + 1:])
                    q = Program(cur.seed, sh, cur.stmts, cur.outputs)
                    if still(q):
                        cur, changed = q, True
                        break
    return cur
