"""The checked-in compatibility reports are fresh, and say where they come from.

Each report under docs/reports/ is generated whole by `scripts/rerun_matrices.sh` (`torchneuron compat`), and
its header names the commit(s) its rows were run at. A report whose commit is older than the last change to the
code it measures (torch_neuronx/compat/provenance.py MEASURED: csrc/, the compile backend and its shims, the
workers and the counting rules) describes code that no longer exists: this test fails until the reports are
regenerated. It compares a digest of that code (in the header) with the checkout's, which needs no history, and
with the history where the clone has it, also places the report's commit after the last change.
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


def _checkout() -> None:
    if _git("rev-parse", "--is-inside-work-tree").returncode != 0:
        pytest.skip("not a git checkout (an unpacked source archive has no history to compare with)")


def _full_history() -> bool:
    return _git("rev-parse", "--is-shallow-repository").stdout.strip() != "true"


def header_field(text: str, field: str) -> list[str]:
    """The backquoted values of a report header's `- <field>: ` line (`commit`/`commits`, `measured code`)."""
    lines = re.findall(rf"^- {field}: (.*)$", text, re.M)
    return re.findall(r"`([^`]+)`", lines[0]) if lines else []


def header_commits(text: str) -> list[str]:
    """The commits a report's header names (`- commit: ` or `- commits: `), as written."""
    return header_field(text, "commits?")


@pytest.mark.parametrize("path,suite", REPORTS.items())
def test_report_is_no_older_than_the_code_it_measures(path, suite):
    from torch_neuronx.compat.provenance import MEASURED, measured_digest
    _checkout()
    with open(os.path.join(ROOT, path)) as f:
        text = f.read()
    commits = header_commits(text)
    assert commits, f"{path} has no commit in its header (written before reports had one): {REGENERATE}"
    for field in ("- date: ", "- versions: ", "wall time "):
        assert field in text, f"{path}: the header has no {field.strip()!r}: {REGENERATE}"
    last = _git("log", "-1", "--format=%H %cs %s", "--", *MEASURED[suite]).stdout.strip()
    # The code the rows measured, by content: equal to HEAD's exactly when nothing it measures has changed since.
    # It needs no history, so a shallow clone checks freshness too.
    digests = header_field(text, "measured code")
    assert digests, f"{path} has no measured-code digest in its header: {REGENERATE}"
    now = measured_digest(suite, ROOT)
    assert digests == [now], (f"{path} measured code {digests}, but the code it measures is now `{now}` "
                              f"(last changed: {last or 'see git log'}): its numbers may no longer hold; {REGENERATE}")
    for commit in commits:
        assert re.fullmatch(r"[0-9a-f]{40}", commit), \
            f"{path}: rows run at {commit!r}, which is no commit (uncommitted changes, or no checkout): {REGENERATE}"
    if not _full_history():
        return  # a shallow clone has not the report's commit to place in history; the digest above decided
    last_commit = last.split(" ", 1)[0]
    for commit in commits:
        assert _git("cat-file", "-e", f"{commit}^{{commit}}").returncode == 0, \
            f"{path}: its commit {commit} is not in this repository's history: {REGENERATE}"
        assert _git("merge-base", "--is-ancestor", commit, "HEAD").returncode == 0, \
            f"{path}: its commit {commit} is not an ancestor of HEAD: {REGENERATE}"
        assert _git("merge-base", "--is-ancestor", last_commit, commit).returncode == 0, \
            (f"{path} was run at {commit[:12]}, before the last change to the code it measures ({last}): "
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
