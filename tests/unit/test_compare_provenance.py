"""ffn-zoo-compare records what made each result: its command line, the project version and the git revision with
a dirty flag, in every file it writes (checked in a temporary git repository, clean and dirty)."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from ffn_zoo.analysis.compare import provenance as P
from ffn_zoo.analysis.compare.cli import main
from tests.helpers import ladder_sweep, make_run


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with one commit of one tracked file."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "code.py").write_text("x = 1\n")
    git(repo, "add", "code.py")
    git(repo, "commit", "-q", "-m", "first")
    return repo


def test_clean_repository(repo: Path) -> None:
    assert P.git_revision(repo) == (git(repo, "rev-parse", "HEAD"), False)


def test_an_untracked_file_leaves_it_clean(repo: Path) -> None:
    (repo / "notes.txt").write_text("logs live beside the code\n")
    assert P.git_revision(repo)[1] is False


def test_a_changed_tracked_file_makes_it_dirty(repo: Path) -> None:
    (repo / "code.py").write_text("x = 2\n")
    prov = P.provenance(["a", "b c"], repo=repo)
    assert prov["git_commit"] == git(repo, "rev-parse", "HEAD") and prov["git_dirty"] is True
    assert prov["command"] == "ffn-zoo-compare a 'b c'"  # quoted as a shell would need it
    assert "(dirty" in P.describe(prov)


def test_outside_git_there_is_no_revision(tmp_path: Path) -> None:
    assert P.git_revision(tmp_path) == (None, None)
    prov = {"command": "ffn-zoo-compare x", "version": "0.1.0", "git_commit": None, "git_dirty": None}
    assert "no git revision" in P.describe(prov)


def test_paths_inside_the_working_folder_are_written_relative(tmp_path: Path) -> None:
    here = tmp_path / "checkout"
    argv = [str(here / "logs" / "seed0"), "--out", str(here / "experiments" / "x"), "/elsewhere/runs", "rel/dir",
            str(here)]
    command = P.provenance(argv, cwd=here)["command"]
    assert command == "ffn-zoo-compare logs/seed0 --out experiments/x /elsewhere/runs rel/dir ."
    assert str(tmp_path) not in command


def check_stamped(out: Path, argv: list[str]) -> dict:
    """Every file in ``out`` is listed in provenance.json with its hash; JSON and Markdown carry the record."""
    record = json.loads((out / P.PROVENANCE_FILE).read_text())
    assert record["command"] == "ffn-zoo-compare " + " ".join(argv)
    assert record["version"] == P.project_version() and record["git_commit"] == P.git_revision()[0]
    assert isinstance(record["git_dirty"], bool)  # the tests run from a checkout
    files = {p.name for p in out.iterdir()} - {P.PROVENANCE_FILE}
    assert set(record["files"]) == files and files
    for name in files:
        data = (out / name).read_bytes()
        assert record["files"][name] == hashlib.sha256(data).hexdigest()
        if name.endswith(".json"):
            assert json.loads(data)["provenance"] == {k: v for k, v in record.items() if k != "files"}
        elif name.endswith(".md"):
            assert data.decode().rstrip().endswith(P.describe(record))
    return record


def test_a_sweep_comparison_is_stamped(tmp_path: Path) -> None:
    for seed in (0, 1):
        for ffn, loss in (("gelu", 6.2), ("swiglu", 6.25)):
            make_run(tmp_path / "sweep", ffn, seed, loss + 0.01 * seed)
    argv = [str(tmp_path / "sweep"), "--out", str(tmp_path / "out"), "--no-layout"]
    assert main(argv) == 0
    assert {"table.md", "table.csv", "table.json"} <= set(check_stamped(tmp_path / "out", argv)["files"])


def test_a_ladder_comparison_is_stamped_and_reads_back(tmp_path: Path) -> None:
    ladder_sweep(tmp_path / "sweep", lambda s, x: 0.6 - 0.1 * x)
    argv = [str(tmp_path / "sweep"), "--out", str(tmp_path / "out")]
    assert main(argv) == 0
    assert "ladder.json" in check_stamped(tmp_path / "out", argv)["files"]
    again = [str(tmp_path / "out"), "--out", str(tmp_path / "again")]  # a stamped report is still a report
    assert main(again) == 0
    check_stamped(tmp_path / "again", again)


def test_only_the_files_of_this_call_are_listed(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.md").write_text("mine\n")
    make_run(tmp_path / "sweep", "gelu", 0, 6.2)
    assert main([str(tmp_path / "sweep"), "--out", str(out), "--no-layout"]) == 0
    assert "notes.md" not in json.loads((out / P.PROVENANCE_FILE).read_text())["files"]
    assert (out / "notes.md").read_text() == "mine\n"
