"""fusegrad.profiler (and autograd.profiler): eager ops and record_function regions timed,
counted and nested as PyTorch's profiler reports them, with its table's columns, its
schedule's steps and a Chrome trace; nothing stays wrapped after a profile."""
from __future__ import annotations

import json

import pytest

import fusegrad as fg
from fusegrad.ir import primitive
from fusegrad.runtime import compiled, dispatch, ops

torch = pytest.importorskip("torch")


def _counts(T, P, prof_cls, **kw):
    x = T.ones(8, 8, requires_grad=True)
    with prof_cls(**kw) as prof:
        with P.record_function("forward"):
            y = (x @ x).relu()
            z = (y @ x).sum()
        z.backward()
    return prof


def test_ops_and_regions_are_counted_and_nested_like_pytorch():
    p = _counts(fg, fg.profiler, fg.profiler.profile)
    t = _counts(torch, torch.profiler, torch.profiler.profile)
    fg_avg = {e.key: e for e in p.key_averages()}
    t_avg = {e.key: e for e in t.key_averages()}
    # two forward matmuls and two per product in the backward, as aten::mm
    assert fg_avg["fusegrad::matmul"].count == t_avg["aten::mm"].count == 6
    assert fg_avg["forward"].count == t_avg["forward"].count == 1
    region = next(e for e in p.events() if e.name == "forward")
    inside = [c.name for c in region.cpu_children]
    assert inside.count("fusegrad::matmul") == 2 and "fusegrad::reduce_sum" in inside
    assert 0 <= region.self_cpu_time_total <= region.cpu_time_total
    for e in p.events():
        assert e.time_range_end >= e.time_range_start
        if e.cpu_parent is not None:
            assert e.cpu_parent.time_range_start <= e.time_range_start <= e.time_range_end <= e.cpu_parent.time_range_end


def _header(table: str) -> list:
    return table.splitlines()[1].split("  ")


def test_table_has_pytorchs_columns_and_sorts():
    p = _counts(fg, fg.profiler, fg.profiler.profile)
    t = _counts(torch, torch.profiler, torch.profiler.profile)
    cols = lambda tab: [c.strip() for c in _header(tab) if c.strip()]  # noqa: E731
    assert cols(p.key_averages().table()) == cols(t.key_averages().table())
    assert cols(p.key_averages(group_by_input_shape=True).table()) == cols(t.key_averages().table())
    p = _counts(fg, fg.profiler, fg.profiler.profile, record_shapes=True)
    t = _counts(torch, torch.profiler, torch.profiler.profile, record_shapes=True)
    shaped_fg = p.key_averages(group_by_input_shape=True).table(sort_by="self_cpu_time_total", row_limit=4)
    shaped_t = t.key_averages(group_by_input_shape=True).table(sort_by="self_cpu_time_total", row_limit=4)
    assert cols(shaped_fg) == cols(shaped_t)
    rows = p.key_averages().table(sort_by="cpu_time_total", row_limit=3).splitlines()[3:6]
    totals = [r.split()[4] for r in rows]
    assert len(rows) == 3 and "Self CPU time total:" in p.key_averages().table()
    assert totals[0].endswith(("us", "ms", "s"))


def _scheduled(T, P):
    x = T.ones(4)
    traces = []
    sch = P.schedule(wait=1, warmup=1, active=2, repeat=1)
    with P.profile(schedule=sch, on_trace_ready=lambda pr: traces.append(
            sorted(e.name for e in pr.events() if e.name.startswith("step")))) as prof:
        for i in range(7):
            with P.record_function(f"step{i}"):
                (x * 2).sum()
            prof.step()
    return traces


def test_schedule_records_the_active_steps_as_pytorch():
    assert _scheduled(fg, fg.profiler) == _scheduled(torch, torch.profiler) == [["step2", "step3"]]


def test_chrome_trace_compiled_calls_and_nothing_left_wrapped(tmp_path):
    f = fg.compile(lambda a: (a * 2).sin().sum())
    x = fg.ones(16)
    f(x)
    with fg.autograd.profiler.profile() as prof:
        f(x)
        fg.ones(3).exp()
    names = [e.name for e in prof.events()]
    assert names.count("CompiledFunction: <lambda>") == 1 and "fusegrad::exp" in names
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    assert {e["name"] for e in events} == set(names) and all(e["ph"] == "X" and e["dur"] >= 0 for e in events)
    handler_dir = tmp_path / "tb"
    with fg.profiler.profile(on_trace_ready=fg.profiler.tensorboard_trace_handler(str(handler_dir))):
        fg.ones(2).sum()
    assert len(list(handler_dir.glob("*.pt.trace.json"))) == 1
    assert primitive._DISPATCH[0] is dispatch.bind and ops.bind is dispatch.bind
    assert compiled.CompiledFunction.__call__.__qualname__ == "CompiledFunction.__call__"
