"""A word-level LSTM language model (the pattern of pytorch/examples word_language_model):
batchified token ids, truncated backpropagation through time with detached hidden states,
gradient clipping, a hand-written SGD update through ``p.data``, the whole model saved and
loaded back, then evaluated."""
import math
import os
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F

TEXT = ("the cat sat on the mat . the dog sat on the rug . a cat ran to the dog . " * 6).split()
WORDS = sorted(set(TEXT))
tokens = torch.tensor([WORDS.index(w) for w in TEXT], dtype=torch.int64)


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp, nhid, nlayers):
        super(RNNModel, self).__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(0.0)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers)
        self.decoder = nn.Linear(nhid, ntoken)
        self.nhid, self.nlayers = nhid, nlayers

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        decoded = self.decoder(self.drop(output)).view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (weight.new_zeros(self.nlayers, bsz, self.nhid), weight.new_zeros(self.nlayers, bsz, self.nhid))


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    return data.view(bsz, -1).t().contiguous()


def get_batch(source, i, bptt=8):
    seq_len = min(bptt, len(source) - 1 - i)
    return source[i:i + seq_len], source[i + 1:i + 1 + seq_len].view(-1)


def repackage_hidden(h):
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def evaluate(model, source, bsz):
    model.eval()
    total, hidden = 0.0, model.init_hidden(bsz)
    with torch.no_grad():
        for i in range(0, source.size(0) - 1, 8):
            data, targets = get_batch(source, i)
            output, hidden = model(data, hidden)
            hidden = repackage_hidden(hidden)
            total += len(data) * criterion(output, targets).item()
    return total / (len(source) - 1)


train_data, val_data = batchify(tokens[:96], 4), batchify(tokens[96:], 2)
model = RNNModel(len(WORDS), 10, 12, 2)
with torch.no_grad():  # a fixed start, the same in every library
    for i, p in enumerate(model.parameters()):
        p.copy_(torch.linspace(-1.0, 1.0, p.numel()).reshape(p.shape).sin() * 0.2)
criterion = nn.NLLLoss()
lr = 2.0
for epoch in range(1, 4):
    model.train()
    hidden = model.init_hidden(4)
    for batch, i in enumerate(range(0, train_data.size(0) - 1, 8)):
        data, targets = get_batch(train_data, i)
        hidden = repackage_hidden(hidden)
        model.zero_grad()
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 0.15)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        print("epoch %d batch %d loss %.5f grad norm %.5f" % (epoch, batch, loss.item(), norm.item()))
    val_loss = evaluate(model, val_data, 2)
    print("end of epoch %d: valid loss %.5f ppl %.2f" % (epoch, val_loss, math.exp(val_loss)))

path = os.path.join(tempfile.mkdtemp(), "model.pt")
with open(path, "wb") as f:
    torch.save(model, f)
with open(path, "rb") as f:
    loaded = torch.load(f, weights_only=False)
    loaded.rnn.flatten_parameters()
print(type(loaded).__name__, type(loaded.rnn).__name__, loaded.rnn)
print("reloaded valid loss %.5f" % evaluate(loaded, val_data, 2))
