"""Sizes of a release folder: every file (bytes, MB), each folder and the whole, and what is
shared with other releases by hard link (a rerun's identical files, earlier_copies.py).

    .venv/bin/python benchmarks/release_sizes.py releases/<id>                # the table
    .venv/bin/python benchmarks/release_sizes.py releases/<id> --limit-mb 120 # exit 1 over it
    .venv/bin/python benchmarks/release_sizes.py releases/<id> --record       # and a result file

Sizes are the files' own (`st_size`). The whole counts a file hard-linked under two names
of the folder once (the internal explorer links the public one's files), as `du -sb` does:
what the folder takes alone.
"""
from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import pyarrow.parquet as pq

from result_file import Run, table

MB = 1e6


def file_sizes(folder: Path) -> dict[str, tuple[int, int, tuple[int, int]]]:
    """Every file under `folder` by relative path: (bytes, hard links to it, its inode)."""
    return {str(p.relative_to(folder)): (s.st_size, s.st_nlink, (s.st_dev, s.st_ino))
            for p in sorted(folder.rglob("*")) if p.is_file() for s in [p.stat()]}


def summary(sizes: dict[str, tuple[int, int, tuple[int, int]]]) -> tuple[dict[str, int], dict]:
    """Bytes per folder (top level and one below), and the whole: bytes (a file hard-linked
    under two names counted once), files, distinct files, bytes hard-linked."""
    by_folder: dict[str, int] = defaultdict(int)
    for name, (size, _, _) in sizes.items():
        parts = Path(name).parts
        if len(parts) > 1:                  # a file at the top is in no folder
            by_folder[parts[0]] += size
        if len(parts) > 2:
            by_folder["/".join(parts[:2])] += size
    inodes = {inode: (size, links) for size, links, inode in sizes.values()}
    whole = {"bytes": sum(size for size, _ in inodes.values()), "files": len(sizes),
             "distinct": len(inodes),
             "hard_linked_bytes": sum(size for size, links in inodes.values() if links > 1)}
    return dict(sorted(by_folder.items())), whole


def report(folder: Path) -> tuple[str, int]:
    sizes = file_sizes(folder)
    lines = [f"{'bytes':>12} {'MB':>8}  file"]
    for name, (size, links, _) in sizes.items():
        shared = f"  (hard link: {links} names)" if links > 1 else ""
        lines.append(f"{size:>12,} {size / MB:>8.2f}  {name}{shared}")
    by_folder, whole = summary(sizes)
    total = whole["bytes"]
    lines.append("")
    lines += [f"{size:>12,} {size / MB:>8.2f}  {name}/" for name, size in by_folder.items()]
    lines.append(f"{total:>12,} {total / MB:>8.2f}  whole folder ({whole['files']} files; "
                 f"{whole['distinct']} distinct; {whole['hard_linked_bytes'] / MB:.2f} MB of "
                 "them hard-linked, within the folder or with another release)")
    return "\n".join(lines), total


def figures(by_folder: dict[str, int], whole: dict) -> list[dict]:
    """The sizes as the docs show them (result_file.py)."""
    rows = [[f"{name}/", size, round(size / MB, 1)] for name, size in by_folder.items()]
    rows.append([f"whole folder ({whole['files']} files, {whole['distinct']} distinct; "
                 f"{whole['hard_linked_bytes'] / MB:.1f} MB hard-linked, counted once)",
                 whole["bytes"], round(whole["bytes"] / MB, 1)])
    return [table("Sizes of the release folder", ["folder", "bytes", "MB"], rows)]


def named_files(folder: Path) -> dict:
    """The files and groups of files the docs name: rows (Parquet) and MB."""
    internal, public = folder / "internal", folder / "public"
    state = internal / "flows_state.parquet"
    state_pseof = [p for p in public.glob("*/pseof_*.csv*") if p.parent.name != "all"]

    def mb(paths: list[Path]) -> float:
        return round(sum(p.stat().st_size for p in paths) / MB, 2)
    return table("Files the docs name", ["file", "rows", "MB"], [
        ["`internal/flows_state.parquet`", pq.read_metadata(state).num_rows, mb([state])],
        ["`public/all/pseoe_all.xlsx`", None, mb([public / "all" / "pseoe_all.xlsx"])],
        [f"the {len(state_pseof)} state folders' `pseof_[st]` files together", None,
         mb(state_pseof)],
        ["the Parquet extension (`public/all/parquet/`)", None,
         mb(list((public / "all" / "parquet").glob("*.parquet")))],
        ["`public/all/datapackage.json`", None, mb([public / "all" / "datapackage.json"])],
        ["`public/explorer/` (the release explorer)", None,
         mb([p for p in (public / "explorer").rglob("*") if p.is_file()])]])


def record(folder: Path, run: Run) -> Path:
    """The folder's sizes as results/release-sizes-<date>.json."""
    return run.write(figures(*summary(file_sizes(folder))) + [named_files(folder)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--limit-mb", type=float, help="exit 1 if the folder is larger")
    parser.add_argument("--record", action="store_true", help="also write the folder sizes as "
                        "benchmarks/results/release-sizes-<date>.json (the demo release's)")
    args = parser.parse_args(argv)
    text, total = report(args.folder)
    print(text)
    if args.record:
        path = record(args.folder, Run("release-sizes", argv))
        print(f"results: {path}")
    if args.limit_mb is not None and total > args.limit_mb * MB:
        print(f"over the limit: {total / MB:.1f} MB > {args.limit_mb:g} MB", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
