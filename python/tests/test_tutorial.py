"""The tutorial of docs/python.md runs: its Python blocks, in order, in one
namespace, in a scratch directory; it asserts what it shows (retrieval,
training) and writes a PNG of the energy."""

import os
import re

from specs import SOURCE_DIR


def tutorial_blocks():
    with open(os.path.join(SOURCE_DIR, "docs", "python.md"),
              encoding="utf-8") as file:
        text = file.read()
    section = text.split("\n## Tutorial\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_tutorial_runs(tmp_path, monkeypatch):
    blocks = tutorial_blocks()
    assert len(blocks) >= 5
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "tutorial"}
    for block in blocks:
        exec(compile(block, "docs/python.md (tutorial)", "exec"), namespace)
    with open(tmp_path / "hopfield_energy.png", "rb") as picture:
        assert picture.read(8) == b"\x89PNG\r\n\x1a\n"
