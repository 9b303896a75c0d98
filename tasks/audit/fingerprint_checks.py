"""Fingerprint checks of an audit: the published files against the run's output
fingerprints and the manifest, and the inputs against the run's input fingerprints.
Privacy cost: none (SHA-256 of files; the confidential values are never read).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pseo_das.tasks.audit.audit_target import AuditedRelease
from pseo_das.tasks.cip_recast.recast_inputs import is_recast_input
from pseo_das.schemas.written_hashes import read_sha256
from pseo_das.tasks.inputs.ipeds_location import IPEDS_FOLDER, locate_ipeds
from pseo_das.tasks.inputs.reference_inputs import default_reference_dir, is_reference_input
from pseo_das.tasks.publication.release_files import fingerprints
from pseo_das.tasks.audit.verification import FAILED, PASSED, SKIPPED, WAIVED, CheckResult, short


# -- published files -------------------------------------------------------------------

def _file_finding(name: str, disk: str | None, run: str | None, manifest: str | None) -> str:
    absent = [where for where, value in (("missing from the release folder", disk),
                                         ("not logged by the run", run),
                                         ("not in the manifest", manifest)) if value is None]
    present = {w: v for w, v in (("on disk", disk), ("logged by the run", run),
                                 ("in the manifest", manifest)) if v is not None}
    values = set(present.values())
    if len(values) <= 1:
        how = f"SHA-256 {short(next(iter(values)))}" if values else ""
    elif disk is not None and run is not None and run == manifest:
        how = (f"SHA-256 on disk {short(disk)}, but the run and the manifest logged {short(run)}: "
               "the file was changed after the release")
    else:
        how = "SHA-256 " + ", ".join(f"{w} {short(v)}" for w, v in present.items())
    return f"{name}: " + "; ".join(absent + ([how] if how else []))


def check_outputs(release: AuditedRelease, logged_manifest: dict | None) -> CheckResult:
    """Every file of the release folder against the run's fingerprints (SHA-256; its
    audit/fingerprints.json artifact, or an earlier version's `output_sha256.*` tags) and the
    manifest, no file missing or extra; the manifest against the run's copy."""
    on_disk = fingerprints(release.release_dir)
    logged = release.logged_outputs()
    manifest_files = release.manifest["files"]
    names = sorted(set(on_disk) | set(logged) | set(manifest_files))
    differing = [n for n in names
                 if on_disk.get(n) is None or not on_disk.get(n) == logged.get(n) == manifest_files.get(n)]
    findings = [_file_finding(n, on_disk.get(n), logged.get(n), manifest_files.get(n))
                for n in differing]
    matching = len(names) - len(differing)
    if release.fingerprints_problem:
        findings.append(release.fingerprints_problem)
    elif not logged:
        findings.append(f"the run {release.run_id} logged no output fingerprints")
    for key, expected in (("release_id", release.release_id), ("mlflow_run_id", release.run_id)):
        if release.manifest.get(key) != expected:
            findings.append(f"manifest.json: {key} is {release.manifest.get(key)!r}, the run's is "
                            f"{expected!r}")
    if logged_manifest is None:
        findings.append("the run has no internal/manifest.json artifact to compare with")
    elif logged_manifest != release.manifest:
        keys = sorted(k for k in set(logged_manifest) | set(release.manifest)
                      if logged_manifest.get(k) != release.manifest.get(k))
        findings.append(f"manifest.json differs from the run's copy (artifact "
                        f"internal/manifest.json) in: {', '.join(keys)}")
    if release.lifecycle_stage == "deleted":
        findings.append(f"the run {release.run_id} was deleted from the MLflow tracking store "
                        "(it is only kept until the store's garbage collection): the release's "
                        "audit trail is being removed")
    if release.run_status != "FINISHED":
        findings.append(f"the run's status is {release.run_status}, not FINISHED"
                        + (f" ({release.tags['failure']})" if "failure" in release.tags else ""))
    notes = []
    published_to = release.tags.get("published_to")
    if published_to and Path(published_to).resolve() != release.release_dir:
        notes.append(f"the run published to {published_to}; the folder audited is "
                     f"{release.release_dir}")
    figures = {"files on disk": len(on_disk), "files logged by the run": len(logged),
               "files in the manifest": len(manifest_files), "files matching all three": matching}
    if findings:
        summary = (f"{matching} of {len(names)} files match the run's fingerprints and the manifest; "
                   + (f"differ: {', '.join(differing)}" if differing else findings[0]))
        return CheckResult("outputs", FAILED, summary, figures, findings, notes)
    return CheckResult("outputs", PASSED,
                       f"{matching} of {len(names)} files match the run's fingerprints and the "
                       "manifest (SHA-256); none missing, none extra; the manifest equals the run's "
                       "copy", figures, [], notes)


# -- inputs ----------------------------------------------------------------------------

@dataclass(frozen=True)
class InputLocations:
    """Where the confidential inputs and the reference files are looked for."""
    data_dir: Path
    reference_dir: Path
    notes: tuple[str, ...] = ()


def locate_inputs(release: AuditedRelease, data_dir: Path | None) -> InputLocations:
    """The logged data and reference folders; `data_dir` (--data) overrides the former.
    A logged reference folder missing here falls back to the packaged demo files (their
    fingerprints are checked all the same)."""
    notes = []
    logged_data = release.params.get("data_dir", "")
    if data_dir is not None:
        data = Path(data_dir).resolve()
        if str(data) != logged_data:
            notes.append(f"confidential inputs read from {data} (--data); the run read {logged_data}")
    else:
        data = Path(logged_data)
    reference = Path(release.params.get("reference_dir", ""))
    if not reference.is_dir() and default_reference_dir().is_dir():
        notes.append(f"the logged reference folder {reference} is not here; the packaged files in "
                     f"{default_reference_dir()} were checked instead")
        reference = default_reference_dir()
    return InputLocations(data, reference, tuple(notes))


def check_inputs(release: AuditedRelease, locations: InputLocations,
                 unavailable_accepted: bool = False) -> CheckResult:
    """The SHA-256 of every input the run logged (its fingerprints), recomputed from the
    files. Files not found make the check skipped (waived when `unavailable_accepted`)."""
    logged = release.logged_inputs()
    if not logged:
        return CheckResult("inputs", FAILED, "the run logged no input fingerprints", {},
                           [release.fingerprints_problem or
                            f"the run {release.run_id} logged no input fingerprints"])
    matching, findings, missing = [], [], []
    for name, expected in sorted(logged.items()):
        public = is_reference_input(name) or is_recast_input(name) or name.startswith("bls/")
        folder = locations.reference_dir if public else locations.data_dir
        if name.startswith(f"{IPEDS_FOLDER}/"):          # where the release looked for them
            folder = locate_ipeds(locations.reference_dir, locations.data_dir).folder.parent
        elif public and not (folder / name).is_file():   # the run took it from the package
            folder = default_reference_dir()
        path = folder / name
        if not path.is_file():
            missing.append(str(path))
            continue
        found = read_sha256(path)
        if found != expected and name.startswith(f"{IPEDS_FOLDER}/") \
                and folder == default_reference_dir() \
                and not (locations.data_dir / IPEDS_FOLDER).is_dir():
            missing.append(str(locations.data_dir / name))   # the data folder's, maybe
            continue
        if found == expected:
            matching.append(name)
        else:
            findings.append(f"{name} in {folder}: SHA-256 {short(found)}, the run logged "
                            f"{short(expected)}: the file differs from the one released")
    figures = {"input files logged": len(logged), "matching": len(matching),
               "differing": len(findings), "not available": len(missing),
               "confidential inputs folder": str(locations.data_dir),
               "reference folder": str(locations.reference_dir)}
    notes = list(locations.notes) + [f"not available: {m}" for m in missing]
    if findings:
        return CheckResult("inputs", FAILED,
                           f"{len(matching)} of {len(logged)} input files match; differ: "
                           f"{', '.join(f.split(' in ')[0] for f in findings)}", figures, findings,
                           notes)
    if missing:
        status = WAIVED if unavailable_accepted else SKIPPED
        why = "accepted with --no-replay" if unavailable_accepted else \
            "give --data DIR, or accept an audit without them with --no-replay"
        return CheckResult("inputs", status,
                           f"{len(matching)} of {len(logged)} input files match; {len(missing)} not "
                           f"available here ({', '.join(Path(m).name for m in missing)}): {why}",
                           figures, [], notes)
    return CheckResult("inputs", PASSED,
                       f"{len(matching)} of {len(logged)} input files match the run's "
                       f"fingerprints ({', '.join(matching)})", figures, [], notes)
