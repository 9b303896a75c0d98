"""A rerun does not store its data twice: when a release is published, each of its files that
an earlier release beside it already has, byte for byte at the same place, becomes a hard
link to that file (one copy on disk, two names; deleting either release keeps the other's
file whole). Privacy cost: none.

The earlier releases are the folders beside the destination holding a release
(`internal/manifest.json`): the `releases/<id>/` of `make release`. A staged file is linked
when an earlier manifest lists the same path with the same SHA-256 and the earlier file on
disk has the same bytes (compared: a file changed since its release is never linked to).
Where a link cannot be made (the earlier release on another filesystem, a filesystem
without hard links), the file stays a copy and `EarlierCopies.not_linked` says why.

Release files are never written after publication; a hard-linked file changed in place
would change in both releases (the audit's fingerprint check finds it in either)."""
from __future__ import annotations

import filecmp
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

MANIFEST = "internal/manifest.json"


@dataclass
class EarlierCopies:
    """What linking found: files linked, their bytes, the releases linked to, and why
    files that have an identical earlier copy were not linked (empty: none)."""
    files: int = 0
    bytes: int = 0
    releases: set[str] = field(default_factory=set)
    not_linked: dict[str, str] = field(default_factory=dict)   # file -> reason

    def summary(self) -> str:
        text = (f"{self.files} file(s), {self.bytes / 1e6:,.1f} MB, hard-linked to the "
                f"identical files of {', '.join(sorted(self.releases)) or 'no earlier release'}")
        if self.not_linked:
            reasons = sorted(set(self.not_linked.values()))
            text += f"; {len(self.not_linked)} identical file(s) copied: {'; '.join(reasons)}"
        return text


def _manifest_files(folder: Path) -> dict[str, str]:
    try:
        return json.loads((folder / MANIFEST).read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def earlier_releases(out_dir: Path) -> list[tuple[Path, dict[str, str]]]:
    """The releases beside `out_dir` with their manifests' files, newest name first."""
    parent = out_dir.parent
    if not parent.is_dir():
        return []
    found = []
    for folder in sorted(parent.iterdir(), reverse=True):
        if folder.name.startswith(".") or folder == out_dir or not folder.is_dir():
            continue
        files = _manifest_files(folder)
        if files:
            found.append((folder, files))
    return found


def _link(earlier: Path, staged: Path) -> None:
    """Replace `staged` by a hard link to `earlier` (atomically: a link beside it, renamed)."""
    temporary = staged.with_name(f".{staged.name}.link")
    os.link(earlier, temporary)
    try:
        os.replace(temporary, staged)
    except OSError:
        temporary.unlink(missing_ok=True)
        raise


def link_earlier_copies(staging: Path, out_dir: Path) -> EarlierCopies:
    """Hard-link each file of `staging` (listed in its manifest) to the identical file of
    an earlier release beside `out_dir` (module docstring)."""
    result = EarlierCopies()
    staged_files = _manifest_files(staging)
    releases = earlier_releases(out_dir)
    for name, sha256 in staged_files.items():
        staged = staging / name
        for folder, files in releases:
            earlier = folder / name
            if files.get(name) != sha256 or not earlier.is_file():
                continue
            if earlier.stat().st_size != staged.stat().st_size or \
                    not filecmp.cmp(earlier, staged, shallow=False):
                continue
            try:
                _link(earlier, staged)
            except OSError as error:
                result.not_linked[name] = (f"cannot hard-link to {folder.name} "
                                           f"({error.strerror or error})")
                break
            result.files += 1
            result.bytes += staged.stat().st_size
            result.releases.add(folder.name)
            break
    return result
