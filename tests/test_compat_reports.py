"""The checked-in compatibility reports are fresh, and say where they come from.

Each report under docs/reports/ is generated whole by `scripts/rerun_matrices.sh` (`torchneuron compat`), and
its header names the commit(s) its rows were run at. A report whose commit is older than the last change to the
code it measures (torch_neuronx/compat/provenance.py MEASURED: csrc/, the compile backend and its shims, the
workers and the counting rules) describes code that no longer exists: this test fails until the reports are
regenerated. It reads the history with git, so it needs a checkout with its history (a fresh clone has it).
"""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from helpers import ROOT

REPORTS = {"docs/reports/compat-transformers.md": "transformers", "docs/reports/compat-diffusers.md": "diffusers"}
REGENERATE = "regenerate the reports with scripts/rerun_matrices.sh (docs/compat.md: Fresh reports)"


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def _history() -> None:
    if _git("rev-parse", "--is-inside-work-tree").returncode != 0:
        pytest.skip("not a git checkout (an unpacked source archive has no history to compare with)")
    if _git("rev-parse", "--is-shallow-repository").stdout.strip() == "true":
        pytest.fail("this clone is shallow: the reports' commits may be missing from it; "
                    "`git fetch --unshallow` (or clone without --depth)")


def header_commits(text: str) -> list[str]:
    """The commits a report's header names (`- commit: ` or `- commits: `), as written."""
    lines = re.findall(r"^- commits?: (.*)$", text, re.M)
    return re.findall(r"`([^`]+)`", lines[0]) if lines else []


@pytest.mark.parametrize("path,suite", REPORTS.items())
def test_report_is_no_older_than_the_code_it_measures(path, suite):
    from torch_neuronx.compat.provenance import MEASURED
    _history()
    with open(os.path.join(ROOT, path)) as f:
        text = f.read()
    commits = header_commits(text)
    assert commits, f"{path} has no commit in its header (written before reports had one): {REGENERATE}"
    for field in ("- date: ", "- versions: ", "wall time "):
        assert field in text, f"{path}: the header has no {field.strip()!r}: {REGENERATE}"
    last = _git("log", "-1", "--format=%H %cs %s", "--", *MEASURED[suite]).stdout.strip()
    assert last, f"git log finds no commit touching {MEASURED[suite]}"
    last_commit, last_line = last.split(" ", 1)[0], last
    for commit in commits:
        assert re.fullmatch(r"[0-9a-f]{40}", commit), \
            f"{path}: rows run at {commit!r}, which is no commit (uncommitted changes, or no checkout): {REGENERATE}"
        assert _git("cat-file", "-e", f"{commit}^{{commit}}").returncode == 0, \
            f"{path}: its commit {commit} is not in this repository's history: {REGENERATE}"
        assert _git("merge-base", "--is-ancestor", commit, "HEAD").returncode == 0, \
            f"{path}: its commit {commit} is not an ancestor of HEAD: {REGENERATE}"
        assert _git("merge-base", "--is-ancestor", last_commit, commit).returncode == 0, \
            (f"{path} was run at {commit[:12]}, before the last change to the code it measures ({last_line}): "
             f"its numbers may no longer hold; {REGENERATE}")


def test_docs_name_no_path_of_this_machine():
    """What the docs publish reads the same from any checkout: no absolute path of the machine they were written on."""
    found = []
    for folder, _, files in os.walk(os.path.join(ROOT, "docs")):
        for name in files:
            if name.endswith(".md"):
                found += _absolute_paths(os.path.join(folder, name))
    found += _absolute_paths(os.path.join(ROOT, "README.md"))
    assert not found, "absolute paths in the docs (write them relative): " + "; ".join(found[:5])


def _absolute_paths(path: str) -> list[str]:
    with open(path) as f:
        return [f"{os.path.relpath(path, ROOT)}:{n}: {m.group(0)}" for n, line in enumerate(f, 1)
                for m in [re.search(r"(?<![\w.])/(?:work|home|root|Users)/\S+|\S*site-packages/\S*", line)] if m]
