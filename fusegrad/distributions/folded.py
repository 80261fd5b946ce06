"""``|X|`` for ``X`` of a distribution symmetric about 0 (HalfNormal, HalfCauchy): the
base's density doubled on ``x >= 0``, its cdf and icdf folded, and ``log 2`` less entropy."""
from __future__ import annotations

import math

from ..runtime import ops as O

__all__ = ["Folded"]


class Folded:
    """Mixin (before the distribution class) over ``self.base_dist``, the symmetric base."""

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        log_prob = self.base_dist.log_prob(value) + math.log(2)
        return O.where(value >= 0, log_prob, -math.inf)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 2 * self.base_dist.cdf(value) - 1

    def icdf(self, prob):
        return self.base_dist.icdf((prob + 1) / 2)

    def entropy(self):
        return self.base_dist.entropy() - math.log(2)
