"""The MLflow tracking store as the privacy store's witness: every release logs the store's
id and the chain heads it read and wrote, so a store that was deleted and created again,
rewound to a backup or rewritten with a fresh chain disagrees with what earlier runs saw.
Also closes runs left RUNNING by a killed release. Privacy cost: none.
"""
from __future__ import annotations

import json
import uuid
from pathlib import Path

from mlflow.entities import RunTag

from pseo_das.tasks.privacy.store import (PrivacyStore, StoreBusy, store_exists, store_lock,
                                          utc_now)
from pseo_das.tasks.privacy.store_integrity import check_recorded_heads
from pseo_das.tasks.publication.release_files import MANIFEST

HEAD_PARAMS = {"read": "store_chain.read", "written": "store_chain.written"}
PUBLISHED_TAG = "store_chain.published"
DISOWNED_TAG = "store_chain.disowned"      # set by `pseo-das store adopt` on a fork's runs


def recorded_heads(params: dict[str, str], tags: dict[str, str]) -> dict[str, dict]:
    """The chain heads a run logged ({'read': {seq, sha256}, ...}; only those it has)."""
    heads = {name: json.loads(params[key]) for name, key in HEAD_PARAMS.items() if key in params}
    if PUBLISHED_TAG in tags:
        heads["published"] = json.loads(tags[PUBLISHED_TAG])
    return heads


def witness_problems(store: PrivacyStore, runs: list) -> list[str]:
    """What the earlier runs of this store (runs_of_store: at its path, or with its id)
    recorded that the store contradicts. A run of a store with the same id elsewhere (a copy,
    or the store before a move) must agree with it too: two stores of one id that have
    diverged are a fork, refused until the agency adopts one (`pseo-das store adopt`, which
    marks the other's runs DISOWNED_TAG)."""
    problems, store_id = [], store.store_id
    for run in runs:
        params, tags = run.data.params, run.data.tags
        recorded_id = params.get("store_id")
        who = f"MLflow run {run.info.run_id} (release {params.get('release_id', '?')})"
        if DISOWNED_TAG in tags and recorded_id == store_id \
                and params.get("store") == str(store.path):
            adoption = json.loads(tags[DISOWNED_TAG])
            problems.append(f"{who} of this store was disowned: the agency adopted the copy at "
                            f"{adoption['store']} as the store of id {store_id} (by "
                            f"{adoption['by']}, {adoption['at']}: {adoption['reason']})")
            continue
        if recorded_id is None or DISOWNED_TAG in tags:   # failed before the store; disowned
            continue
        if recorded_id != store_id:
            problems.append(f"{who} used the privacy store with id {recorded_id}; the store now at "
                            f"{store.path} has id {store_id}: it was replaced (deleted and "
                            "created again?)")
            continue
        disagree = check_recorded_heads(store, recorded_heads(params, tags), who)
        if disagree and fork_runs(store, [run]):
            problems.append(
                f"{who} used a store with this store's id {store_id} at {params['store']}, and "
                f"the two have diverged ({disagree[0].split(': ', 1)[-1]}): a copy or fork of "
                "one store, each spending its own budget. Nothing is released from either "
                "until the agency names the store: `pseo-das store adopt DIR --by WHO "
                "--reason WHY` (recorded) disowns the runs of the other")
        else:
            problems += disagree
    return problems


def plaintext_seed_runs(runs: list) -> list[str]:
    """Runs that logged the release seed itself (param `release_seed`, written by versions
    before the run log held only its SHA-256): whoever reads them can regenerate the noise.
    MLflow params cannot be deleted; the agency restricts or deletes those runs."""
    return [f"MLflow run {run.info.run_id} (release {run.data.params.get('release_id', '?')}) "
            "logged the release seed in plaintext (param release_seed, an earlier version): "
            "whoever reads it can regenerate the release's noise; restrict access to this run "
            "or delete it (`mlflow gc`)" for run in runs if "release_seed" in run.data.params]


def fork_runs(store: PrivacyStore, runs: list) -> list:
    """The runs of a copy of this store elsewhere whose heads disagree with it."""
    return [run for run in runs
            if run.data.params.get("store_id") == store.store_id
            and DISOWNED_TAG not in run.data.tags
            and run.data.params.get("store", str(store.path)) != str(store.path)
            and check_recorded_heads(store, recorded_heads(run.data.params, run.data.tags), "")]


def adopt_store(store: PrivacyStore, client, runs: list, by: str, reason: str) -> list[str]:
    """The agency names `store` as the store of its id: the runs of its diverged copies are
    tagged DISOWNED_TAG (the witness skips them from now on), and the adoption (who, why,
    where, the chain head, the runs disowned) is recorded in the store's chain. Returns the
    disowned run ids (nothing is recorded when no copy has diverged)."""
    forks = fork_runs(store, runs)
    if not forks:
        return []
    disowned = sorted(run.info.run_id for run in forks)
    adoption = {"by": by, "reason": reason, "at": utc_now(), "store": str(store.path),
                "head": store.head().as_dict(), "disowned_runs": disowned}
    store.record_info(f"adoption.{uuid.uuid4().hex}", json.dumps(adoption, sort_keys=True))
    for run_id in disowned:
        client.set_tag(run_id, DISOWNED_TAG, json.dumps({k: v for k, v in adoption.items()
                                                         if k != "disowned_runs"}))
    return disowned


def close_abandoned_runs(client, runs: list, closed_by: str, store_path: Path) -> list[str]:
    """Runs of the store at `store_path` still RUNNING while the caller holds its lock belong
    to killed releases: a run whose release folder was published (its manifest names the
    run) is closed FINISHED, any other FAILED. Returns what was done, one line per run."""
    done = []
    for run in runs:
        if run.info.status != "RUNNING" or run.data.params.get("store") != str(store_path):
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
            done = close_abandoned_runs(client, [client.get_run(release_run_id)], "pseo-das audit",
                                        store_path)
    except StoreBusy:
        return None       # a release is running against the store now: leave its run alone
    return done[0] if done else None
