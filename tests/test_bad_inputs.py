"""Bad input everywhere: every case below goes through `pseo-das release` as a user runs it
and must be refused with exit status 2 and a message naming the file (and, where it
applies, the key, column or rows), with nothing published, no staging folder left, no
epsilon logged to MLflow and nothing recorded in the privacy store.

To add a case, add one `pytest.param(make, expected, id=...)` to CASES: `make` builds the
bad input under the test's folder and returns the command-line options that point to it
(`--data`, `--config`, `--reference`); `expected` are fragments of the error message, with
`{root}` standing for that folder.
"""
from __future__ import annotations

import gzip
import shutil
from collections.abc import Callable
from pathlib import Path

import mlflow
import pandas as pd
import pytest

from conftest import run_release, store_beside
from test_ingest import valid_graduates, valid_outcomes, write, write_releasable
from pseo_das.tasks.privacy.store import PrivacyStore
from pseo_das.tasks.inputs.reference_inputs import COVERAGE_FILE, J2J_FILE, default_reference_dir

# Cases refused when the configuration or the release id is read, before Prefect, MLflow or
# the privacy store (`pseo-das release` reads them first), are fast; the others go through a
# release's first steps: system tests (make test-fast leaves them out).
REFUSED_AT_LOAD = ("config-", "release-id-")

SEED = "d4" * 32
Make = Callable[[Path], dict[str, Path]]  # folder -> command-line options to the bad input
Breaks = Callable[[Path], None]           # breaks one file in place


# --- ways to break a file ------------------------------------------------------------------

def cut_in_half(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])


def cut_inside_last_row(path: Path) -> None:
    """Truncated in the middle of the last row: the row loses its last fields."""
    data = path.read_bytes().rstrip(b"\n")
    last_row = data.rindex(b"\n") + 1
    path.write_bytes(data[:data.index(b",", last_row) + 2])


def empty(path: Path) -> None:
    path.write_bytes(b"")


def header_only(path: Path) -> None:
    path.write_bytes(path.read_bytes().split(b"\n")[0] + b"\n")


def zero_rows(path: Path) -> None:
    pd.read_parquet(path).iloc[:0].to_parquet(path)


def text_instead_of_parquet(path: Path) -> None:
    path.write_text("person_id,institution\n1,00366900\n")


def utf16(path: Path) -> None:
    path.write_bytes(path.read_text(encoding="utf-8").encode("utf-16"))


def replace(old: bytes, new: bytes) -> Breaks:
    def breaks(path: Path) -> None:
        data = path.read_bytes()
        assert old in data, f"{old!r} not in {path}"
        path.write_bytes(data.replace(old, new, 1))
    return breaks


def replace_every(old: bytes, new: bytes) -> Breaks:
    def breaks(path: Path) -> None:
        data = path.read_bytes()
        assert old in data, f"{old!r} not in {path}"
        path.write_bytes(data.replace(old, new))
    return breaks


def append_row(row: str) -> Breaks:
    def breaks(path: Path) -> None:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(row + "\n")
    return breaks


# --- bad inputs ----------------------------------------------------------------------------

def config(text: str | bytes) -> Make:
    """A --config file with `text`."""
    def make(root: Path) -> dict[str, Path]:
        path = root / "release.toml"
        path.write_bytes(text.encode() if isinstance(text, str) else text)
        return {"--config": path}
    return make


def both(*makes: Make) -> Make:
    """The options of several makes together (e.g. --data and --config)."""
    def make(root: Path) -> dict[str, Path]:
        return {key: value for m in makes for key, value in m(root).items()}
    return make


def no_config(root: Path) -> dict[str, Path]:
    return {"--config": root / "release.toml"}


def data(fmt: str = "parquet", **broken: Breaks) -> Make:
    """Valid graduates and outcomes as `fmt`, then each named file broken."""
    def make(root: Path) -> dict[str, Path]:
        folder = root / f"{fmt}-data"
        folder.mkdir()
        write(folder, valid_graduates(), valid_outcomes(), fmt)
        for name, breaks in broken.items():
            breaks(folder / f"{name}.{fmt}")
        return {"--data": folder}
    return make


def without_outcomes(root: Path) -> dict[str, Path]:
    folder = data()(root)["--data"]
    (folder / "outcomes.parquet").unlink()
    return {"--data": folder}


def both_formats(root: Path) -> dict[str, Path]:
    folder = data()(root)["--data"]
    valid_graduates().to_csv(folder / "graduates.csv", index=False)
    return {"--data": folder}


def empty_dataset_folder(root: Path) -> dict[str, Path]:
    """outcomes/ as a folder without Parquet part files."""
    folder = data()(root)["--data"]
    (folder / "outcomes.parquet").unlink()
    (folder / "outcomes").mkdir()
    (folder / "outcomes" / "part-0.csv").write_text("person_id\n1\n")
    return {"--data": folder}


def a_file_named(name: str, options: Callable[[Path], dict[str, Path]]) -> Make:
    """A plain file `name`, passed where a folder is expected."""
    def make(root: Path) -> dict[str, Path]:
        (root / name).write_text("not a folder\n")
        return options(root / name)
    return make


def coded(row: int, cipcode: str) -> Breaks:
    """Graduate `row` of a Parquet graduates file gets `cipcode`."""
    def breaks(path: Path) -> None:
        graduates = pd.read_parquet(path)
        graduates["cipcode"] = graduates["cipcode"].astype(str)
        graduates.loc[row, "cipcode"] = cipcode
        graduates.to_parquet(path, index=False)
    return breaks


def recoded(column: str, old: str, new: str) -> Breaks:
    """Every row of a Parquet file with `old` in `column` gets `new`."""
    def breaks(path: Path) -> None:
        frame = pd.read_parquet(path)
        frame[column] = frame[column].astype(str).replace(old, new)
        frame.to_parquet(path, index=False)
    return breaks


def reference(**broken: Breaks) -> Make:
    """A copy of the packaged reference files, then each named file broken."""
    def make(root: Path) -> dict[str, Path]:
        folder = root / "reference"
        shutil.copytree(default_reference_dir(), folder, ignore=shutil.ignore_patterns("*.md"))
        for name, breaks in broken.items():
            breaks(folder / name)
        return {"--reference": folder}
    return make


def j2jod_downloads_with_a_bad_row(folder: Path) -> None:
    """The per-state J2J downloads (tests/data/public-layouts/j2jod) instead of
    j2j_state_flows.csv, one state code without its leading zero."""
    shutil.copytree(Path(__file__).parent / "data" / "public-layouts" / "j2jod", folder)
    (folder.parent / J2J_FILE).unlink()
    path = folder / "j2jod_ny_d_f_gs_ns_oslp_u.csv.gz"
    text = gzip.decompress(path.read_bytes()).replace(b"S,36,A,00,A00,0,0,233110", b"S,3,A,00,A00,0,0,233110")
    path.write_bytes(gzip.compress(text))


CASES = [
    # configuration (--config)
    pytest.param(config("[publish]\nformat = 'xlsx'\n"),
                 ["{root}/release.toml: invalid configuration",
                  "publish: unknown section; expected one of cells, earnings, privacy, flows"],
                 id="config-unknown-section"),
    pytest.param(config("[mos]\nenabled = true\n"),   # MOS is not formally DP: acknowledge it
                 ["release.toml: invalid configuration",
                  "NOT a formal differential-privacy guarantee",
                  "mos.acknowledge_not_formally_dp = true"],
                 id="config-mos-without-acknowledgement"),
    pytest.param(config("[privacy]\nepsilon = 0.5\n"),
                 ["release.toml: invalid configuration",
                  "privacy.epsilon: unknown key; expected one of epsilon_per_tabulation"],
                 id="config-unknown-key"),
    pytest.param(config("[privacy]\nepsilon_per_tabulation = -1.0\n"),
                 ["privacy.epsilon_per_tabulation = -1.0: Input should be greater than 0"],
                 id="config-negative-epsilon"),
    pytest.param(config("[flows]\nepsilon_per_tabulation = 0\n"),
                 ["flows.epsilon_per_tabulation = 0: Input should be greater than 0"],
                 id="config-zero-epsilon"),
    pytest.param(config('[privacy]\nepsilon_per_tabulation = ""\n'),  # a partial section keeps
                 ["privacy.epsilon_per_tabulation = '': Input should be a valid number"],
                 id="config-empty-epsilon"),                          # the defaults: "missing" is ""
    pytest.param(config('[privacy]\nepsilon_per_tabulation = "one"\n'),
                 ["privacy.epsilon_per_tabulation = 'one': Input should be a valid number"],
                 id="config-epsilon-as-text"),
    pytest.param(config("[privacy]\nepsilon_per_tabulation = inf\nepsilon_cap = inf\n"),
                 # no noise at all if accepted
                 ["privacy.epsilon_per_tabulation = inf: Input should be a finite number",
                  "privacy.epsilon_cap = inf: Input should be a finite number"],
                 id="config-infinite-epsilon"),
    pytest.param(config("[privacy]\nepsilon_per_tabulation = 1e300\nepsilon_cap = 1e302\n"
                        "[flows]\nepsilon_per_tabulation = 1e300\n"),  # true counts if accepted
                 ["privacy.epsilon_per_tabulation = 1e+300: outside the accepted range 0.001 to 20",
                  "privacy.epsilon_cap = 1e+302: outside the accepted range 0.001 to 1000",
                  "flows.epsilon_per_tabulation = 1e+300: outside the accepted range 0.001 to 20"],
                 id="config-epsilon-1e300"),
    pytest.param(config("[privacy]\nepsilon_per_tabulation = 15\nepsilon_cap = 1000\n"),
                 ["the privacy store allows at most epsilon 10 per tabulation",
                  "the configuration asks earnings.I.cip4.y1 15"],
                 id="store-policy-caps-epsilon-per-tabulation"),
    # limits checked when the configuration is read (issue 31): tiny epsilons would run the
    # exact sampler for minutes with gigabytes; percentiles pseoe_all.csv has no column for
    # crashed after spending
    pytest.param(config("[privacy]\nepsilon_per_tabulation = 5e-324\n"),
                 ["privacy.epsilon_per_tabulation = 5e-324: outside the accepted range 0.001 to "
                  "20; below it the exact sampler's table grows without bound"],
                 id="config-epsilon-5e-324"),
    pytest.param(config("[flows]\nepsilon_per_tabulation = 1e-6\n"),
                 ["flows.epsilon_per_tabulation = 1e-06: outside the accepted range 0.001 to 20"],
                 id="config-epsilon-1e-6"),
    pytest.param(config("[flows]\ncorrection = \"measured-total\"\n"
                        "total_epsilon_per_tabulation = 0.0001\n"),
                 ["flows.total_epsilon_per_tabulation = 0.0001: outside the accepted range"],
                 id="config-flows-total-epsilon-tiny"),
    pytest.param(config("[mos]\nepsilon = 21.0\n"),
                 ["mos.epsilon = 21.0: outside the accepted range 0.001 to 20"],
                 id="config-mos-epsilon-above-the-maximum"),
    pytest.param(config("[earnings]\npercentiles = [10, 50, 90]\n"),
                 ["earnings.percentiles = [10, 50, 90]: the official earnings file pseoe_all.csv "
                  "has columns for the percentiles [25, 50, 75] only"],
                 id="config-percentiles-without-columns"),
    pytest.param(config("[earnings]\npercentiles = [25, 50, 50, 75]\n"),
                 ["earnings.percentiles = [25, 50, 50, 75]: each percentile may be listed once"],
                 id="config-percentiles-twice"),
    pytest.param(config('[cells]\ncohort_years_by_degree = { "\u0660\u0665" = 3 }\n'),
                 ["cells.cohort_years_by_degree: ['\u0660\u0665'] are not degree levels"],
                 id="config-cohort-years-of-an-unknown-degree-level"),
    pytest.param(config("[privacy]\nepsilon_cap = 7.50000000000000000001\n"),  # read as 7.5
                 ["privacy.epsilon_cap = 7.50000000000000000001: more digits than a double holds"],
                 id="config-epsilon-beyond-double-precision"),
    pytest.param(config("[privacy]\nlifetime_epsilon_cap = 1000\n"),
                 ["privacy.lifetime_epsilon_cap: the lifetime cap is the privacy store's policy",
                  "pseo-das store set-policy --lifetime-cap VALUE --by WHO --reason WHY"],
                 id="config-cannot-raise-lifetime-cap"),
    pytest.param(config("[cells]\nyears_after = [1, 1, 5]\n"),
                 ["cells.years_after = [1, 1, 5]: each years-after may be listed once"],
                 id="config-years-after-twice"),
    pytest.param(config('[cells]\ncohort_years_by_degree = { "05" = 0 }\n'),
                 ["cells.cohort_years_by_degree = {{'05': 0}}: cohort windows are 1 to 10 years"],
                 id="config-cohort-length-zero"),
    pytest.param(config("[cells]\nfirst_cohort_year = 2030\n"),
                 ["cells.first_cohort_year = 2030 is after cells.last_earnings_year = 2022"],
                 id="config-first-cohort-after-last-year"),
    pytest.param(config("[earnings]\nmin_publish_count = 0\n"),
                 ["earnings.min_publish_count = 0: Input should be greater than or equal to 1"],
                 id="config-publish-threshold-zero"),
    pytest.param(config('[privacy]\nepsilon_cap = "9"\n'),
                 ["privacy.epsilon_cap = '9': Input should be a valid number"],
                 id="config-number-as-text"),
    pytest.param(config("[earnings]\nmin_publish_count = true\n"),
                 ["earnings.min_publish_count = True: Input should be a valid integer"],
                 id="config-number-as-boolean"),
    pytest.param(config("[earnings]\nbin_edges = [10000, 30000, 20000, 40000]\n"),
                 ["earnings.bin_edges must be strictly increasing (30000 then 20000)"],
                 id="config-bins-not-increasing"),
    pytest.param(config("[earnings]\nbin_edges = [5000, 20000, 40000]\n"),
                 ["earnings.bin_edges[0] must equal earnings.sample_floor"],
                 id="config-bins-not-at-floor"),
    pytest.param(config("[privacy]\nepsilon_cap = 2.0\n"),
                 ["planned total epsilon 7.5", "exceeds privacy.epsilon_cap 2"],
                 id="config-cap-below-plan"),
    pytest.param(config("privacy = 1\n"),
                 ["privacy = 1: must be a TOML table (a [section] or {{ key = value }})"],
                 id="config-section-not-a-table"),
    pytest.param(config("[privacy\nepsilon_cap = 2.0\n"),
                 ["{root}/release.toml: cannot read configuration: not valid TOML", "line 1"],
                 id="config-not-toml"),
    pytest.param(config(b"# r\xe9glage\n[privacy]\nepsilon_cap = 9.0\n"),
                 ["release.toml: cannot read configuration: not UTF-8 text (byte 0xe9 on line 1)"],
                 id="config-not-utf8"),
    pytest.param(no_config,
                 ["{root}/release.toml: cannot read configuration: file not found"],
                 id="config-missing"),
    # identifiers and destinations
    pytest.param(lambda root: {"--release-id": "../../escape"},
                 ["release id '../../escape' is not allowed: use 1 to 64 letters, digits"],
                 id="release-id-with-path"),
    pytest.param(lambda root: {"--release-id": "x" * 65},
                 ["is not allowed: use 1 to 64 letters"],
                 id="release-id-too-long"),
    pytest.param(a_file_named("afile", lambda path: {"--out": path / "release"}),
                 ["{root}/afile/release: {root}/afile is a file, not a folder"],
                 id="out-parent-is-a-file"),
    pytest.param(a_file_named("afile", lambda path: {"--store": path}),
                 ["cannot create a privacy store in {root}/afile"],
                 id="store-is-a-file"),
    # confidential inputs (--data)
    pytest.param(lambda root: {"--data": root / "nowhere"},
                 ["{root}/nowhere: data folder not found"],
                 id="data-folder-missing"),
    pytest.param(without_outcomes,
                 ["{root}/parquet-data: no outcomes.parquet, outcomes.csv or outcomes/ (a folder of Parquet files) found"],
                 id="data-outcomes-missing"),
    pytest.param(data(outcomes=cut_in_half),
                 ["{root}/parquet-data/outcomes.parquet: cannot read: not a readable Parquet file"],
                 id="parquet-truncated"),
    pytest.param(data(graduates=text_instead_of_parquet),
                 ["{root}/parquet-data/graduates.parquet: cannot read: not a readable Parquet file"],
                 id="parquet-really-text"),
    pytest.param(data(graduates=empty),
                 ["graduates.parquet: cannot read: not a readable Parquet file",
                  "Parquet file size is 0 bytes"],
                 id="parquet-zero-bytes"),
    pytest.param(data(outcomes=zero_rows),
                 ["{root}/parquet-data/outcomes.parquet: no rows; there is nothing to release"],
                 id="parquet-zero-rows"),
    pytest.param(data(graduates=cut_in_half, outcomes=text_instead_of_parquet),
                 ["graduates.parquet: cannot read", "outcomes.parquet: cannot read"],
                 id="parquet-both-files-reported"),
    pytest.param(data("csv", outcomes=empty),
                 ["{root}/csv-data/outcomes.csv: cannot read: the file is empty (0 bytes)"],
                 id="csv-zero-bytes"),
    pytest.param(data("csv", graduates=header_only),
                 ["{root}/csv-data/graduates.csv: no rows (only a header line)"],
                 id="csv-header-only"),
    pytest.param(data("csv", graduates=replace(b"00104800", b"0010480\xe9")),
                 ["{root}/csv-data/graduates.csv: cannot read: not UTF-8 text: byte 0xe9 on line 5",
                  "save the file as UTF-8"],
                 id="csv-latin1-code"),
    # codes are ASCII digits and letters, matched whole, nothing stripped (issue 31): the
    # same institution in other digits would be measured again as a new population
    pytest.param(data(graduates=recoded("institution", "00104800", "\u0660\u0660\u0661\u0660"
                                        "\u0664\u0668\u0660\u0660")),
                 ["{root}/parquet-data/graduates.parquet: input rejected",
                  "column institution: check str_matches('^[0-9]{{8}}$') failed, 3 bad row(s); "
                  "e.g. row 3: '\u0660\u0660\u0661\u0660\u0664\u0668\u0660\u0660'"],
                 id="institution-in-arabic-indic-digits"),
    pytest.param(data("csv", graduates=replace_every(b"00104800", "\uff10\uff10\uff11\uff10"
                                                     "\uff14\uff18\uff10\uff10".encode())),
                 ["{root}/csv-data/graduates.csv: input rejected",
                  "column institution: check str_matches('^[0-9]{{8}}$') failed, 3 bad row(s)"],
                 id="institution-in-full-width-digits"),
    pytest.param(data("csv", graduates=replace(b"00104800", b"00104800 ")),
                 ["{root}/csv-data/graduates.csv: input rejected",
                  "column institution: check str_matches('^[0-9]{{8}}$') failed, 1 bad row(s); "
                  "e.g. row 3: '00104800 '"],
                 id="institution-with-a-space"),
    pytest.param(data("csv", outcomes=utf16),
                 ["{root}/csv-data/outcomes.csv: cannot read: the file is UTF-16 text"],
                 id="csv-utf16"),
    pytest.param(data("csv", outcomes=append_row("6,1,42000.0,48,62,extra")),
                 ["{root}/csv-data/outcomes.csv: cannot read: 1 row(s) with a number of fields "
                  "other than the header's 5", "row 7 has 6 fields: '6,1,42000.0,48,62,extra'"],
                 id="csv-ragged-row"),
    pytest.param(data("csv", outcomes=cut_inside_last_row),
                 ["{root}/csv-data/outcomes.csv: cannot read: 1 row(s) with a number of fields "
                  "other than the header's 5", "row 6 has 2 fields: '5,1'"],
                 id="csv-cut-inside-last-row"),
    pytest.param(data("csv", outcomes=replace(b"years_after", b"person_id")),
                 ["{root}/csv-data/outcomes.csv: cannot read: the header names column(s) "
                  "person_id more than once"],
                 id="csv-duplicated-header"),
    pytest.param(both_formats,
                 ["{root}/parquet-data: both graduates.parquet and graduates.csv are there"],
                 id="data-parquet-and-csv"),
    pytest.param(empty_dataset_folder,
                 ["{root}/parquet-data/outcomes: a folder without *.parquet files"],
                 id="parquet-dataset-folder-empty"),
    # public reference files (--reference)
    pytest.param(lambda root: {"--reference": root / "nowhere"},
                 [f"{{root}}/nowhere/{J2J_FILE}: reference file not found",
                  f"{{root}}/nowhere/{COVERAGE_FILE}: reference file not found"],
                 id="reference-folder-missing"),
    pytest.param(reference(**{J2J_FILE: cut_in_half}),
                 [f"{{root}}/reference/{J2J_FILE}: cannot read: 1 row(s) with a number of "
                  "fields other than the header's 40", "(truncated or ragged file)"],
                 id="reference-j2j-truncated"),
    pytest.param(reference(**{J2J_FILE: empty}),
                 [f"{{root}}/reference/{J2J_FILE}: cannot read: the file is empty (0 bytes)"],
                 id="reference-j2j-empty"),
    pytest.param(config("[release]\nproduction = true\n"),
                 ["release.production = true, but the J2J, QCEW, state coverage, IPEDS, "
                  "hard-coded transitions file(s) are the packaged SYNTHETIC demo files: no "
                  "microdata was read and nothing was spent"],
                 id="production-with-demo-inputs"),
    # CIP vintages and the recast's inputs
    pytest.param(data(graduates=coded(5, "51.0808")),   # grad_year 2020: a CIP-2010-only code
                 ["{root}/parquet-data/graduates.parquet: input rejected",
                  "column cipcode, grad_year: check cipcode_in_vintage_of_grad_year failed, 1 "
                  "bad row(s); e.g. row 5"],
                 id="cip-code-of-the-other-vintage"),
    pytest.param(reference(**{"cip_hard_coded_transitions.csv": replace(b"43.04,0.15",
                                                                        b"43.04,0.25")}),
                 ["{root}/reference/cip_hard_coded_transitions.csv: input rejected",
                  "column cip2010, share: check shares_of_a_code_sum_to_1 failed, 2 bad row(s)"],
                 id="cip-hard-coded-shares-not-summing-to-1"),
    pytest.param(reference(**{"ipeds/C2015_A.csv": replace(b'"01.0101",1,5,', b'"01.0101",1,9,')}),
                 ["{root}/reference/ipeds/C2015_A.csv: input rejected",
                  "column AWLEVEL: check isin", "row 0: '9'"],
                 id="ipeds-unknown-award-level"),
    pytest.param(reference(**{"ipeds/HD2019.csv": lambda path: path.unlink()}),
                 ["{root}/reference/ipeds/HD2019.csv: IPEDS directory file not found"],
                 id="ipeds-directory-missing"),
    pytest.param(reference(**{"bls/cu.data.annual.AllItems.txt": replace(
                     b"CUUR0000SA0      \t2016\tM13\t     240.007\t\n", b"")}),
                 ["{root}/reference/bls/cu.data.annual.AllItems.txt: no CPI-U annual average "
                  "(CUUR0000SA0, M13) for 2016"],
                 id="cpi-without-the-bins-dollar-year"),
    pytest.param(reference(**{"bls/cu.data.annual.AllItems.txt": replace(b"     240.007",
                                                                         b"       0.001")}),
                 ["{root}/reference/bls/cu.data.annual.AllItems.txt: implausible CPI-U annual "
                  "averages (CUUR0000SA0, M13): 2016 = 0.001 after 2015 = 237.017 (-100.0%)"],
                 id="cpi-implausible-2016"),
    # employer-side protection of the flows (flows.mechanism)
    pytest.param(config('[flows]\nmechanism = "smooth-gamma"\nepsilon_per_tabulation = 0.3\n'),
                 ["{root}/release.toml: invalid configuration",
                  "smooth-gamma: 1 + alpha <= e^(epsilon/4) fails at alpha 0.1, epsilon 0.3: the "
                  "smallest epsilon for alpha 0.1 is 4 ln(1 + alpha) = 0.3812"],
                 id="employer-mechanism-infeasible"),
    pytest.param(both(data(), config('[flows]\nmechanism = "smooth-gamma"\n')),
                 ['{root}/parquet-data/outcomes.parquet: flows.mechanism = "smooth-gamma" protects '
                  "employers and needs the column employer_id"],
                 id="employer-mechanism-without-employer-id"),
    pytest.param(reference(j2jod=j2jod_downloads_with_a_bad_row),
                 ["{root}/reference/j2jod: input rejected",
                  "column geography_orig: check str_matches('^[0-9]{{2}}$') failed, 1 bad row(s); "
                  "e.g. row 6 (j2jod_ny_d_f_gs_ns_oslp_u.csv.gz row 0): '3'"],
                 id="reference-j2jod-folder-bad-row"),
    pytest.param(reference(**{COVERAGE_FILE: replace(b"\n06,", b"\n0\xe9,")}),
                 [f"{{root}}/reference/{COVERAGE_FILE}: cannot read: not UTF-8 text: byte 0xe9"],
                 id="reference-coverage-latin1"),
]


@pytest.fixture(scope="module")
def audit_store(tmp_path_factory) -> str:
    """One MLflow store (and privacy store beside it) for all the cases: each case is its
    own release id."""
    return f"sqlite:///{tmp_path_factory.mktemp('audit') / 'mlflow.db'}"


def speed(case):
    """The case as it is if refused on load (fast), else marked slow."""
    return case if case.id.startswith(REFUSED_AT_LOAD) else \
        pytest.param(*case.values, id=case.id, marks=pytest.mark.slow)


@pytest.mark.parametrize("make, expected", [speed(case) for case in CASES])
def test_bad_input_is_refused_and_nothing_is_published_or_spent(make: Make, expected: list[str],
                                                                tmp_path, audit_store, capsys,
                                                                request):
    release_id = f"bad-{request.node.callspec.id}"
    valid = write_releasable(tmp_path / "valid-data")
    options = {"--data": valid, **make(tmp_path)}
    out = tmp_path / "release"
    extra = tuple(str(v) for key, path in options.items() if key != "--data" for v in (key, path))
    code = run_release(options["--data"], out, SEED, audit_store, release_id, extra)

    err = capsys.readouterr().err
    assert code == 2, err
    assert "pseo-das release: FAILED, nothing was published." in err
    for fragment in expected:
        assert fragment.format(root=tmp_path) in err, f"{fragment!r} not in:\n{err}"
    assert not out.exists() and list(tmp_path.glob(f".{out.name}*")) == []
    client = mlflow.MlflowClient(audit_store)
    experiment = client.get_experiment_by_name("pseo-das quarterly release")
    runs = client.search_runs([experiment.experiment_id],
                              f"tags.release_id = '{release_id}'") if experiment else []
    for run in runs:  # a configuration refused on load has no run at all
        assert run.info.status == "FAILED" and "Error" in run.data.tags["failure"]
        assert not any(key.startswith("epsilon") for key in run.data.metrics)
    store = store_beside(audit_store)
    if (store / "store.sqlite").exists():
        with PrivacyStore.open(store) as opened:
            assert opened.attempts(release_id) == []


@pytest.mark.slow
def test_a_folder_as_tracking_store_is_refused_before_anything_is_created(tmp_path, capsys):
    """MLflow 3 no longer writes its file store: the release says what to use instead,
    before a privacy store, an MLflow run or a release folder exists."""
    data = tmp_path / "data"
    data.mkdir()
    write(data, valid_graduates(), valid_outcomes())
    out = tmp_path / "release"
    code = run_release(data, out, SEED, str(tmp_path / "mlruns"), "bad-tracking")
    err = capsys.readouterr().err
    assert code == 2, err
    assert "pseo-das release: FAILED, nothing was published." in err
    assert f"--tracking-uri sqlite:///{tmp_path / 'mlruns'}/mlflow.db" in err
    assert "Traceback" not in err
    assert not out.exists() and not (tmp_path / "mlruns").exists()
    assert not store_beside(str(tmp_path / "mlruns")).exists()   # --init-store created none


def test_expected_errors_are_logged_without_traceback():
    """Prefect's run logs drop a refused input's error line altogether (the CLI says it
    once); an unexpected error keeps its traceback; a withheld one has neither."""
    import io
    import logging

    from pseo_das.errors import withhold
    from pseo_das.tasks import _WithoutTraceback
    from pseo_das.tasks.inputs.ingest import InputValidationError
    stream = io.StringIO()
    logger = logging.getLogger("pseo-das-test-without-traceback")
    logger.propagate = False
    logger.addHandler(logging.StreamHandler(stream))
    without = _WithoutTraceback()
    without.expected = (InputValidationError,)
    logger.addFilter(without)
    for error in (InputValidationError("data.csv: bad row 3"), KeyError("surprise"),
                  withhold(ValueError("row 4: '424242'"))):
        try:
            raise error
        except Exception:
            logger.exception("Encountered exception during execution: %r", error)
    lines = stream.getvalue()
    assert "bad row 3" not in lines and lines.count("Traceback") == 1   # the KeyError's only
    assert "surprise" in lines
    assert "424242" not in lines and lines.index("Traceback") < lines.index("withheld")
