"""The release explorer: one folder of static files that opens from disk (a file share, no
server, nothing from the network): index.html, its script and style sheet
(reports/explorer/), Plotly's bundled plotly.min.js (MIT licence, shipped in the `plotly`
package) and the release's public data as small scripts (`explorer_data`), one per
institution or state, loaded when chosen.

Every release writes two copies: `public/explorer/` (public files only) and
`internal/explorer/`, which adds the review board's view (`explorer_board`); the internal
copy shares the public copy's files by hard links where the file system allows.
`pseo-das explore RELEASE_DIR` writes one for a release on disk. Privacy cost: none."""
from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from pseo_das.errors import PseoDasError
from pseo_das.tasks import progress
from pseo_das.tasks.publication.explorer_board import board_data
from pseo_das.tasks.publication.explorer_data import (ExplorerData,
                                                      explorer_data, json_text, script)

EXPLORER = "explorer"                     # the folder's name in public/ and internal/
PAGE_FILES = ("index.html", "explorer.css", "explorer.js")
PLOTLY_JS = "plotly.min.js"
DATA = "data"
RELEASE_DATA, BOARD_DATA = "release", "board"


class ExplorerError(PseoDasError):
    """The explorer cannot be written: its destination exists, or a file it is made from
    is missing."""

    quotes_records = False


def page_files() -> dict[str, Path]:
    """The page's own files (package data of pseo_das.reports) and Plotly's bundle."""
    import pseo_das.reports
    folder = Path(pseo_das.reports.__file__).parent / EXPLORER
    spec = importlib.util.find_spec("plotly")
    if spec is None or spec.origin is None:
        raise ExplorerError("the plotly package is not installed (a dependency of pseo-das: "
                            "reinstall pseo-das)")
    plotly = Path(spec.origin).parent / "package_data" / PLOTLY_JS
    return {name: folder / name for name in PAGE_FILES} | {PLOTLY_JS: plotly}


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def unit_file(unit: str) -> str:
    return f"{DATA}/u_{unit}.js"


def write_explorer(out: Path, data: ExplorerData, board: dict | None = None,
                   share_with: Path | None = None) -> Path:
    """The explorer folder `out` (created; its parent must exist): the page, Plotly, the
    release's facts, one data file per unit and, with `board`, the review board's view.
    `share_with`: an explorer folder of the same data whose unit files and page files are
    hard-linked rather than written again."""
    (out / DATA).mkdir(parents=True)
    for name, source in page_files().items():   # copies: never a link into the package
        if share_with is not None:
            _link_or_copy(share_with / name, out / name)
        else:
            shutil.copyfile(source, out / name)
    for unit in data.units:                 # one unit's data made at a time
        name = unit_file(unit)
        if share_with is not None:
            _link_or_copy(share_with / name, out / name)
        else:
            (out / name).write_text(script(f"u_{unit}", data.units.text(unit)))
    facts = data.facts | {"board": board is not None}
    (out / DATA / f"{RELEASE_DATA}.js").write_text(script(RELEASE_DATA, json_text(facts)))
    if board is not None:
        (out / DATA / f"{BOARD_DATA}.js").write_text(script(BOARD_DATA, json_text(board)))
    return out


def write_release_explorers(release: Path, data: ExplorerData | None = None
                            ) -> tuple[Path, Path]:
    """A release folder's (or its staging folder's) two explorers, from its public files
    and, for the board's view, its internal ones: public/explorer and internal/explorer.
    `data`: the public files' `explorer_data` if read already."""
    if data is None:
        data = explorer_data(release / "public")
    public = write_explorer(release / "public" / EXPLORER, data)
    internal = write_explorer(release / "internal" / EXPLORER, data,
                              board_data(release / "internal", _earnings(data)),
                              share_with=public)
    progress(f"wrote the explorer: public/{EXPLORER}/ and internal/{EXPLORER}/ "
             f"({len(data.units)} institution and state files)")
    return public, internal


def _earnings(data: ExplorerData) -> Mapping[str, dict]:
    return data.units.part("earnings")


def default_out(release: Path) -> Path:
    """`pseo-das explore`'s folder unless --out: RELEASE_DIR-explorer beside the release."""
    release = Path(release)
    return release.with_name(f"{release.resolve().name}-explorer")


def explore(release: Path, out: Path, board: bool = False) -> Path:
    """`pseo-das explore`: the explorer of the release folder `release` written to `out`
    (which must not exist), with the review board's view if `board` (read from the
    release's internal folder). The release itself is not touched."""
    release, out = Path(release), Path(out)
    if out.exists():
        raise ExplorerError(f"{out} already exists; choose a new --out")
    if not (release / "public").is_dir():
        raise ExplorerError(f"{release}: not a release folder (no public/ folder in it)")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.with_name(f".{out.name}.partial")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        data = explorer_data(release / "public")
        write_explorer(staging, data,
                       board_data(release / "internal", _earnings(data)) if board else None)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    os.rename(staging, out)
    return out
