"""Shared pieces of the elementwise (event_shape ``()``) distributions: building from
broadcast parameters, ``expand``, and the standard uniform noise of ``rsample``."""
from __future__ import annotations

from numbers import Number

import numpy as np

from ..runtime import factory
from ..runtime.tensor import Size
from .distribution import Distribution
from .utils import broadcast_all


class _Elementwise(Distribution):
    """A distribution whose parameters (``_params``, in order) broadcast to its batch shape."""
    _params: tuple = ()

    def _init_params(self, values, validate_args):
        ts = broadcast_all(*values)
        for name, t in zip(self._params, ts):
            setattr(self, name, t)
        batch_shape = Size() if all(isinstance(v, Number) for v in values) else ts[0].size()
        Distribution.__init__(self, batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(type(self), _instance)
        batch_shape = Size(batch_shape)
        for name in self._params:
            setattr(new, name, getattr(self, name).expand(batch_shape))
        return self._expanded(new, batch_shape)

    def _like(self):
        return getattr(self, self._params[0])

    def _finfo(self):
        return np.finfo(self._like()._data.dtype)

    def _uniform(self, sample_shape, low=0.0, high=1.0):
        """Uniform noise on ``[low, high)`` of the sample shape, in the parameters' dtype."""
        u = factory.rand(self._extended_shape(sample_shape), dtype=self._like().dtype)
        return u * (high - low) + low if (low, high) != (0.0, 1.0) else u
