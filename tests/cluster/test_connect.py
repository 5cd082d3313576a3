"""Joining Ray (cluster/connect.py): without the extra, a Ray option fails in one line naming what to install;
an address where no cluster listens fails in one line naming how to start one.

Why a subprocess: "Ray is not installed" is a state of a whole interpreter; blocking the import there
(sys.modules['ray'] = None makes `import ray` raise ImportError) is exactly what a machine without the extra sees.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys

import pytest

from rubric_engine.errors import ConfigError

_NO_RAY = """
import sys
sys.modules['ray'] = None
from rubric_engine.cluster.connect import connect, connected
from rubric_engine.errors import ConfigError
assert connected() is False
try:
    connect('local', option='ray=')
except ConfigError as exc:
    print(exc)
"""


def test_without_ray_the_option_names_the_extra_to_install() -> None:
    out = subprocess.run([sys.executable, "-c", _NO_RAY], capture_output=True, text=True, check=True).stdout
    assert out.count("\n") == 1, out
    assert "ray= needs Ray, which is not installed here" in out
    assert "pip install 'rubric-engine[ray]'" in out


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="the ray extra is not installed")
def test_an_address_with_no_cluster_is_one_line_naming_how_to_start_one() -> None:
    from rubric_engine.cluster.connect import connect

    with pytest.raises(ConfigError) as caught:
        connect("127.0.0.1:1", option="ray=")
    text = str(caught.value)
    assert "\n" not in text and text.startswith("ray=127.0.0.1:1: could not join a Ray cluster there")
    assert "ray start --head" in text


_LOCAL = """
from rubric_engine.cluster.connect import connect
ray = connect('local', option='ray=')
print(ray.get_runtime_context().namespace)
ray.shutdown()
"""


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="the ray extra is not installed")
def test_a_local_instance_starts_without_rays_info_lines() -> None:
    res = subprocess.run([sys.executable, "-c", _LOCAL], capture_output=True, text=True, timeout=180)
    assert res.returncode == 0 and res.stdout.strip() == "rubric-engine", res.stderr
    assert not re.search(r"\sINFO\s", res.stderr), res.stderr  # "Started a local Ray instance." is Ray's, not the run's
