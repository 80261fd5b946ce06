"""fusegrad demo: what the library is for, in one run.

1. Train a small MLP eagerly, written as PyTorch code (``import fusegrad as torch``).
2. Compile the whole training step (forward, backward, optimizer update) with
   ``@torch.compile`` and time it against the eager step.
3. Function transforms: ``func.grad`` and ``func.jacrev``.
4. The IR listing of a compiled function, before and after fusion.
5. The autograd graph of a small expression, drawn to a PNG when Graphviz is installed."""
import os
import tempfile
import time

import fusegrad as torch
import fusegrad.nn as nn
from fusegrad.func import grad, jacrev


def make_data(n: int = 256):
    """Two interleaved classes on a noisy circle: not linearly separable."""
    torch.manual_seed(0)
    x = torch.randn(n, 2)
    y = ((x * x).sum(dim=1) > 1.0).long()
    return x + 0.1 * torch.randn(n, 2), y


def make_model():
    torch.manual_seed(1)
    return nn.Sequential(nn.Linear(2, 32), nn.Tanh(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 2))


def train_eager(x, y, steps: int = 100) -> None:
    print("== 1. eager training (PyTorch code, fusegrad underneath)")
    model = make_model()
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    loss_fn = nn.CrossEntropyLoss()
    for step in range(steps + 1):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        if step % 25 == 0:
            with torch.no_grad():
                acc = (model(x).argmax(dim=1) == y).float().mean().item()
            print(f"step {step:4d}  loss {loss.item():.4f}  accuracy {acc:.3f}")


def time_steps(step, x, y, n: int) -> float:
    """Seconds per call of ``step`` (best of two runs of ``n`` calls)."""
    best = float("inf")
    for _ in range(2):
        t0 = time.perf_counter()
        for _ in range(n):
            step(x, y)
        best = min(best, (time.perf_counter() - t0) / n)
    return best


def compiled_training(x, y) -> None:
    print("\n== 2. the same training step, compiled with @torch.compile")
    model = make_model()
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    loss_fn = nn.CrossEntropyLoss()

    def step(xb, yb):
        opt.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        return loss

    compiled_step = torch.compile(step)
    t0 = time.perf_counter()
    compiled_step(x, y)  # creates Adam's state eagerly
    compiled_step(x, y)  # traces, fuses and compiles forward + backward + update into kernels
    print(f"first calls (trace + compile, or load from the kernel cache): {time.perf_counter() - t0:.2f} s")
    eager = time_steps(step, x, y, 20)
    fast = time_steps(compiled_step, x, y, 20)
    info = compiled_step.cache_info()
    print(f"eager step {eager * 1e3:.2f} ms, compiled step {fast * 1e3:.2f} ms: "
          f"{eager / fast:.1f}x faster ({info['compiles']} compile, {info['hits']} cached calls, "
          f"graph breaks: {info['graph_breaks'] or 'none'})")
    print(f"loss after {info['hits'] + 3} compiled steps: {compiled_step(x, y).item():.4f}")


def transforms() -> None:
    print("\n== 3. function transforms")

    def f(v):
        return (v.sin() * v).sum()

    v = torch.tensor([0.0, 1.0, 2.0])
    print("f(v) = sum(sin(v) * v),  v =", v.tolist())
    print("grad(f)(v)          =", [round(g, 4) for g in grad(f)(v).tolist()],
          "  (sin v + v cos v)")
    print("jacrev(sin)(v) diag =", [round(g, 4) for g in torch.diag(jacrev(torch.sin)(v)).tolist()],
          "  (cos v)")


def ir_listing() -> None:
    print("\n== 4. what the compiler sees")

    @torch.compile
    def layer(x, w, b):
        return torch.softmax(torch.tanh(x @ w + b), dim=1)

    args = torch.randn(8, 4), torch.randn(4, 3), torch.randn(3)
    lowered = layer.lower(*args)
    print("traced IR:")
    print(lowered.ir("traced"))
    print("after fusion (one loop nest for tanh, the row max, exp, sum and divide):")
    print(lowered.ir("fused"))


def graph_picture() -> None:
    print("\n== 5. the autograd graph of log(a * b + 1)")
    a = torch.tensor([2.0], requires_grad=True)
    b = torch.tensor([3.0], requires_grad=True)
    loss = (a * b + 1).log()
    loss.backward()
    print(f"d/da = {a.grad.item():.4f} (b/(ab+1) = {3 / 7:.4f}),  d/db = {b.grad.item():.4f} (a/(ab+1) = {2 / 7:.4f})")
    try:
        from fusegrad.viz import make_dot
        dot = make_dot((a * b + 1).log(), params={"a": a, "b": b})
    except ImportError as e:
        print(f"(no picture: {e})")
        return
    path = os.path.join(tempfile.gettempdir(), "fusegrad_demo_graph")
    try:
        png = dot.render(path, format="png", cleanup=True)
        print(f"picture written to {png}")
    except RuntimeError as e:  # Graphviz's dot program is missing: the message says how to install it
        print(f"(no picture: {e})")
        print("its DOT source:\n" + dot.source)


if __name__ == "__main__":
    x, y = make_data()
    train_eager(x, y)
    compiled_training(x, y)
    transforms()
    ir_listing()
    graph_picture()
