"""The run key `limits=`: decided once from the command line (cli/config.py) and carried by the settings to every
client at construction; a bad value is one line, exit 2; `limits=cluster` without Ray names the extra to install."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import EXE
from rubric_engine.cli.reward import settings_from_overrides
from rubric_engine.cluster.limits import AutoSource
from rubric_engine.errors import ConfigError
from rubric_engine.models.limits import LOCAL, LocalLimits
from rubric_engine.run.settings import client_layers
from rubric_engine.spec.load import load_spec


def test_the_choice_reaches_every_client_at_construction() -> None:
    base = ["benchmark=heartbench_en", "candidate=mock", "judge=mock"]
    assert isinstance(settings_from_overrides(base).limits, AutoSource)  # the default
    settings = settings_from_overrides([*base, "limits=local", "concurrency=auto"])
    assert settings.limits is LOCAL
    layers = client_layers(settings, load_spec("heartbench_en"), None)
    client = layers.client(settings.candidate, "candidate")
    assert isinstance(client.limits, LocalLimits) and client.gate is not None
    with pytest.raises(ConfigError, match=r"^limits=everywhere is not valid; use auto .* or cluster$"):
        settings_from_overrides([*base, "limits=everywhere"])


def test_a_bad_value_is_one_line_exit_2(tmp_path: Path, env: dict[str, str]) -> None:
    res = subprocess.run([EXE, "benchmark=heartbench_en", "candidate=mock", "judge=mock", "limits=everywhere",
                          f"hydra.run.dir={tmp_path / 'r'}"], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and res.stderr.strip().count("\n") == 0, res.stderr
    assert "limits=everywhere is not valid; use auto" in res.stderr and not (tmp_path / "r").exists()


_NO_RAY = """
import sys
sys.modules['ray'] = None
from rubric_engine.cluster.limits import limits_source
from rubric_engine.errors import ConfigError
assert limits_source('auto') is not None and limits_source('local') is not None  # no Ray needed for either
try:
    limits_source('cluster')
except ConfigError as exc:
    print(exc)
"""


def test_cluster_without_ray_names_the_extra() -> None:
    out = subprocess.run([sys.executable, "-c", _NO_RAY], capture_output=True, text=True, check=True).stdout
    assert out.count("\n") == 1 and out.startswith("limits=cluster needs Ray, which is not installed here"), out
    assert "pip install 'rubric-engine[ray]'" in out
