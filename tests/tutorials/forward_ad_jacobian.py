"""A Jacobian by forward-mode AD (one dual pass per input direction), checked two other ways."""
import torch
import torch.autograd.forward_ad as fwAD


def f(x):
    return torch.stack([x[0] ** 2 * x[1], x[1].sin() + x[2].exp(), (x * x).sum(), torch.tanh(x[0] - x[2])])


x = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)
columns = []
with fwAD.dual_level():
    for i in range(3):
        direction = torch.zeros(3, dtype=torch.float64)
        direction[i] = 1.0
        primal, tangent = fwAD.unpack_dual(f(fwAD.make_dual(x, direction)))
        columns.append(tangent)
    print("primal:", [round(v, 6) for v in primal.tolist()])
J = torch.stack(columns, dim=1)
print("shape:", tuple(J.shape))
for row in J.tolist():
    print(" ".join(f"{v:10.6f}" for v in row))
print("tangent outside the level:", fwAD.unpack_dual(primal).tangent)
print("matches autograd.functional.jacobian:", torch.allclose(J, torch.autograd.functional.jacobian(f, x)))
print("matches func.jacfwd:", torch.allclose(J, torch.func.jacfwd(f)(x)))
