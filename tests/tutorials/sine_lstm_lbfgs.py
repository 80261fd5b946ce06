"""Sine waves predicted by two LSTM cells trained with L-BFGS in float64 (the pattern of
pytorch/examples time_sequence_prediction): a closure that runs forward and backward, a
prediction of the future under no_grad, data saved and loaded as a NumPy array."""
import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim

T, L, N, HIDDEN = 20, 40, 6, 12
x = np.arange(L)[None, :] + np.array([-30, -11, 0, 7, 19, 42])[:, None]
path = os.path.join(tempfile.mkdtemp(), "traindata.pt")
torch.save(np.sin(x / 1.0 / T).astype("float64"), open(path, "wb"))


class Sequence(nn.Module):
    def __init__(self):
        super(Sequence, self).__init__()
        self.lstm1 = nn.LSTMCell(1, HIDDEN)
        self.lstm2 = nn.LSTMCell(HIDDEN, HIDDEN)
        self.linear = nn.Linear(HIDDEN, 1)

    def forward(self, input, future=0):
        outputs = []
        h_t = torch.zeros(input.size(0), HIDDEN, dtype=torch.double)
        c_t = torch.zeros(input.size(0), HIDDEN, dtype=torch.double)
        h_t2 = torch.zeros(input.size(0), HIDDEN, dtype=torch.double)
        c_t2 = torch.zeros(input.size(0), HIDDEN, dtype=torch.double)
        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        for i in range(future):  # if we should predict the future
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        return torch.cat(outputs, dim=1)


data = torch.from_numpy(torch.load(path, weights_only=False))
input, target = data[2:, :-1], data[2:, 1:]
test_input, test_target = data[:2, :-1], data[:2, 1:]
seq = Sequence().double()
with torch.no_grad():  # a fixed start, the same in every library
    for i, p in enumerate(seq.parameters()):
        p.copy_(torch.linspace(-0.4, 0.4, p.numel(), dtype=torch.double).reshape(p.shape).cos() * 0.3 * (-1) ** i)
criterion = nn.MSELoss()
optimizer = optim.LBFGS(seq.parameters(), lr=0.8, max_iter=8)
for i in range(2):
    print("STEP:", i)

    def closure():
        optimizer.zero_grad()
        out = seq(input)
        loss = criterion(out, target)
        print("loss: %.10g" % loss.item())
        loss.backward()
        return loss
    optimizer.step(closure)
    with torch.no_grad():
        future = 20
        pred = seq(test_input, future=future)
        loss = criterion(pred[:, :-future], test_target)
        print("test loss: %.10g" % loss.item())
        y = pred.detach().numpy()
    print("prediction shape:", y.shape, "last values:", np.array2string(y[:, -1], precision=6))
