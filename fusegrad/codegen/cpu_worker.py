"""A helper process that compiles loop-kernel modules for its parent (codegen.cpu_helpers).

``python -m fusegrad.codegen.cpu_worker`` reads one JSON task per line from stdin: the kernel
cache directory and the path of a kernel module's source in it. It compiles that kernel for
an entry's table as the parent would
(kernel_cache.load_module, cpu_link.address), which leaves the machine code in Numba's disk
cache beside the module, and answers one JSON line: ``{"ok": true}`` or the error. End of
input (the parent closed the pipe or exited) ends the process."""
from __future__ import annotations

import json
import os
import sys


def main() -> None:
    import fusegrad  # noqa: F401 - the CPU target settings the parent compiles with (cpu_target)
    from ..runtime.kernel_cache import load_module
    from .cpu_link import address
    for line in sys.stdin:
        task = json.loads(line)
        try:
            os.environ["FUSEGRAD_CACHE_DIR"] = task["cache"]
            with open(task["path"]) as fh:
                source = fh.read()
            address(load_module(source).kernel)
            reply = {"ok": True}
        except Exception as exc:  # noqa: BLE001 - reported; the parent compiles the kernel itself
            reply = {"ok": False, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
