#!/usr/bin/env bash
# The test suite against the newest releases the project's ranges allow (no lock).
#
#   bench/newest.sh                                 # the whole suite (long: run it alone)
#   bench/newest.sh tests/models/test_models.py -x         # any pytest arguments: a chosen subset
#   KEEP=1 bench/newest.sh ...                      # keep the scratch venv (its path is printed)
#
# Why: CI installs from the committed lock (requirements/test-py311.lock), so a dependency's new release
# cannot turn it red overnight, but users install the ranges in pyproject.toml and get whatever is newest
# on the day. Run this before each submission: it builds a scratch venv outside the checkout, installs
# ".[test,ray]" with no lock (pip resolves the newest releases), prints which packages differ from the lock,
# and runs pytest with the given arguments. When it fails: fix the engine or narrow the range in
# pyproject.toml, then refresh the lock (docs/operations.md, "Refreshing the lock").
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-python3}"
scratch="$(mktemp -d "${TMPDIR:-/tmp}/rubric-engine-newest.XXXXXX")"
if [ "${KEEP:-0}" = 1 ]; then
  echo "scratch venv kept in $scratch/venv"
else
  trap 'rm -rf "$scratch"' EXIT
fi

"$python" -m venv "$scratch/venv"
# The install runs from a copy of the checkout, so no build files land in it.
cp -r "$repo/pyproject.toml" "$repo/README.md" "$repo/LICENSE" "$repo/MANIFEST.in" "$repo/rubric_engine" \
      "$repo/conf" "$repo/benchmarks" "$repo/data" "$scratch/"
"$scratch/venv/bin/pip" install -q --upgrade "$scratch[test,ray]"

lock="$repo/requirements/test-py$("$scratch/venv/bin/python" -c 'import sys; print("%d%d" % sys.version_info[:2])').lock"
"$scratch/venv/bin/python" - "$lock" <<'EOF'
"""Which installed packages differ from the lock: the releases this run tests that CI does not."""
import re
import sys
from importlib.metadata import distributions
from pathlib import Path


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


lock = Path(sys.argv[1])
pinned = {}
if lock.is_file():
    for line in lock.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", line)
        if m:
            pinned[norm(m.group(1))] = m.group(2)
installed = {norm(d.metadata["Name"]): d.version for d in distributions()}
changed = sorted((n, pinned.get(n, "-"), v) for n, v in installed.items()
                 if pinned.get(n) != v and n not in {"rubric-engine", "pip", "setuptools"})
print(f"newest releases vs {lock.name if lock.is_file() else '(no lock for this Python)'}: "
      f"{len(changed)} package(s) differ")
for name, old, new in changed:
    print(f"  {name}: {old} -> {new}")
EOF

cd "$repo"
# The venv's pytest script, not `python -m pytest`: that puts the checkout first on sys.path, so the tests would
# import the checkout's rubric_engine (which lacks the installed conf/, benchmarks/ and data/ mappings) instead of
# the package just installed.
"$scratch/venv/bin/pytest" -p no:cacheprovider "${@:--q}"
