"""``fusegrad.distributions``: probability distributions as ``torch.distributions`` has
them (shapes, ``sample``/``rsample``, ``log_prob``, ``entropy``, moments, validation) and
``kl_divergence`` with ``register_kl``. Everything is a composition of Tensor ops, so
log-probabilities and reparameterized samples differentiate, trace and compile as any op."""
from . import constraints
from .bernoulli import Bernoulli
from .categorical import Categorical
from .distribution import Distribution
from .independent import Independent
from .kl import kl_divergence, register_kl
from .multivariate_normal import MultivariateNormal
from .normal import Normal
from .uniform import Uniform

__all__ = ["Bernoulli", "Categorical", "Distribution", "Independent", "MultivariateNormal", "Normal", "Uniform",
           "constraints", "kl_divergence", "register_kl"]
