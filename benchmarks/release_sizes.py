"""Sizes of a release folder: every file (bytes, MB), each folder and the whole, and what is
shared with other releases by hard link (a rerun's identical files, earlier_copies.py).

    .venv/bin/python benchmarks/release_sizes.py releases/<id>                # the table
    .venv/bin/python benchmarks/release_sizes.py releases/<id> --limit-mb 120 # exit 1 over it

Sizes are the files' own (`st_size`). The whole counts a file hard-linked under two names
of the folder once (the internal explorer links the public one's files), as `du -sb` does:
what the folder takes alone.
"""
from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

MB = 1e6


def file_sizes(folder: Path) -> dict[str, tuple[int, int, tuple[int, int]]]:
    """Every file under `folder` by relative path: (bytes, hard links to it, its inode)."""
    return {str(p.relative_to(folder)): (s.st_size, s.st_nlink, (s.st_dev, s.st_ino))
            for p in sorted(folder.rglob("*")) if p.is_file() for s in [p.stat()]}


def report(folder: Path) -> tuple[str, int]:
    sizes = file_sizes(folder)
    lines = [f"{'bytes':>12} {'MB':>8}  file"]
    by_folder: dict[str, int] = defaultdict(int)
    for name, (size, links, _) in sizes.items():
        shared = f"  (hard link: {links} names)" if links > 1 else ""
        lines.append(f"{size:>12,} {size / MB:>8.2f}  {name}{shared}")
        parts = Path(name).parts
        by_folder[parts[0]] += size
        if len(parts) > 2:
            by_folder["/".join(parts[:2])] += size
    inodes = {inode: (size, links) for size, links, inode in sizes.values()}
    total = sum(size for size, _ in inodes.values())
    shared = sum(size for size, links in inodes.values() if links > 1)
    lines.append("")
    lines += [f"{size:>12,} {size / MB:>8.2f}  {name}/" for name, size in sorted(by_folder.items())]
    lines.append(f"{total:>12,} {total / MB:>8.2f}  whole folder ({len(sizes)} files; "
                 f"{len(inodes)} distinct; {shared / MB:.2f} MB of them hard-linked, within the "
                 "folder or with another release)")
    return "\n".join(lines), total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--limit-mb", type=float, help="exit 1 if the folder is larger")
    args = parser.parse_args(argv)
    text, total = report(args.folder)
    print(text)
    if args.limit_mb is not None and total > args.limit_mb * MB:
        print(f"over the limit: {total / MB:.1f} MB > {args.limit_mb:g} MB", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
