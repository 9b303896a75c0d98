"""Peak memory and CPU of making a national-size explorer FlowCells into the unit files' text
(their flows; docs/operate/scale.md, docs/develop/performance.md):

    .venv/bin/python benchmarks/bench_explorer_units.py lazy|eager UNITS CELLS_PER_UNIT   (under /usr/bin/time)

"lazy": one unit at a time, as a release does (FlowUnits); "eager": every unit's lists at once
(as FlowCells.units() did before 544c401), through json.dumps. Random counts; prints peak RSS and
CPU."""
import resource
import sys
import time

import numpy as np
from pseo_das.tasks.publication.explorer_data import (NOT_AVAILABLE_CODE, FlowCells, FlowColumns,
                                                     json_text, script)
from pseo_das.schemas.codes import NAICS_SECTORS
from pseo_das.tasks.employment_flows.division_flows import DIVISIONS
mode, units, cells_per_unit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
columns = FlowColumns(sorted(NAICS_SECTORS), sorted(DIVISIONS))
n = units * cells_per_unit
fc = FlowCells(columns, n)
rng = np.random.default_rng(1)
fc._values[:] = rng.integers(-1, 400, size=fc._values.shape, dtype=np.int32) - NOT_AVAILABLE_CODE
fc._rows([f"{u:08d}|05|{c % 50:02d}|{2000 + c // 50}"
          for u in range(units) for c in range(cells_per_unit)])
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
t = time.process_time()
fu = fc.units()
if mode == "eager":
    eager = {u: fu[u] for u in fu}
    size = sum(len(script(f"u_{u}", json_text(eager[u]))) for u in eager)
else:
    size = sum(len(script(f"u_{u}", fu.text(u))) for u in fu)
print(f"{mode}: {n:,} origin cells, values {fc._values.nbytes/1e6:.0f} MB; peak before {base:.0f} MB, "
      f"after {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss/1024:.0f} MB; "
      f"{time.process_time()-t:.1f} CPU s; JSON {size/1e6:.0f} MB")
