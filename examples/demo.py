"""fusegrad demo: train a small MLP on a synthetic dataset, then show the autograd graph
of a small expression. Runs with `import fusegrad as torch`, as PyTorch code would."""
import fusegrad as torch
import fusegrad.nn as nn


def make_data(n: int = 256):
    """Two interleaved classes on a noisy circle: not linearly separable."""
    torch.manual_seed(0)
    x = torch.randn(n, 2)
    r = (x * x).sum(dim=1)
    y = (r > 1.0).long()
    return x + 0.1 * torch.randn(n, 2), y


def train(steps: int = 200) -> None:
    x, y = make_data()
    model = nn.Sequential(nn.Linear(2, 32), nn.Tanh(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 2))
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    loss_fn = nn.CrossEntropyLoss()
    for step in range(steps + 1):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        if step % 40 == 0:
            acc = (model(x).argmax(dim=1) == y).float().mean().item()
            print(f"step {step:4d}  loss {loss.item():.4f}  accuracy {acc:.3f}")


def show_graph() -> None:
    a = torch.tensor([2.0], requires_grad=True)
    b = torch.tensor([3.0], requires_grad=True)
    loss = (a * b + 1).log()
    print("\nautograd graph of log(a * b + 1):")

    def walk(fn, depth=0):
        print("  " * depth + type(fn).__name__)
        for nxt, _ in fn.next_functions:
            if nxt is not None:
                walk(nxt, depth + 1)
    walk(loss.grad_fn)
    loss.backward()
    print(f"d/da = {a.grad.item():.4f} (b/(ab+1) = {3 / 7:.4f}),  d/db = {b.grad.item():.4f} (a/(ab+1) = {2 / 7:.4f})")


if __name__ == "__main__":
    train()
    show_graph()
