"""The MLflow tracking store as the privacy store's witness: every release logs the store's
id and the chain heads it read and wrote, so a store that was deleted and created again,
rewound to a backup or rewritten with a fresh chain disagrees with what earlier runs saw.
Also closes runs left RUNNING by a killed release. Privacy cost: none.
"""
from __future__ import annotations

import json
from pathlib import Path

from mlflow.entities import RunTag

from pseo_das.tasks.privacy.store import PrivacyStore, StoreBusy, store_exists, store_lock
from pseo_das.tasks.privacy.store_integrity import check_recorded_heads
from pseo_das.tasks.publication.release_files import MANIFEST

HEAD_PARAMS = {"read": "store_chain.read", "written": "store_chain.written"}
PUBLISHED_TAG = "store_chain.published"


def recorded_heads(params: dict[str, str], tags: dict[str, str]) -> dict[str, dict]:
    """The chain heads a run logged ({'read': {seq, sha256}, ...}; only those it has)."""
    heads = {name: json.loads(params[key]) for name, key in HEAD_PARAMS.items() if key in params}
    if PUBLISHED_TAG in tags:
        heads["published"] = json.loads(tags[PUBLISHED_TAG])
    return heads


def witness_problems(store: PrivacyStore, runs: list) -> list[str]:
    """What the earlier runs of this store recorded that the store contradicts."""
    problems, store_id = [], store.store_id
    for run in runs:
        params, tags = run.data.params, run.data.tags
        recorded_id = params.get("store_id")
        if recorded_id is None:       # a run that failed before it reached the store
            continue
        who = f"MLflow run {run.info.run_id} (release {params.get('release_id', '?')})"
        if recorded_id != store_id:
            problems.append(f"{who} used the privacy store with id {recorded_id}; the store now at "
                            f"{store.path} has id {store_id}: it was replaced (deleted and "
                            "created again?)")
            continue
        problems += check_recorded_heads(store, recorded_heads(params, tags), who)
    return problems


def close_abandoned_runs(client, runs: list, closed_by: str) -> list[str]:
    """Runs of this store still RUNNING while the caller holds the store's lock belong to
    killed releases: a run whose release folder was published (its manifest names the run)
    is closed FINISHED, any other FAILED. Returns what was done, one line per run."""
    done = []
    for run in runs:
        if run.info.status != "RUNNING":
            continue
        run_id, out_dir = run.info.run_id, Path(run.data.params.get("out_dir", ""))
        try:
            manifest = json.loads((out_dir / MANIFEST).read_text())
        except (OSError, ValueError):
            manifest = {}
        if manifest.get("mlflow_run_id") == run_id:
            client.log_batch(run_id, tags=[RunTag("published_to", str(out_dir)),
                                           RunTag("repaired_by", closed_by)])
            client.set_terminated(run_id, "FINISHED")
            done.append(f"MLflow run {run_id}: its release was published to {out_dir} but the "
                        "run was left RUNNING (killed); closed FINISHED")
        else:
            client.log_batch(run_id, tags=[RunTag("failure", "killed before it finished"),
                                           RunTag("repaired_by", closed_by)])
            client.set_terminated(run_id, "FAILED")
            done.append(f"MLflow run {run_id}: left RUNNING by a killed release that published "
                        "nothing; closed FAILED")
    return done


def repair_if_abandoned(client, release_run_id: str, store_path: Path | None) -> str | None:
    """`pseo-das audit` of a release whose run is still RUNNING: if no release holds the
    store's lock, the run's release was killed after publication or before; close the run
    as `close_abandoned_runs` does. Returns what was done (None: nothing to do)."""
    run = client.get_run(release_run_id)
    if run.info.status != "RUNNING" or store_path is None or not store_exists(store_path):
        return None
    try:
        with store_lock(store_path):
            done = close_abandoned_runs(client, [client.get_run(release_run_id)], "pseo-das audit")
    except StoreBusy:
        return None       # a release is running against the store now: leave its run alone
    return done[0] if done else None
