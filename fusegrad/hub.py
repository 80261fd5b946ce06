"""``fusegrad.hub``: of PyTorch's model hub, the progress bar programs import from it
(``from torch.hub import tqdm``): the tqdm package's when installed, else a counter that
reports progress on stderr as PyTorch's stand-in does. Loading models from the hub needs
the network and is not provided."""
from __future__ import annotations

import sys
from typing import Any, Iterable, Optional

try:
    from tqdm import tqdm
except ImportError:
    class tqdm:  # noqa: N801 - the package's name
        """A minimal ``tqdm``: counts ``update(n)`` calls and prints the share of ``total``."""

        def __init__(self, iterable: Optional[Iterable] = None, total: Optional[float] = None,
                     disable: bool = False, **kwargs: Any):
            self.iterable, self.total, self.disable, self.n = iterable, total, disable, 0

        def __iter__(self):
            for item in self.iterable:
                yield item
                self.update(1)

        def update(self, n: float = 1) -> None:
            if self.disable:
                return
            self.n += n
            sys.stderr.write(f"\r{100 * self.n / float(self.total):.1f}%" if self.total else f"\r{self.n:.1f}")
            sys.stderr.flush()

        def set_description(self, *args: Any, **kwargs: Any) -> None:
            """Accepted; the counter shows no description."""

        def write(self, s: str) -> None:
            sys.stderr.write(f"{s}\n")

        def close(self) -> None:
            self.disable = True

        def __enter__(self) -> "tqdm":
            return self

        def __exit__(self, *exc: Any) -> None:
            if not self.disable:
                sys.stderr.write("\n")
