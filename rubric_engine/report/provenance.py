"""The provenance block and the mock banner of report.html.

Why its own module: a reader of a report must be able to tell where its numbers came from (when, which
engine, which spec and data, which models with which parameters, which command) and must never mistake a
mock run for a measurement. Everything is read from what the run wrote: summary.json (its `provenance`
section since the engine records one, docs/outputs.md) and, for older runs, the model ids in summary.json and
the sampling params in manifest.json; a field a run did not record says "not recorded", never a guess.
Every value is escaped: a model name or a command is text from the user.
"""

from __future__ import annotations

import html
import json
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from rubric_engine.models.mock import is_mock
from rubric_engine.store.layout import read_manifest

if TYPE_CHECKING:
    from rubric_engine.results.leaderboard import Leaderboard, Row

__all__ = ["provenance_section", "mock_banner", "run_models", "CSS"]

CSS = """
.mock{background:#fff0c2;border:2px solid #c98a00;padding:8px 12px;border-radius:4px;font-weight:600}
table.prov td{text-align:left}code.h{word-break:break-all;font-size:0.85em}
"""

_NOT = '<span class="note">not recorded</span>'


def _e(x: Any) -> str:
    return html.escape("" if x is None else str(x), quote=True)


def run_models(row: "Row") -> list[dict[str, Any]]:
    """Every model of a row's run: {role, name, model, params, ...} from summary.json's provenance, else rebuilt
    from its candidate / judge / user entries and manifest.json's params (runs made before provenance)."""
    summary = row.run.summary if row.run is not None else {}
    recorded = (summary.get("provenance") or {}).get("models")
    if isinstance(recorded, list):
        return [m for m in recorded if isinstance(m, Mapping)]
    manifest = (read_manifest(row.run.dir) if row.run is not None else None) or {}
    params = manifest.get("params") if isinstance(manifest.get("params"), Mapping) else {}
    out: list[dict[str, Any]] = []
    for role in ("candidate", "judge", "user"):
        entry = summary.get(role)
        if not isinstance(entry, Mapping) or not entry.get("model"):
            continue
        p = params.get(role)
        out.append({"role": role, "name": entry.get("name"), "model": entry.get("model"),
                    "params": p[0] if isinstance(p, list) and len(p) == 1 else p,
                    "mock": any(is_mock(m.strip()) for m in str(entry["model"]).split(","))})
    return out


def mock_banner(lb: "Leaderboard") -> str:
    """A banner naming the mock models when any run used one; '' otherwise."""
    mocks = list(dict.fromkeys(f"{m.get('name')} ({m.get('role')}, {r.label})" for r in lb.rows
                               for m in run_models(r) if m.get("mock")))
    if not mocks:
        return ""
    return (f'<p class="mock" role="alert">Mock models: {_e(", ".join(mocks))}. Their replies and verdicts are '
            "deterministic placeholders made offline; the scores in this report measure nothing.</p>")


def _models_cell(models: Iterable[Mapping[str, Any]]) -> str:
    items = []
    for m in models:
        extra = [f"{k} {_e(m[k])}" for k in ("api_base", "revision") if m.get(k)]
        params = m.get("params")
        text = json.dumps(params, ensure_ascii=False, sort_keys=True, default=str) if params else "default parameters"
        items.append(f"<li><b>{_e(m.get('role'))}</b> {_e(m.get('name'))} = <code>{_e(m.get('model'))}</code>"
                     + "".join(f" · {x}" for x in extra) + f" · <code>{_e(text)}</code>"
                     + (f" · timeout {_e(m['timeout'])} s" if m.get("timeout") is not None else "")
                     + (' <b class="warn">mock</b>' if m.get("mock") else "") + "</li>")
    return f"<ul>{''.join(items)}</ul>" if items else _NOT


def _fields(row: "Row") -> list[tuple[str, str]]:
    s = row.run.summary if row.run is not None else {}
    prov = s.get("provenance") if isinstance(s.get("provenance"), Mapping) else {}

    def val(x: Any, code: bool = False) -> str:
        if x in (None, ""):
            return _NOT
        return f'<code class="h">{_e(x)}</code>' if code else _e(x)

    engine = prov.get("engine_version")
    env = ", ".join(f"{k} {prov[k]}" for k in ("python", "litellm") if prov.get(k))
    return [("Date", val(s.get("created"))),
            ("Engine", val(f"rubric-engine {engine}" + (f" ({env})" if env else "") if engine else None)),
            ("Benchmark", val(f"{s.get('benchmark', '')} {s.get('benchmark_version', '')}".strip())),
            ("Spec hash", val(s.get("spec_hash"), code=True)),
            ("Data sha256", val(s.get("data_sha256"), code=True)),
            ("Run id", val(s.get("run_id"), code=True)),
            ("Models and parameters", _models_cell(run_models(row))),
            ("Command", val(prov.get("command"), code=True)),
            ("Run directory", val(row.run_dir, code=True))]


def _table(fields: list[tuple[str, str]]) -> str:
    return ('<div class="tw"><table class="prov"><tbody>'
            + "".join(f'<tr><th class="t">{_e(k)}</th><td class="t">{v}</td></tr>' for k, v in fields)
            + "</tbody></table></div>")


def provenance_section(lb: "Leaderboard") -> str:
    """Per run: date, engine version, benchmark, spec hash, data sha256, run id, models with their params, the
    command and the directory; with several runs, each in its own <details> under a line saying what they share."""
    if not lb.rows:
        return ""
    head = ('<h2 id="provenance">Provenance</h2><p class="note">What made these numbers, from each run\'s '
            "summary.json and manifest.json (no key is ever recorded).</p>")
    if len(lb.rows) == 1:
        return head + _table(_fields(lb.rows[0]))
    notes = []
    for key, name in (("spec_hash", "spec hash"), ("data_sha256", "data sha256")):
        values = [(r.run.summary if r.run else {}).get(key) for r in lb.rows]
        known, missing = {str(v) for v in values if v}, sum(not v for v in values)
        if known:
            notes.append(f"same {name} in every run" if len(known) == 1 and not missing else
                         f"{len(known)} different {name}es")
        if missing:
            notes.append(f"{name} not recorded in {missing} run{'s' if missing > 1 else ''}")
    return (head + f'<p class="note">{_e("; ".join(notes))}.</p>'
            + "".join(f'<details class="prov"><summary>{_e(r.label)}</summary>{_table(_fields(r))}</details>'
                      for r in lb.rows))
