"""A compiled training step that reads its loss: a NaN check (``if torch.isnan(loss)``) and
``return loss.item(), accuracy`` inside ``torch.compile``, early stopping on the returned
Python numbers outside (the pattern of many training scripts)."""
import numpy as np
import torch
import torch.nn.functional as F

rng = np.random.default_rng(0)
X = torch.tensor(rng.standard_normal((128, 20)).astype(np.float32))
Y = torch.tensor(rng.integers(0, 5, 128))
model = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(), torch.nn.Linear(32, 5))
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32) * 0.2))
opt = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)


@torch.compile
def train_step(x, y):
    opt.zero_grad()
    out = model(x)
    loss = F.cross_entropy(out, y)
    if torch.isnan(loss):
        raise RuntimeError("loss is nan")
    loss.backward()
    opt.step()
    acc = (out.argmax(1) == y).float().mean().item()
    return loss.item(), acc


best, bad = float("inf"), 0
for epoch in range(80):
    loss, acc = train_step(X, Y)
    if loss < best - 0.02:
        best, bad = loss, 0
    else:
        bad += 1
    if epoch % 10 == 0:
        print(f"epoch {epoch}: loss {loss:.4f}, accuracy {acc:.4f}")
    if bad >= 2:
        print("early stop at epoch", epoch)
        break
print(f"final loss {loss:.4f} ({type(loss).__name__})")
