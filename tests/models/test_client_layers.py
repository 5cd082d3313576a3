"""The model client's layers are chosen when it is built, and a run's settings stay the run's.

What is checked: no module but the client's own assigns an attribute of a `ModelClient` (its cache, batcher,
prompt-cache marks, worker pool, observer, notify, ... are constructor arguments, composed in models/compose.py),
found by an AST scan that is shown to catch a planted assignment; and two runs started together on one event loop
through the Python API, one with `workers=2` and one with `workers=1`, each get their own: every request of the
first comes from a worker process, every request of the second from the test's own process (the fake server reads
which process holds each connection's socket), and the workers end with their run.
"""

from __future__ import annotations

import ast
import asyncio
import os
from pathlib import Path

from fakeserver import FakeServer
from test_python_api import LIMIT, Script, api_options, entry

from conftest import REPO
PACKAGE = REPO / "rubric_engine"
CLIENT = PACKAGE / "models" / "client.py"


def _client_attributes() -> set[str]:
    """Every attribute ModelClient sets on itself (`self.x = ...`, in any method)."""
    tree = ast.parse(CLIENT.read_text(encoding="utf-8"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelClient")
    return {x.attr for x in ast.walk(cls) if isinstance(x, ast.Attribute) and isinstance(x.ctx, ast.Store)
            and isinstance(x.value, ast.Name) and x.value.id == "self"}


def _assignments(source: str, names: set[str]) -> list[str]:
    """`obj.name = ...` (or +=, or setattr(obj, "name", ...)) on anything but `self`, for a client attribute name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and node.attr in names \
                and not (isinstance(node.value, ast.Name) and node.value.id == "self"):
            found.append((node.lineno, node.col_offset, ast.unparse(node)))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr" \
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and node.args[1].value in names:
            found.append((node.lineno, node.col_offset, ast.unparse(node)))
    return [f"{line}: {text}" for line, _, text in sorted(found)]


def test_the_scan_finds_a_planted_setter_injection() -> None:
    names = _client_attributes()
    assert {"batcher", "prompt_cache", "notify", "observer", "workers", "cache"} <= names
    planted = ("client = ModelClient(spec, cache=None)\nclient.batcher = run.batcher(client)\n"
               "for c in clients:\n    c.notify, c.observer = say, seen\nsetattr(client, 'prompt_cache', True)\n"
               "self.cache = None\n")
    assert _assignments(planted, names) == ["2: client.batcher", "4: c.notify", "4: c.observer",
                                            "5: setattr(client, 'prompt_cache', True)"]


def test_no_module_assigns_attributes_on_a_model_client() -> None:
    """Collaborators go to the constructor (models/compose.py builds a run's clients in one place); nothing
    attaches them afterwards."""
    names = _client_attributes()
    offenders = [f"{path.relative_to(PACKAGE.parent)}:{hit}" for path in sorted(PACKAGE.rglob("*.py"))
                 if path != CLIENT for hit in _assignments(path.read_text(encoding="utf-8"), names)]
    assert offenders == [], ("pass these to ModelClient's constructor (models/compose.ClientLayers) instead of "
                             f"assigning them on a built client: {offenders}")


def test_two_runs_in_one_loop_keep_their_own_worker_counts(tmp_path: Path, fake_key: str) -> None:
    """`workers=2` and `workers=1` evaluated together on one loop: the first run's calls all leave from its worker
    processes, the second's all from this process; neither run's setting reaches the other."""
    from rubric_engine import evaluate_async

    class Both(Script):
        judges = frozenset({"judge2", "judge1"})

    async def both(url: str) -> list:
        return await asyncio.gather(
            evaluate_async("heartbench", entry(url, "cand2"), entry(url, "judge2"), workers=2,
                           **api_options(tmp_path, run_dir=tmp_path / "two", cache=False)),
            evaluate_async("heartbench", entry(url, "cand1"), entry(url, "judge1"), workers=1,
                           **api_options(tmp_path, run_dir=tmp_path / "one", cache=False)))

    with FakeServer(Both(), track_senders=True) as srv:
        two, one = asyncio.run(both(srv.url))
        sent = list(zip((r["model"] for r in srv.requests), srv.from_here))
    assert two.counts.scored == LIMIT and one.counts.scored == LIMIT
    by_run = {run: {here for model, here in sent if model.endswith(run)} for run in ("2", "1")}
    assert by_run == {"2": {False}, "1": {True}}, sent
    assert sum(model.startswith("cand") for model, _ in sent) == 2 * LIMIT
    assert _worker_children() == []  # the run's workers ended with it, not with this process


def _worker_children() -> list[int]:
    """This process's child processes that are engine workers (models/workers.py), from /proc."""
    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if int(stat[1]) == os.getpid() and stat[0] != "Z" and b"rubric_engine.models.workers" in cmdline:
            found.append(int(pid))
    return found
