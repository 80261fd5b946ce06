"""``fusegrad.distributions``: probability distributions as ``torch.distributions`` has
them (shapes, ``sample``/``rsample``, ``log_prob``, ``entropy``, moments, validation) and
``kl_divergence`` with ``register_kl``. Everything is a composition of Tensor ops, so
log-probabilities and reparameterized samples differentiate, trace and compile as any op."""
from . import constraints
from .bernoulli import Bernoulli
from .beta import Beta
from .binomial import Binomial
from .categorical import Categorical
from .cauchy import Cauchy
from .dirichlet import Dirichlet
from .distribution import Distribution
from .exponential import Exponential
from .gamma import Chi2, Gamma
from .geometric import Geometric
from .gumbel import Gumbel
from .half_normal import HalfNormal
from .independent import Independent
from .kl import kl_divergence, register_kl
from .laplace import Laplace
from .log_normal import LogNormal
from .multivariate_normal import MultivariateNormal
from .normal import Normal
from .one_hot_categorical import OneHotCategorical
from .poisson import Poisson
from .studentT import StudentT
from .uniform import Uniform

__all__ = ["Bernoulli", "Beta", "Binomial", "Categorical", "Cauchy", "Chi2", "Dirichlet", "Distribution",
           "Exponential", "Gamma", "Geometric", "Gumbel", "HalfNormal", "Independent", "Laplace", "LogNormal",
           "MultivariateNormal", "Normal", "OneHotCategorical", "Poisson", "StudentT", "Uniform", "constraints",
           "kl_divergence", "register_kl"]
