"""The fingerprints of a release's MLflow run: the SHA-256 of every input file read and
every file written, and the package versions, as one JSON artifact (`audit/fingerprints.json`)
with a few short tags an auditor filters on, instead of a tag per file (issue 36, item 5:
~96 tags whose keys the MLflow UI cut to `input_sha25...`).

Tags: `fingerprints` (the SHA-256 of the artifact's bytes: the audit refuses an
artifact that does not match it), `manifest_sha256` (of the release's
internal/manifest.json: find the run of a release folder by it), `files.inputs` and
`files.outputs` (how many). Runs logged before keep their `input_sha256.*`,
`output_sha256.*` and `version.*` tags, which `read_fingerprints` still reads.
Privacy cost: none (hashes of files).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from mlflow.entities import Run
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from pseo_das.errors import PseoDasError

ARTIFACT = "audit/fingerprints.json"
SHA_TAG = "fingerprints"
MANIFEST_TAG = "manifest_sha256"
LEGACY_OUTPUT_TAG = "output_sha256."
LEGACY_INPUT_TAG = "input_sha256."
LEGACY_VERSION_TAG = "version."


class FingerprintsUnreadable(PseoDasError, ValueError):
    """The run's fingerprints artifact is missing or differs from its tag."""


@dataclass(frozen=True)
class RunFingerprints:
    """Input file name -> SHA-256, release-relative path -> SHA-256, package -> version."""
    inputs: dict[str, str] = field(default_factory=dict)
    outputs: dict[str, str] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)

    def text(self) -> str:
        return json.dumps({"inputs": self.inputs, "outputs": self.outputs,
                           "package_versions": self.versions}, indent=2, sort_keys=True) + "\n"

    def tags(self, manifest_sha256: str) -> dict[str, str]:
        return {SHA_TAG: hashlib.sha256(self.text().encode()).hexdigest(),
                MANIFEST_TAG: manifest_sha256, "files.inputs": str(len(self.inputs)),
                "files.outputs": str(len(self.outputs))}

    def with_outputs(self, changed: dict[str, str]) -> "RunFingerprints":
        return RunFingerprints(self.inputs, self.outputs | changed, self.versions)


def log_fingerprints(client: MlflowClient, run_id: str, fingerprints: RunFingerprints,
                     manifest: Path) -> None:
    """The artifact, then its tags (replacing an earlier artifact and tags of the run)."""
    client.log_text(run_id, fingerprints.text(), ARTIFACT)
    for key, value in fingerprints.tags(hashlib.sha256(manifest.read_bytes()).hexdigest()).items():
        client.set_tag(run_id, key, value)


def has_fingerprints(tags: dict[str, str]) -> bool:
    """Whether a run logged fingerprints (a published release), in either form."""
    return SHA_TAG in tags or any(k.startswith(LEGACY_OUTPUT_TAG) for k in tags)


def _legacy(tags: dict[str, str]) -> RunFingerprints:
    def prefixed(prefix: str) -> dict[str, str]:
        return {k.removeprefix(prefix): v for k, v in tags.items() if k.startswith(prefix)}
    return RunFingerprints(prefixed(LEGACY_INPUT_TAG), prefixed(LEGACY_OUTPUT_TAG),
                           prefixed(LEGACY_VERSION_TAG))


def read_fingerprints(tracking_uri: str, run: Run) -> RunFingerprints:
    """The run's fingerprints: its artifact checked against its tag; a run of an earlier
    version, its per-file tags; a run that logged none, empty mappings."""
    tags = run.data.tags
    if SHA_TAG not in tags:
        return _legacy(tags)
    try:
        text = MlflowClient(tracking_uri=tracking_uri).download_artifacts(
            run.info.run_id, ARTIFACT)
        data = Path(text).read_bytes()
    except (MlflowException, OSError) as exc:
        raise FingerprintsUnreadable(f"MLflow run {run.info.run_id}: its {ARTIFACT} cannot be "
                                     f"read ({str(exc).splitlines()[0]})") from exc
    if hashlib.sha256(data).hexdigest() != tags[SHA_TAG]:
        raise FingerprintsUnreadable(f"MLflow run {run.info.run_id}: its {ARTIFACT} differs from "
                                     f"the {SHA_TAG} tag logged with it (changed since)")
    document = json.loads(data)
    return RunFingerprints(document["inputs"], document["outputs"], document["package_versions"])
