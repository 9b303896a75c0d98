"""End to end: real Prefect flow runs (test harness), a real MLflow store, real files."""
from __future__ import annotations

import gzip
import hashlib
import json
import zipfile
from fractions import Fraction
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as csv
import pyarrow.parquet as pq
import pytest

from conftest import SEED_A, SEED_B, csv_fields, public_table, run_release, without_extras
from pseo_das.tasks.audit.run_fingerprints import read_fingerprints
from pseo_das.tasks.privacy.release_seed import seed_sha256
from pseo_das.config import load_config
from pseo_das.schemas.outputs import pseoh_schema
from pseo_das.schemas.pseo_layout import Product, check_public_folder, layout

pytestmark = pytest.mark.slow  # system tests: real releases (make test-fast leaves them out)

CFG = load_config()
PUBLIC_FILES = ["release_notes.html", "release_notes.md"]
ALL_FILES = ["datapackage.json", "pseo_all_institutions.csv", "pseo_all_partners.txt",
             "pseoe_all.csv.gz", "pseoe_all.xlsx", "pseof_all.csv.gz", "pseoh_all.csv.gz",
             "version_pseo.txt"]
PARQUET_FILES = ["pseo_all_institutions.parquet", "pseoe_all.parquet", "pseof_all.parquet",
                 "pseoh_all.parquet"]   # all/parquet/: pseo-das's extension
STATE_FOLDERS = ["co", "mi", "tx", "va", "wi"]   # the synthetic institutions' states
IDENTIFIERS = list(layout(Product.PSEOE).identifiers)
TEXT_COLUMNS = {c: str for c in IDENTIFIERS} | {"agg_level_pseo": np.int64,
                                                "grad_cohort_years": np.int64}


def read_pseoe(path: Path) -> pd.DataFrame:
    frame = pd.read_csv(path, dtype=TEXT_COLUMNS)
    value_columns = [c for c in frame.columns if c.startswith("y")]
    return frame.astype({c: "Int64" for c in value_columns})


def readable_bytes(path: Path) -> bytes:
    """A file's content as a reader sees it: gunzipped, every member of a workbook, a
    Parquet table as CSV text."""
    if path.suffix == ".parquet":
        text = pa.BufferOutputStream()
        csv.write_csv(pq.read_table(path), text)
        return text.getvalue().to_pybytes()
    if path.suffix == ".gz":
        return gzip.decompress(path.read_bytes())
    if path.suffix == ".xlsx":
        with zipfile.ZipFile(path) as book:
            return b"".join(book.read(name) for name in book.namelist())
    return path.read_bytes()


def read_pseoh(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, dtype=TEXT_COLUMNS)


def test_outputs_exist_and_pass_output_schemas(releases):
    root, _ = releases
    release = root / "a"
    public = release / "public"
    assert sorted(p.name for p in public.iterdir() if p.is_file()) == PUBLIC_FILES
    assert sorted(p.name for p in public.iterdir() if p.is_dir()) == \
        sorted(["all", "explorer"] + STATE_FOLDERS)   # explorer: tests/test_explorer.py
    assert sorted(p.name for p in (public / "all").iterdir()) == sorted(ALL_FILES + ["parquet"])
    assert sorted(p.name for p in (public / "all" / "parquet").iterdir()) == PARQUET_FILES
    versions = (public / "all" / "version_pseo.txt").read_text()
    assert versions.startswith("PSEOE CO 08 2001-")      # release 2026Q4-test: quarter 2026Q4
    assert versions == "".join((public / st / "version_pseo.txt").read_text()
                               for st in STATE_FOLDERS)   # all/ consolidates the state files
    assert sorted(p.name for p in (public / "co").iterdir()) == [
        "pseo_co_institutions.csv", "pseo_co_partners.txt", "pseoe_co.csv.gz", "pseof_co.csv.gz",
        "version_pseo.txt"]
    for product in ("pseoe", "pseof"):   # every row of the _all file in exactly one state file
        rows = sum(len(pd.read_csv(public_table(release, f"{product}_{st}.csv"), usecols=[0]))
                   for st in STATE_FOLDERS)
        assert rows == len(pd.read_csv(public_table(release, f"{product}_all.csv"), usecols=[0]))
    assert sorted(p.name for p in (release / "internal").iterdir()) == \
        ["config.json", "drb_report.html", "drb_report.md", "explorer", "flows_state.parquet",
         "ledger.csv",
         "lifetime_budget.csv", "manifest.json", "release_summary.json"]
    report = check_public_folder(release / "public")
    assert report.ok, "\n".join(map(str, report.problems))
    pseoe = read_pseoe(public_table(release, "pseoe_all.csv"))
    pseoh = read_pseoh(public_table(release, "pseoh_all.csv"))
    pseoh_schema().validate(pseoh, lazy=True)
    assert set(pseoe["inst_level"]) == {"I", "S"} and set(pseoe["cip_level"]) == {"A", "2", "4"}
    assert "0000" in set(pseoe["grad_cohort"])
    statuses = pd.unique(pseoe.filter(regex="^status_.*_(earnings|grads_earn)$").to_numpy().ravel())
    assert set(statuses) == {1, -1, 5}  # some published, some not yet observable, some suppressed
    assert not list(root.glob(".*staging*"))


# 2023 dollars per 2016 dollar: the BLS CPI-U annual averages (CUUR0000SA0, M13)
DOLLARS_2016_TO_2023 = float(Fraction("304.702") / Fraction("240.007"))


def hand_percentile(q: list[int], lower: list[int], upper: list[int], y: int) -> float:
    """The published rule written out longhand, one bin at a time: the percentile in the
    bins' 2016 dollars, then in 2023 dollars, rounded."""
    total = sum(q)
    cumulative = 0
    for j in range(len(q)):
        before = cumulative
        cumulative += q[j]
        if before / total < y / 100 <= cumulative / total:
            value = lower[j] + (upper[j] - lower[j]) * (y / 100 * total - before) / q[j]
            return int(np.floor(DOLLARS_2016_TO_2023 * value + 0.5))
    raise AssertionError("no bin found")


def test_published_percentiles_recompute_by_hand_from_published_histograms(releases):
    root, _ = releases
    pseoe = read_pseoe(public_table(root / "a", "pseoe_all.csv"))
    pseoh = read_pseoh(public_table(root / "a", "pseoh_all.csv"))
    ids = IDENTIFIERS
    histograms = {key: group.sort_values("bin") for key, group in pseoh.groupby(ids + ["years_after"])}
    checked = 0
    for row in pseoe.itertuples(index=False):
        for k in CFG.cells.years_after:
            if getattr(row, f"status_y{k}_earnings") != 1:
                assert pd.isna(getattr(row, f"y{k}_p50_earnings"))
                continue
            h = histograms[tuple(getattr(row, c) for c in ids) + (k,)]
            q, lo, hi = h["noisy_count"].tolist(), h["bin_lower"].tolist(), h["bin_upper"].tolist()
            assert getattr(row, f"y{k}_grads_earn") == sum(q) >= CFG.earnings.min_publish_count
            for p in CFG.earnings.percentiles:
                assert getattr(row, f"y{k}_p{p}_earnings") == hand_percentile(q, lo, hi, p)
            checked += 1
    assert checked > 100


def test_demo_inputs_announce_themselves(releases):
    root, _ = releases
    summary = json.loads((root / "a" / "internal" / "release_summary.json").read_text())
    assert summary["demo_inputs"] == ["J2J", "QCEW", "state coverage", "IPEDS",
                                      "hard-coded transitions"]
    for document in ("public/release_notes.md", "internal/drb_report.md"):
        text = (root / "a" / document).read_text()
        assert "> **Demo inputs.** This release used the packaged **SYNTHETIC** demo files for: " \
               "J2J, QCEW, state coverage, IPEDS, hard-coded transitions." in text


def test_the_notes_state_both_dollar_years_and_the_cpi_values(releases):
    root, _ = releases
    notes = (root / "a" / "public" / "release_notes.md").read_text()
    assert "**2016 dollars** (technical appendix A.2)" in notes and "are in **2023 dollars**" in notes
    assert "CPI-U(2023) / CPI-U(2016) = 304.702 / 240.007" in notes


def test_same_seed_same_bytes_other_seed_other_bytes(releases):
    root, _ = releases
    for name in PUBLIC_FILES + [f"all/{name}" for name in ALL_FILES] + \
            [f"all/parquet/{name}" for name in PARQUET_FILES]:   # gzip: fixed header
        assert (root / "a" / "public" / name).read_bytes() == (root / "a_again" / "public" / name).read_bytes(), name
    for name in ("pseoe_all.csv", "pseoh_all.csv"):
        assert public_table(root / "a", name).read_bytes() != public_table(root / "b", name).read_bytes()


def test_seed_is_never_published_only_its_hash(releases):
    root, _ = releases
    for path in (root / "a").rglob("*"):
        if path.is_file():
            assert SEED_A.encode() not in readable_bytes(path), path
    notes = (root / "a" / "public" / "release_notes.md").read_text()
    assert hashlib.sha256(bytes.fromhex(SEED_A)).hexdigest() in notes


def test_manifest_fingerprints_every_file(releases):
    root, _ = releases
    release = root / "a"
    manifest = json.loads((release / "internal" / "manifest.json").read_text())
    files = {str(p.relative_to(release)) for p in release.rglob("*") if p.is_file()} - {"internal/manifest.json"}
    assert set(manifest["files"]) == files
    for name, digest in manifest["files"].items():
        assert hashlib.sha256((release / name).read_bytes()).hexdigest() == digest


def test_ledger_and_budget(releases):
    root, _ = releases
    ledger = pd.read_csv(root / "a" / "internal" / "ledger.csv")
    measured = ledger[ledger["epsilon"] > 0].set_index("tabulation_id")
    assert sorted(measured.index) == sorted([f"earnings.I.cip4.y{k}" for k in (1, 5, 10)]
                                            + [f"flows.I.cip2.y{k}" for k in (1, 5, 10)]
                                            + [f"flows_total.I.cip2.y{k}" for k in (1, 5, 10)])
    assert (measured["sensitivity"] == 1).all()
    assert set(measured.groupby("product")["n_bins"].unique().map(tuple)) == {(21,), (1021,), (1,)}
    assert measured.groupby("product")["epsilon"].sum().to_dict() == \
        {"earnings histograms": 3.0, "employment flows": pytest.approx(3.6),
         "employment flows origin counts": pytest.approx(0.9)}
    assert ledger["epsilon"].sum() == pytest.approx(7.5)
    assert ledger["epsilon"].sum() <= CFG.privacy.epsilon_cap
    derived = ledger[ledger["epsilon"] == 0]
    assert derived["derived_from"].isin(ledger["tabulation_id"]).all()
    # earnings sums per years-after (institution CIP 2 and A, state x 3 CIP levels, all
    # cohorts x 6); flows and origin-count all-fields sums; flows corrections; CIP recasts
    # (earnings, flows and origin counts)
    assert len(derived) == 3 * (2 + 3 + 6) + 3 + 3 + 6 + 9
    drb = (root / "a" / "internal" / "drb_report.md").read_text()
    assert "noisy values drawn = noisy values recorded in the ledger | passed" in drb
    assert "FAILED" not in drb


def test_mlflow_run_has_the_audit_trail(releases):
    root, uri = releases
    client = mlflow.MlflowClient(uri)
    manifest = json.loads((root / "a" / "internal" / "manifest.json").read_text())
    drb = (root / "a" / "internal" / "drb_report.md").read_text()
    run_id = next(line.split("`")[1] for line in drb.splitlines() if line.startswith("| MLflow run id"))
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    params = run.data.params
    assert params["release_seed_sha256"] == seed_sha256(bytes.fromhex(SEED_A))
    assert "release_seed" not in params and params["release_id"] == "2026Q4-test"
    # the run log is handed to auditors: the seed is nowhere in the tracking store, its
    # artifacts, the release folders or the privacy store (which keeps it sealed)
    files = [p for p in root.rglob("*") if p.is_file()]
    assert len(files) > 100 and not [p for p in files if SEED_A.encode() in p.read_bytes()
                                     or bytes.fromhex(SEED_A) in p.read_bytes()]
    assert set(CFG.flat()) <= set(params)
    metrics = run.data.metrics
    assert metrics["epsilon.total"] == 7.5 and metrics["epsilon.earnings.I.cip4.y5"] == 1.0
    assert metrics["epsilon.flows.I.cip2.y5"] == 1.2
    assert metrics["epsilon.flows_total.I.cip2.y5"] == 0.3
    assert metrics["flows.units_removed.flows.I.cip2.y1"] > 0
    assert metrics["flows.division_flows_suppressed"] > 0
    assert metrics["cells.suppressed"] > 0
    # the fingerprints: one artifact and a few short tags, not a tag per file (issue 36)
    logged = read_fingerprints(uri, run)
    assert logged.outputs == manifest["files"] and len(logged.inputs) == 48
    assert logged.versions["mlflow"] == mlflow.__version__
    assert run.data.tags["manifest_sha256"] == hashlib.sha256(
        (root / "a" / "internal" / "manifest.json").read_bytes()).hexdigest()
    assert not [k for k in run.data.tags if k.startswith(("output_sha256.", "input_sha256."))]
    assert len(run.data.tags) < 30, sorted(run.data.tags)
    artifacts = {a.path for folder in ("audit", "internal", "public", "public/all")
                 for a in client.list_artifacts(run_id, folder)}
    assert {"internal/ledger.csv", "internal/drb_report.html", "internal/manifest.json",
            "internal/config.json", "public/all/pseoe_all.csv.gz",
            "public/release_notes.html", "audit/fingerprints.json",
            "audit/ledger_table.json"} <= artifacts
    table = json.loads(Path(client.download_artifacts(run_id, "audit/ledger_table.json")).read_text())
    ledger_rows = pd.DataFrame(table["data"], columns=table["columns"])
    assert "earnings.I.cip4.y1" in set(ledger_rows["tabulation_id"])
    ledger_input, = run.inputs.dataset_inputs          # the UI's Datasets column
    assert ledger_input.dataset.name == "privacy-ledger"
    assert json.loads(ledger_input.dataset.profile)["num_rows"] == len(ledger_rows)


def test_existing_destination_is_refused(releases, synthetic_dir):
    root, uri = releases
    before = public_table(root / "a", "pseoe_all.csv").read_bytes()
    assert run_release(synthetic_dir, root / "a", SEED_B, uri) == 2
    assert public_table(root / "a", "pseoe_all.csv").read_bytes() == before


def test_configured_cip_levels_and_budget_cap(tmp_path, tracking_uri, capsys):
    """Of the tests' tiny data set, without the extras: the ledger and the notes do not
    depend on the data's size."""
    from test_ingest import write_releasable
    data = write_releasable(tmp_path / "data")
    measure2 = without_extras(tmp_path / "measure2.toml", '[privacy]\nepsilon_per_tabulation = 0.5\n'
                              'cip_levels = { "4" = "measure", "2" = "measure", "A" = "derive" }\n')
    assert run_release(data, tmp_path / "r", SEED_A, tracking_uri, extra=measure2) == 0
    printed = capsys.readouterr().out   # names every entry of the two folders it made
    listed = printed[printed.index("public files:"):printed.index("privacy store:")]
    entries = [p.name + "/" * p.is_dir() for folder in ("public", "internal")
               for p in (tmp_path / "r" / folder).iterdir() if len(p.name) != 2]   # not states
    assert entries and not [e for e in entries
                            if e not in listed and e.replace(".md", ".html/.md") not in listed
                            and e.replace(".html", ".html/.md") not in listed], entries
    ledger = pd.read_csv(tmp_path / "r" / "internal" / "ledger.csv")
    earnings = ledger[ledger["product"] == "earnings histograms"]
    assert earnings["epsilon"].sum() == pytest.approx(3.0)  # 3 years x 2 measured levels x 0.5
    assert set(earnings.loc[earnings["epsilon"] > 0, "tabulation_id"].str.split(".").str[2]) == {"cip4", "cip2"}
    assert ledger.set_index("tabulation_id").loc["earnings.I.cipA.y1", "derived_from"] == "earnings.I.cip2.y1"
    notes = (tmp_path / "r" / "public" / "release_notes.md").read_text()
    assert "total epsilon = 7.5**" in notes  # and 4.5 for the flows

    over = tmp_path / "over.toml"
    over.write_text("[privacy]\nepsilon_per_tabulation = 4.0\n")
    assert run_release(data, tmp_path / "r2", SEED_A, tracking_uri,
                       extra=("--config", str(over))) == 2
    assert "exceeds privacy.epsilon_cap" in capsys.readouterr().err
    assert not (tmp_path / "r2").exists()


def test_release_notes_carry_a_certificate(releases):
    root, _ = releases
    notes = (root / "a" / "public" / "release_notes.md").read_text()
    config = json.loads((root / "a" / "internal" / "config.json").read_text())
    config_sha256 = hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()
    certificate = notes[notes.index("## Certificate"):notes.index("## What is published")]
    assert "| release id | `2026Q4-test` |" in certificate
    assert f"| configuration SHA-256 | `{config_sha256}`" in certificate
    assert hashlib.sha256(bytes.fromhex(SEED_A)).hexdigest() in certificate
    assert ("total epsilon **7.5** over 9 measured tabulations (earnings histograms 3; "
            "employment flows 3.6; employment flows origin counts 0.9)") in certificate
    assert "pseo-das audit" in certificate


def test_drb_report_has_an_accuracy_section_from_published_histograms(releases):
    root, _ = releases
    drb = (root / "a" / "internal" / "drb_report.md").read_text()
    section = drb[drb.index("## Expected accuracy of the published percentiles"):drb.index("## Suppression")]
    rows = [line.split(" | ") for line in section.splitlines() if line.startswith("| 30 and over |")]
    assert [row[1] for row in rows] == ["25", "50", "75"]
    assert all(0.5 < float(row[3]) <= 1.0 for row in rows)  # mean relative accuracy
    assert "| under 30 |" not in section  # only published cells


def test_every_stage_is_its_own_named_task_run(releases):
    """The Prefect API shows each stage of a release as a task run of its own, in the
    release's flow run: no sub-flow only groups them (each costs API round trips). The
    release of seed B in a store of its own measures everything (a release that reuses
    every measurement runs no measuring or keeping task)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (FlowFilter, FlowFilterName, FlowRunFilter,
                                                FlowRunFilterId, FlowRunFilterParentFlowRunId)

    with get_client(sync_client=True) as client:
        release, = [run for run in client.read_flow_runs(flow_filter=FlowFilter(
            name=FlowFilterName(any_=["quarterly_release"])), limit=200)
            if run.parameters.get("release_id") == "2026Q4-other"]   # measures everything
        task_runs = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(
            any_=[release.id])))
        subflows = client.read_flow_runs(flow_run_filter=FlowRunFilter(
            parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[release.id])))
    assert subflows == []
    names = {run.name.rsplit("-", 1)[0] for run in task_runs}
    assert {"validate and count the inputs", "load reference inputs", "release plan",
            "measure earnings histograms", "measure employment flows",
            "keep measurements in the privacy store", "keep publication record",
            "read the earnings measurements from the store",
            "read the flows measurements from the store", "derive earnings histograms",
            "build public earnings histograms", "build public earnings tables",
            "derive employment flows", "correct employment flows",
            "build public flows tables", "write the earnings files", "write the flows files",
            "write release files",
            "record audit run"} <= names


def test_the_docs_consumer_script_finds_rows(releases, tmp_path):
    """The outputs page's script (docs/reference/outputs.md) reads pseoe_all.csv as
    published consumers do (codes as text,
    grad_cohort 0000, inst_level I, cipcode 00, status 1) and finds rows."""
    import re
    import subprocess
    import sys

    page = (Path(__file__).resolve().parent.parent / "docs" / "reference" / "outputs.md").read_text()
    script = re.search(r"<!-- consumer-script -->\n```python\n(.*?)```", page, re.S).group(1)
    assert len(script.strip().splitlines()) <= 10
    (tmp_path / "consumer.py").write_text(script)
    root, _ = releases
    done = subprocess.run([sys.executable, str(tmp_path / "consumer.py"),
                           str(root / "a" / "public")], capture_output=True, text=True, check=True)
    found = int(done.stdout.split()[0])
    pseoe = pd.read_csv(public_table(root / "a", "pseoe_all.csv"), dtype=str)
    assert found == ((pseoe["agg_level_pseo"] == "38") & (pseoe["status_y1_earnings"] == "1")).sum()
    assert found > 0


def test_an_independent_check_against_the_schema_label_files(releases):
    """Written without the validator: every level flagged for the product is present, each
    row's levels are its aggregation level's, and every code is in its label file."""
    labels = Path(__file__).resolve().parent.parent / "pseo_das" / "reference" / "lehd-schema-v4.14.0"

    def label(name: str) -> pd.DataFrame:
        return pd.read_csv(labels / name, dtype=str, keep_default_na=False, encoding="utf-8-sig")

    levels, cip = label("label_agg_level_pseo.csv"), label("label_cipcode.csv")
    codes = {"D": set(label("label_geography_division.csv")["geography"]) - {"Z"}, "N": {"00"}}
    industries = label("label_industry.csv")
    sectors = {"A": {"00"}, "S": set(industries.loc[industries["ind_level"] == "S", "industry"])}
    states = set(label("label_fipsnum.csv").query("geo_level == 'S'")["geography"])
    root, _ = releases
    for product in ("pseoe", "pseof"):
        published = csv_fields(public_table(root / "a", f"{product}_all.csv")).to_pandas()
        variables = label(f"variables_{product}.csv")
        assert list(published.columns) == (list(label("lehd_identifiers_pseo.csv")["Variable"])
                                           + list(variables["Indicator Variable"])
                                           + list(dict.fromkeys(variables["Status Flag"])))
        flagged = levels[levels[product] == "1"]
        assert set(published["agg_level_pseo"].unique()) == set(flagged["agg_level_pseo"])
        rows = published.merge(flagged, on="agg_level_pseo", suffixes=("", "_of_level"))
        for column in ("inst_level", "cip_level", "geo_level", "ind_level"):
            assert (rows[column] == rows[f"{column}_of_level"]).all(), (product, column)
        assert ((rows["grad_cohort"] == "0000") == (rows["by_grad_cohort"] == "0")).all()
        pairs = rows[["cipcode", "cip_level"]].drop_duplicates()
        assert set(zip(pairs["cipcode"], pairs["cip_level"])) <= set(zip(cip["cipcode"], cip["cip_level"]))
        assert set(rows.loc[rows["inst_level"] == "S", "institution"]) <= states
        assert rows.loc[rows["inst_level"] == "I", "institution"].str.fullmatch(r"\d{8}").all()
        for level, allowed in codes.items():
            assert set(rows.loc[rows["geo_level"] == level, "geography"]) <= allowed
        for level, allowed in sectors.items():
            assert set(rows.loc[rows["ind_level"] == level, "industry"]) <= allowed
        flags = published.filter(like="status_").filter(regex="^(?!.*ipeds)")
        assert set().union(*(flags[column].unique() for column in flags)) <= {"-1", "1", "5"}
