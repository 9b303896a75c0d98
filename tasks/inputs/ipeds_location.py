"""Where a release reads the IPEDS completions and directories (ipeds/C{YYYY}_A.csv with
ipeds/HD{YYYY}.csv). The CIP recast, the IPEDS counts and the frame check read the same
folder, the first of:

1. the reference folder's ipeds/ (--reference DIR holding the real NCES files);
2. the data folder's ipeds/ (`pseo-das synth` writes there the completions of its own
   graduates, pseo_das/synth_ipeds.py, so that a synthetic data set of any seed meets
   IPEDS files that describe it);
3. the packaged SYNTHETIC demo files (pseo_das/reference/ipeds/: the default synthetic data
   set's universe only).

IPEDS files that `pseo-das synth` wrote are SYNTHETIC (their folder holds SYNTHETIC_MARK):
the release lists them with its demo inputs, as the packaged ones, and a production release
refuses them.
Privacy cost: none (it only looks for folders).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pseo_das.tasks.inputs.reference_inputs import default_reference_dir

IPEDS_FOLDER = "ipeds"
SYNTHETIC_MARK = "SYNTHETIC.md"   # in an ipeds/ folder that `pseo-das synth` wrote


@dataclass(frozen=True)
class IpedsLocation:
    folder: Path
    demo: bool        # SYNTHETIC files: the packaged ones, or a synthetic data set's
    source: str       # "reference folder", "data folder" or "packaged demo files"


def locate_ipeds(reference_dir: Path | None, data_dir: Path | None) -> IpedsLocation:
    """The IPEDS folder of a release (module docstring)."""
    packaged = default_reference_dir()
    if reference_dir is not None and Path(reference_dir).resolve() != packaged.resolve() \
            and (Path(reference_dir) / IPEDS_FOLDER).is_dir():
        return IpedsLocation(Path(reference_dir) / IPEDS_FOLDER, False, "reference folder")
    if data_dir is not None and (Path(data_dir) / IPEDS_FOLDER).is_dir():
        folder = Path(data_dir) / IPEDS_FOLDER
        return IpedsLocation(folder, (folder / SYNTHETIC_MARK).is_file(), "data folder")
    return IpedsLocation(packaged / IPEDS_FOLDER, True, "packaged demo files")
