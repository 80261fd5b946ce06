"""A data-loader training loop that saves a checkpoint, reloads it and trains on."""
import os
import tempfile

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

X = torch.linspace(-2, 2, 96).reshape(48, 2)
Y = X[:, :1] * 1.5 - X[:, 1:] * 0.5 + 0.25 * (X[:, :1] * X[:, 1:]).tanh()
dataset = TensorDataset(X, Y)
loader = DataLoader(dataset, batch_size=8, shuffle=False, drop_last=False)
print("batches per epoch:", len(loader), "first batch shapes:", [tuple(t.shape) for t in next(iter(loader))])


def make_model():
    model = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 1))
    with torch.no_grad():  # a fixed start, the same in every library
        for i, p in enumerate(model.parameters()):
            p.copy_(torch.linspace(-0.5, 0.5, p.numel()).reshape(p.shape) * (i + 1) / 4)
    return model


def train(model, opt, epochs):
    loss_fn = nn.MSELoss()
    for epoch in range(epochs):
        total = 0.0
        for xb, yb in loader:
            opt.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()
            total += loss.item() * len(xb)
        print(f"epoch {epoch}: mean loss {total / len(dataset):.4f}")


model = make_model()
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
train(model, opt, 4)

path = os.path.join(tempfile.mkdtemp(), "checkpoint.pt")
torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 4}, path)
checkpoint = torch.load(path)
print("checkpoint keys:", sorted(checkpoint), "model keys:", list(checkpoint["model"]))

restored = make_model()
restored.load_state_dict(checkpoint["model"])
opt2 = torch.optim.SGD(restored.parameters(), lr=0.05, momentum=0.9)
opt2.load_state_dict(checkpoint["optimizer"])
print("restored equal:", all(torch.equal(a, b) for a, b in zip(model.parameters(), restored.parameters())))
print("momentum buffers:", len(opt2.state_dict()["state"]))
train(restored, opt2, 2)
train(model, opt, 2)
print("still equal after training both:",
      all(torch.allclose(a, b) for a, b in zip(model.parameters(), restored.parameters())))
