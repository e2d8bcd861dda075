"""Every README snippet runs as written: each ```python block in a fresh interpreter, each
```yaml block as a model file through ``cosim check`` and ``cosim run``, in a scratch
directory. The ```bash blocks belong to sections that have their own literal tests (the
quickstart: tests/test_readme.py; serving a unit: tests/cluster/test_serve_workflow.py)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
#: Sections whose ```bash blocks a test follows literally, with that test.
BASH_TESTED = {"## Quickstart": "tests/test_readme.py",
               "### Serve a unit to another team": "tests/cluster/test_serve_workflow.py"}


#: First line of a block that goes on from the block before it (run together).
CONTINUED = "# continuing the snippet above"


def snippets(kind: str) -> list[tuple[str, str]]:
    """``(section heading, code)`` of every block fenced as ``kind``; a block that starts
    with :data:`CONTINUED` is run after the one before it."""
    text = (ROOT / "README.md").read_text()
    out = []
    for m in FENCE.finditer(text):
        if m.group(1) == kind:
            before = text[:m.start()]
            heading = re.findall(r"^(#{2,3} .+)$", before, re.M)[-1]
            code = m.group(2)
            if code.startswith(CONTINUED):
                assert out, "a continued snippet needs one before it"
                code = out[-1][1] + code
            out.append((heading, code))
    return out


def _id(item) -> str:
    heading, code = item
    return f"{heading.lstrip('# ')}:{code.splitlines()[0][:30]}"


def test_every_bash_block_has_a_literal_test():
    for heading, _ in snippets("bash"):
        assert heading in BASH_TESTED, f"a ```bash block under {heading!r} has no test"
        assert (ROOT / BASH_TESTED[heading]).exists()


def test_the_readme_has_snippets_of_each_kind():
    assert len(snippets("python")) >= 5 and len(snippets("yaml")) >= 1


@pytest.mark.parametrize("snippet", snippets("python"), ids=_id)
def test_python_snippet_runs(snippet, tmp_path):
    heading, code = snippet
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, f"snippet under {heading}:\n{code}\n{r.stderr}"


@pytest.mark.parametrize("snippet", snippets("yaml"), ids=_id)
def test_yaml_snippet_is_a_model_file_that_runs(snippet, tmp_path):
    heading, text = snippet
    path = tmp_path / "model.yaml"
    path.write_text(text)
    for command in ("check", "run"):
        r = subprocess.run([sys.executable, "-m", "cosim.cli", command, str(path)],
                           cwd=tmp_path, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, f"cosim {command} on the model under {heading}:\n{r.stderr}"


# -- docs/guides: each guide's blocks in order, in one scratch directory per guide ----------

GUIDES = sorted((ROOT / "docs" / "guides").glob("*.md"))


def test_the_readme_links_every_guide():
    readme = (ROOT / "README.md").read_text()
    index = (ROOT / "docs" / "guides" / "README.md").read_text()
    assert "docs/guides/README.md" in readme
    for guide in GUIDES:
        if guide.name != "README.md":
            assert f"docs/guides/{guide.name}" in readme, guide.name
            assert f"({guide.name})" in index, guide.name


def _run_block(kind: str, code: str, cwd: Path) -> None:
    import os
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}"
                                f"{os.environ['PATH']}", COSIM_KEY_DIR=str(cwd / "keys"))
    if kind == "python":
        r = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env,
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, f"{code}\n{r.stderr}"
    elif kind == "yaml":
        (cwd / "model.yaml").write_text(code)
        for command in ("check", "run"):
            r = subprocess.run([sys.executable, "-m", "cosim.cli", command, "model.yaml"],
                               cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
            assert r.returncode == 0, f"cosim {command}:\n{code}\n{r.stderr}"
    elif kind == "bash":
        for line in filter(None, (raw.strip() for raw in code.splitlines())):
            r = subprocess.run(["bash", "-c", line], cwd=cwd, env=env, capture_output=True,
                               text=True, timeout=600)
            assert r.returncode == 0, f"{line}\n{r.stderr}"


@pytest.mark.slow
@pytest.mark.parametrize("guide", GUIDES, ids=lambda p: p.name)
def test_guide_runs_as_written(guide, tmp_path):
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    blocks = [(m.group(1), m.group(2)) for m in FENCE.finditer(guide.read_text())]
    for kind, code in blocks:
        _run_block(kind, code, tmp_path)
