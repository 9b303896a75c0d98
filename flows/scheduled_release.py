"""Scheduled quarterly releases: a Prefect deployment of the quarterly release.

The deployment runs `scheduled_quarterly_release` at 06:00 (America/New_York) on the 15th of
January, April, July and October. Each run names its release after the quarter of its
scheduled time (e.g. 2027Q1) and publishes to RELEASES_DIR/<release id>. A failed run is
retried (flow retries): the retry reruns the same release id, which the privacy
store recognises, so it draws the same noise and spends nothing twice; a release already
complete on disk is left as it is.
"""
from __future__ import annotations

from datetime import datetime
from pathlib import Path

from prefect.client.schemas.schedules import CronSchedule
from prefect.runtime import flow_run

from pseo_das.config import load_config
from pseo_das.flows.quarterly_release import quarterly_release
from pseo_das.tasks import release_flow

QUARTERLY_CRON = "0 6 15 1,4,7,10 *"
TIMEZONE = "America/New_York"
RETRIES, RETRY_DELAY_SECONDS = 2, 600
DEPLOYMENT_NAME = "quarterly"


def quarter_release_id(when: datetime) -> str:
    """'2027Q1' for any time in January-March 2027."""
    return f"{when.year}Q{(when.month - 1) // 3 + 1}"


@release_flow("scheduled_quarterly_release", retries=RETRIES,
              retry_delay_seconds=RETRY_DELAY_SECONDS)
def scheduled_quarterly_release(data_dir: str, releases_dir: str, config_path: str | None = None,
                                reference_dir: str | None = None, tracking_uri: str | None = None,
                                release_id: str | None = None, store: str | None = None) -> dict:
    """One scheduled quarterly release; the release id defaults to the scheduled quarter.
    With `release.require_review` it is held for review (out_dir: the review folder)."""
    release_id = release_id or quarter_release_id(flow_run.scheduled_start_time or datetime.now())
    config = Path(config_path) if config_path else None
    result = quarterly_release(Path(data_dir), Path(releases_dir) / release_id, None, release_id,
                               config, tracking_uri,
                               Path(reference_dir) if reference_dir else None,
                               Path(store) if store else None,
                               hold_for_review=load_config(config).release.require_review)
    return {"release_id": result.release_id, "out_dir": str(result.out_dir),
            "mlflow_run_id": result.mlflow_run_id, "new_epsilon": result.summary["new_epsilon"],
            "already_published": result.already_published,
            "held_for_review": result.held is not None}


def quarterly_deployment(data_dir: Path, releases_dir: Path, config_path: Path | None = None,
                         reference_dir: Path | None = None, tracking_uri: str | None = None,
                         store: Path | None = None, cron: str = QUARTERLY_CRON, timezone: str = TIMEZONE):
    """The deployment: scheduled quarterly, parameterised by data and release locations."""
    parameters = {"data_dir": str(Path(data_dir).resolve()),
                  "releases_dir": str(Path(releases_dir).resolve())}
    if config_path:
        parameters["config_path"] = str(Path(config_path).resolve())
    if reference_dir:
        parameters["reference_dir"] = str(Path(reference_dir).resolve())
    if tracking_uri:
        parameters["tracking_uri"] = tracking_uri
    if store:
        parameters["store"] = str(Path(store).resolve())
    return scheduled_quarterly_release.to_deployment(
        name=DEPLOYMENT_NAME, schedules=[CronSchedule(cron=cron, timezone=timezone)],
        parameters=parameters, tags=["pseo-das", "quarterly"],
        description="PSEO quarterly release (earnings and employment flows) under differential "
                    "privacy; retried runs reuse the release's seed and spend nothing twice.")
