"""Publishing an approved release copies its held folder: files that are hard links of each
other there (the explorer's public and internal copies) stay hard links of each other in the
copy, so a reviewed release is no larger than one published directly."""
from __future__ import annotations

import os

from pseo_das.tasks.publication.review import copy_keeping_links


def test_linked_files_stay_linked_and_others_stay_apart(tmp_path):
    held = tmp_path / "held"
    (held / "public" / "explorer").mkdir(parents=True)
    (held / "internal" / "explorer").mkdir(parents=True)
    shared = held / "public" / "explorer" / "data.js"
    shared.write_text("var data = 1;\n")
    os.link(shared, held / "internal" / "explorer" / "data.js")
    (held / "public" / "pseoe_all.csv").write_text("a,b\n1,2\n")
    (held / "internal" / "ledger.csv").write_text("a,b\n1,2\n")    # same bytes, not a link

    copy_keeping_links(held, tmp_path / "out")

    out = tmp_path / "out"
    public, internal = out / "public" / "explorer" / "data.js", out / "internal" / "explorer" / "data.js"
    assert public.read_text() == internal.read_text() == "var data = 1;\n"
    assert os.path.samefile(public, internal) and public.stat().st_nlink == 2
    assert not os.path.samefile(public, shared)                  # a copy of the held folder
    assert not os.path.samefile(out / "public" / "pseoe_all.csv", out / "internal" / "ledger.csv")
    assert (out / "internal" / "ledger.csv").stat().st_nlink == 1
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == \
        sorted(p.relative_to(held) for p in held.rglob("*"))
