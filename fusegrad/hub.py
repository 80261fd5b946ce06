"""``fusegrad.hub``: of PyTorch's model hub, the progress bar programs import from it
(``from torch.hub import tqdm``): the tqdm package's when installed, else a counter that
reports progress on stderr as PyTorch's stand-in does; and ``load_state_dict_from_url``,
which model files import to fetch pretrained weights: a checkpoint already in the hub's
cache directory loads from there, others are downloaded. Loading whole models from hub
repositories (``hub.load``) is not provided."""
from __future__ import annotations

import os
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


def get_dir() -> str:
    """The hub's cache directory: ``$TORCH_HOME/hub``, by default ``~/.cache/torch/hub``, as PyTorch's."""
    home = os.environ.get("TORCH_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "torch")
    return os.path.join(os.path.expanduser(home), "hub")


def load_state_dict_from_url(url: str, model_dir: Optional[str] = None, map_location=None, progress: bool = True,
                             check_hash: bool = False, file_name: Optional[str] = None,
                             weights_only: bool = False) -> dict:
    """The checkpoint at ``url``, loaded with ``fusegrad.load``: from ``model_dir`` (the hub's
    ``checkpoints`` directory by default) when a file of its name is there, else downloaded
    there first. ``check_hash`` checks the SHA-256 prefix in the name, as PyTorch's."""
    import hashlib
    import re
    import urllib.parse
    import urllib.request
    from .serialization import load
    model_dir = model_dir or os.path.join(get_dir(), "checkpoints")
    os.makedirs(model_dir, exist_ok=True)
    name = file_name or os.path.basename(urllib.parse.urlparse(url).path)
    path = os.path.join(model_dir, name)
    if not os.path.exists(path):
        if progress:
            sys.stderr.write(f'Downloading: "{url}" to {path}\n')
        tmp = path + ".partial"
        try:
            urllib.request.urlretrieve(url, tmp)
        except OSError as e:
            raise RuntimeError(f"load_state_dict_from_url: could not download {url} ({e}); place the file at "
                               f"{path} to load it from there") from None
        if check_hash:
            prefix = re.search(r"-([a-f0-9]*)\.", name)
            with open(tmp, "rb") as fh:
                digest = hashlib.sha256(fh.read()).hexdigest()
            if prefix and not digest.startswith(prefix.group(1)):
                os.remove(tmp)
                raise RuntimeError(f'invalid hash value (expected "{prefix.group(1)}", got "{digest}")')
        os.replace(tmp, path)
    return load(path, map_location=map_location, weights_only=weights_only)
