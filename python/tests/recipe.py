"""docs/python.md's BNS-GCN diff, read from the docs and applied by content: every hunk's
context and removed lines must occur exactly once in its file (anywhere: line numbers are the
published trainer's), and are replaced by its context and added lines. Used by the recipe's
test and by python/benches/bns_epoch.py."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "python.md"
TRAINER = Path(__file__).resolve().parent / "bns_trainer"


def docs_diff(docs: Path = DOCS) -> str:
    """The ```diff block of the docs that patches BNS-GCN's train.py."""
    blocks = re.findall(r"```diff\n(.*?)```", docs.read_text(), flags=re.S)
    found = [b for b in blocks if "+++ b/train.py" in b]
    if len(found) != 1:
        raise ValueError(f"{docs}: expected one diff block for train.py, found {len(found)}")
    return found[0]


def parse(diff: str) -> dict:
    """``{file: [(old lines, new lines), ...]}`` of a unified diff."""
    files: dict = {}
    hunks = None
    for line in diff.splitlines():
        if line.startswith("--- "):
            continue
        if line.startswith("+++ "):
            hunks = files.setdefault(line[4:].split("/", 1)[1], [])
        elif line.startswith("@@"):
            hunks.append(([], []))
        elif hunks is None or not hunks:
            raise ValueError(f"diff line outside a hunk: {line!r}")
        elif line.startswith("-"):
            hunks[-1][0].append(line[1:])
        elif line.startswith("+"):
            hunks[-1][1].append(line[1:])
        else:
            text = line[1:] if line.startswith(" ") else line
            hunks[-1][0].append(text)
            hunks[-1][1].append(text)
    return files


def apply(diff: str, folder: Path) -> None:
    """Apply ``diff`` to the files under ``folder``, in place; raises naming the hunk that
    does not match exactly once."""
    for name, hunks in parse(diff).items():
        path = folder / name
        lines = path.read_text().splitlines()
        for old, new in hunks:
            at = [i for i in range(len(lines) - len(old) + 1) if lines[i:i + len(old)] == old]
            if len(at) != 1:
                shown = "\n".join(old)
                raise ValueError(f"{path}: hunk matches {len(at)} times, not once:\n{shown}")
            lines[at[0]:at[0] + len(old)] = new
        path.write_text("\n".join(lines) + "\n")


def trainer_copy(folder: Path, with_switchgnn: bool) -> Path:
    """A copy of the BNS-shaped trainer in ``folder``, the docs' diff applied or not."""
    shutil.copytree(TRAINER, folder, ignore=shutil.ignore_patterns("__pycache__"))
    if with_switchgnn:
        apply(docs_diff(), folder)
    return folder
