"""Compiler diagnostics from the environment: ``FUSEGRAD_LOG`` (comma-separated
categories: graph_breaks, recompiles, kernels) logs to stderr; ``FUSEGRAD_DUMP=DIR``
writes the IR after each pass and the generated kernels as files."""
from __future__ import annotations

import itertools
import os
import re
import sys

_dump_ids = itertools.count()


def log(category: str, message: str) -> None:
    """Print ``[fusegrad:category] message`` on stderr if FUSEGRAD_LOG enables it."""
    cats = os.environ.get("FUSEGRAD_LOG", "")
    if category in {c.strip() for c in cats.split(",")} or cats.strip() == "all":
        print(f"[fusegrad:{category}] {message}", file=sys.stderr, flush=True)


class Dumper:
    """Writes numbered files ``<DIR>/<fn>-<n>/<step>-<stage>.txt`` for one compilation;
    does nothing when FUSEGRAD_DUMP is unset."""

    def __init__(self, fn_name: str):
        root = os.environ.get("FUSEGRAD_DUMP")
        self.dir = None
        self.step = itertools.count()
        if root:
            safe = re.sub(r"[^A-Za-z0-9_.-]", "_", fn_name)
            self.dir = os.path.join(root, f"{safe}-{next(_dump_ids)}")
            os.makedirs(self.dir, exist_ok=True)

    def __call__(self, stage: str, text) -> None:
        """Write ``text`` (or what the callable ``text`` returns: made only when dumping)."""
        if self.dir is None:
            return
        if callable(text):
            text = text()
        name = f"{next(self.step):02d}-{re.sub(r'[^A-Za-z0-9_.-]', '_', stage)}"
        ext = ".py" if stage.endswith("kernel") else ".ir"
        with open(os.path.join(self.dir, name + ext), "w") as f:
            f.write(str(text))
