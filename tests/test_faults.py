"""Faults (issue 6, item 4): the on-disk kernel cache under damage, unwritable cache
directories, threads and concurrent processes.

Cache state is real: every test that touches the disk cache runs the compiled code in a
fresh subprocess (``_WORKER`` below) with its own temporary ``FUSEGRAD_CACHE_DIR``, so
nothing is served from an in-memory module table. Whether a process compiled machine code
or loaded it from disk is read from Numba's per-dispatcher counters
(``kernel.stats.cache_hits`` / ``cache_misses``) over ``kernel_cache._MODULES``; the
kernel cache itself has no disk-hit counter.

Unwritable directories: the tests run as root in CI, where ``chmod 0o500`` does not stop
writes. What is tested for real is a cache path that cannot be a directory (it names an
existing regular file, or lies under one) and a write that fails with ENOSPC. The
``chmod`` case is exercised for real only when not root; as root it is simulated by making
``os.access(path, W_OK)`` report False for that path in the worker (that is the check
``kernel_cache.cache_dir`` makes), which tests the fallback logic, not the kernel's
permission check."""
import glob
import json
import os
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import fusegrad as fg

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Runs f(x, y) = sum(tanh(x) * y + 1) and its gradients with backend="cpu" (a forward and a
# backward entry, see MODULES), compares with eager and prints one JSON line.
_WORKER = textwrap.dedent("""
    import json, os, sys, time, warnings
    warnings.simplefilter("always")
    cfg = json.loads(sys.argv[1])
    if cfg.get("deny_write"):  # simulate a read-only directory for root (see module doc)
        _access, _deny = os.access, os.path.realpath(cfg["deny_write"])
        def access(p, mode, *a, **k):
            if mode & os.W_OK and os.path.realpath(p).startswith(_deny):
                return False
            return _access(p, mode, *a, **k)
        os.access = access
    import numpy as np
    import fusegrad as fg
    from fusegrad.runtime import kernel_cache as kc
    if cfg.get("enospc"):
        import errno
        _mkstemp, _full = kc.tempfile.mkstemp, os.path.realpath(os.environ["FUSEGRAD_CACHE_DIR"])
        def mkstemp(*a, **k):  # the cache directory's file system is full, /tmp is not
            if os.path.realpath(k.get("dir") or "").startswith(_full):
                raise OSError(errno.ENOSPC, "No space left on device")
            return _mkstemp(*a, **k)
        kc.tempfile.mkstemp = mkstemp
    if cfg.get("start_at"):  # line up concurrent workers
        time.sleep(max(0.0, cfg["start_at"] - time.time()))

    def f(x, y):
        return (fg.tanh(x) * y + 1.0).sum()

    rng = np.random.default_rng(0)
    xs, ys = rng.standard_normal((5, 7)), rng.standard_normal((5, 7))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cf = fg.compile(f, backend="cpu")
        x = fg.tensor(xs, requires_grad=True)
        out = cf(x, fg.tensor(ys))
        out.backward()
    x0 = fg.tensor(xs, requires_grad=True)
    ref = f(x0, fg.tensor(ys))
    ref.backward()
    mods = list(kc._MODULES.values())
    print("RESULT " + json.dumps({
        "ok": bool(np.allclose(out.item(), ref.item()) and np.allclose(x.grad.numpy(), x0.grad.numpy())),
        "compiles": cf.cache_info()["compiles"],
        "fallbacks": cf.cache_info()["fallbacks"],
        "modules": len(mods),
        "files": sorted(m.__file__ for m in mods),
        "numba_hits": sum(sum(getattr(m, "kernel", getattr(m, "run", None)).stats.cache_hits.values()) for m in mods),
        "numba_misses": sum(sum(getattr(m, "kernel", getattr(m, "run", None)).stats.cache_misses.values())
                            for m in mods),
        "warnings": [str(w.message) for w in caught if "fusegrad" in str(w.message)],
    }))
""")


# Kernel modules the worker loads: the forward and backward entries, the kernel each
# calls (the forward's sum, the backward's elementwise gradient) and the interpreter of
# their programs (codegen.cpu_program). The entries call the interpreter and it the kernels
# through their addresses, so from a warm disk cache Numba loads all five.
MODULES = 5


def _start(cache, tmpdir=None, **cfg):
    env = dict(os.environ, FUSEGRAD_CACHE_DIR=str(cache), PYTHONPATH=ROOT)
    env.pop("FUSEGRAD_LOG", None)
    if tmpdir is not None:  # where a fallback cache directory goes (so pytest removes it)
        os.makedirs(tmpdir, exist_ok=True)
        env["TMPDIR"] = str(tmpdir)
    return subprocess.Popen([sys.executable, "-c", _WORKER, json.dumps(cfg)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _result(proc) -> dict:
    out, err = proc.communicate(timeout=300)
    lines = [ln for ln in out.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, f"worker failed (rc={proc.returncode}):\n{out}\n{err[-3000:]}"
    return json.loads(lines[-1][len("RESULT "):])


def _run(cache, tmpdir=None, **cfg) -> dict:
    return _result(_start(cache, tmpdir, **cfg))


def _entries(cache) -> list:
    return sorted(glob.glob(os.path.join(str(cache), "kernels", "k_*.py")))


def _assert_consistent(cache) -> None:
    """Every entry is complete (its name is the key of its text), no temp files are left."""
    from fusegrad.runtime.kernel_cache import source_key
    kdir = os.path.join(str(cache), "kernels")
    assert not glob.glob(os.path.join(kdir, "*.tmp")), os.listdir(kdir)
    for path in _entries(cache):
        with open(path) as fh:
            text = fh.read()
        assert os.path.basename(path) == f"k_{source_key(text)}.py", f"{path} does not hold its source"


@pytest.fixture(scope="module")
def warm_cache(tmp_path_factory):
    """A cache directory filled by one worker; tests copy it before damaging it."""
    cache = tmp_path_factory.mktemp("warm") / "cache"
    r = _run(cache)
    assert r["ok"] and r["compiles"] == 1 and r["modules"] == MODULES and r["numba_misses"] == MODULES
    return cache


def _copy(src, dst):
    import shutil
    shutil.copytree(src, dst)
    return dst


# ------------------------------------------------------------------ damaged entries
def test_warm_cache_loads_without_compiling(warm_cache, tmp_path):
    cache = _copy(warm_cache, tmp_path / "c")
    r = _run(cache)
    assert r["ok"] and r["warnings"] == []
    assert r["numba_hits"] == MODULES and r["numba_misses"] == 0  # machine code came from disk


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty", "binary"])
def test_corrupt_source_entry_is_rebuilt_with_warning(warm_cache, tmp_path, damage):
    cache = _copy(warm_cache, tmp_path / "c")
    entries = _entries(cache)
    good = {p: open(p).read() for p in entries}
    victim = entries[0]
    with open(victim, "wb") as fh:
        fh.write({"truncate": good[victim][: len(good[victim]) // 2].encode(),
                  "garbage": b"def kernel(*a):\n    return 42\n",
                  "empty": b"",
                  "binary": b"\xff\xfe\x00\x81 not utf-8"}[damage])
    r = _run(cache)
    assert r["ok"], r
    assert len(r["warnings"]) == 1 and victim in r["warnings"][0] and "rebuilding" in r["warnings"][0]
    assert {p: open(p).read() for p in _entries(cache)} == good  # rewritten in full
    _assert_consistent(cache)
    r = _run(cache)  # and the next process is quiet again
    assert r["ok"] and r["warnings"] == []


@pytest.mark.parametrize("damage", ["truncate-nbc", "garbage-nbi", "empty-nbi"])
def test_corrupt_numba_data_is_rebuilt(warm_cache, tmp_path, damage):
    cache = _copy(warm_cache, tmp_path / "c")
    pyc = os.path.join(str(cache), "kernels", "__pycache__")
    ext = ".nbc" if damage.endswith("nbc") else ".nbi"
    victims = glob.glob(os.path.join(pyc, "*" + ext))
    assert victims, os.listdir(pyc) if os.path.isdir(pyc) else pyc  # there is Numba data to damage
    for path in victims:
        data = open(path, "rb").read()
        with open(path, "wb") as fh:
            fh.write(data[: len(data) // 3] if damage.startswith("truncate")
                     else b"" if damage.startswith("empty") else os.urandom(64))
    r = _run(cache)
    assert r["ok"], r
    assert r["numba_misses"] >= 1, r  # the damaged data was not loaded: compiled again
    r = _run(cache)  # the rebuilt data loads
    assert r["ok"] and r["numba_misses"] == 0


# ------------------------------------------------------------------ unwritable / missing
def _assert_fell_back(r, tmpdir):
    """Right answers, a warning, and the kernels written under the temp directory."""
    assert r["ok"], r
    assert any("not writable" in w for w in r["warnings"]), r["warnings"]
    assert len(r["files"]) == MODULES and all(f.startswith(str(tmpdir)) for f in r["files"]), r["files"]


def test_cache_dir_is_a_regular_file(tmp_path):
    path = tmp_path / "not-a-dir"
    path.write_text("x")
    _assert_fell_back(_run(path, tmp_path / "tmp"), tmp_path / "tmp")
    assert path.read_text() == "x"


def test_cache_dir_under_a_regular_file(tmp_path):
    (tmp_path / "file").write_text("x")
    path = tmp_path / "file" / "cache"
    _assert_fell_back(_run(path, tmp_path / "tmp"), tmp_path / "tmp")


def test_read_only_cache_dir(tmp_path):
    """Real chmod when not root; as root, os.access is made to deny writes (see module doc)."""
    path = tmp_path / "ro"
    (path / "kernels").mkdir(parents=True)
    os.chmod(path / "kernels", 0o500)
    os.chmod(path, 0o500)
    try:
        r = _run(path, tmp_path / "tmp", deny_write=None if os.geteuid() != 0 else str(path))
        _assert_fell_back(r, tmp_path / "tmp")
        assert os.listdir(path / "kernels") == []
    finally:
        os.chmod(path, 0o700)
        os.chmod(path / "kernels", 0o700)


def test_missing_cache_dir_is_created(tmp_path):
    path = tmp_path / "does" / "not" / "exist"
    r = _run(path)
    assert r["ok"] and r["warnings"] == []
    assert len(_entries(path)) == MODULES
    _assert_consistent(path)


def test_failed_write_falls_back(tmp_path):
    r = _run(tmp_path / "c", tmp_path / "tmp", enospc=True)
    assert r["ok"] and r["warnings"]
    assert len(r["files"]) == MODULES and all(f.startswith(str(tmp_path / "tmp")) for f in r["files"])


# ------------------------------------------------------------------ threads
@pytest.mark.parametrize("backend", ["eager", "cpu"])
def test_eight_threads_one_compile(backend):
    def f(x, y):
        return (fg.tanh(x) * y + x * 0.5).sum()

    cf = fg.compile(f, backend=backend)
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((6, 5)) for _ in range(8)]
    ys = [rng.standard_normal((6, 5)) for _ in range(8)]
    barrier = threading.Barrier(8)
    got, errors = [None] * 8, []

    def work(i):
        try:
            barrier.wait()
            res = []
            for _ in range(10):
                x = fg.tensor(xs[i], requires_grad=True)
                out = cf(x, fg.tensor(ys[i]))
                out.backward()
                res.append((out.item(), x.grad.numpy().copy()))
            got[i] = res
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(f"thread {i}: {e!r}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors
    for i in range(8):
        x = fg.tensor(xs[i], requires_grad=True)
        ref = f(x, fg.tensor(ys[i]))
        ref.backward()
        for val, grad in got[i]:
            np.testing.assert_allclose(val, ref.item(), rtol=1e-10)
            np.testing.assert_allclose(grad, x.grad.numpy(), rtol=1e-10)
    info = cf.cache_info()
    assert info["compiles"] == 1 and info["entries"] == 1 and info["fallbacks"] == 0, info
    assert info["hits"] + info["misses"] == 80 and info["misses"] == 1, info


# ------------------------------------------------------------------ processes
def test_two_processes_compile_into_one_cache_dir(tmp_path):
    cache = tmp_path / "shared"
    start_at = time.time() + 4.0  # both import first, then compile at the same moment
    procs = [_start(cache, start_at=start_at) for _ in range(2)]
    results = [_result(p) for p in procs]
    assert all(r["ok"] and r["compiles"] == 1 and r["warnings"] == [] for r in results), results
    assert len(_entries(cache)) == MODULES
    _assert_consistent(cache)
    mtimes = {p: os.stat(p).st_mtime_ns for p in _entries(cache)}
    third = _run(cache)
    assert third["ok"] and third["warnings"] == []
    assert third["numba_hits"] == MODULES and third["numba_misses"] == 0, third  # loaded, not compiled
    assert {p: os.stat(p).st_mtime_ns for p in _entries(cache)} == mtimes  # nothing rewritten
