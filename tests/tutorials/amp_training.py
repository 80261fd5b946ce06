"""Mixed precision training: autocast regions and a GradScaler that skips overflowing steps."""
import torch
import torch.nn.functional as F
from torch import nn

X = torch.linspace(-1, 1, 64).reshape(16, 4)
target = (X.sum(dim=1) > 0).long()
model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
with torch.no_grad():
    for i, p in enumerate(model.parameters()):
        p.copy_(torch.linspace(-1, 1, p.numel()).reshape(p.shape) * 0.5 / (i + 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
# float16 keeps ~3 significant digits: the loss is printed to 2 decimals.
# a scale this large overflows float16 gradients at first: those steps are skipped and the scale backs off
scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 24, growth_interval=4)

for step in range(12):
    opt.zero_grad()
    with torch.autocast(device_type="cpu", dtype=torch.float16):
        logits = model(X)
        loss = F.cross_entropy(logits, target)
    if step == 0:
        print("logits dtype:", str(logits.dtype).split(".")[-1], "loss dtype:", str(loss.dtype).split(".")[-1])
    before = [p.detach().clone() for p in model.parameters()]
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=10.0)
    scaler.step(opt)
    scaler.update()
    skipped = all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    print(f"step {step:2d} loss {loss.item():.2f} finite grads {bool(torch.isfinite(norm))} "
          f"skipped {skipped} next scale {scaler.get_scale():.0f}")
print("scaler state:", scaler.state_dict())

with torch.autocast("cpu", dtype=torch.bfloat16):
    with torch.autocast("cpu", enabled=False):
        print("disabled inside:", str(model(X).dtype).split(".")[-1])
    print("bfloat16 region:", str(model(X).dtype).split(".")[-1])
