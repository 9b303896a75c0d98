"""Review before publication. A release run with `--hold-for-review` is measured,
post-processed and staged complete in the privacy store's review folder
(`STORE/review/<release id>-<attempt>/`: inside the store folder, which is the agency's
confidential, owner-only folder, never beside a public destination), and its hold is an
entry of the store's hash chain. The disclosure review board's decision (approve with a
clearance number, or reject with a reason) is another entry; an approval adds the clearance
to the staged release notes and manifest. `pseo-das publish` then publishes exactly the
staged files, and only those of an approved release.

Chain entries (store_info rows, each key written once):
  review.<release id>.<attempt>.held  {folder, out_dir, record_sha256, manifest_sha256,
                                       mlflow_run_id, tracking_uri, at}
  review.<release id>.<attempt>       {decision, by, clearance, note | reason, at,
                                       reviewed_manifest_sha256, manifest_sha256}
Privacy cost: none (the measurements were drawn and spent when the release ran; a rejected
release's stay spent and are reused by a corrected one)."""
from __future__ import annotations

import json
import os
import shutil
import uuid
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path

from pseo_das.config import ReleaseConfig
from pseo_das.errors import PseoDasError
from pseo_das.schemas.written_hashes import read_sha256
from pseo_das.tasks.privacy.file_modes import private_folder
from pseo_das.tasks.privacy.store import PrivacyStore, ReleaseAttempt, utc_now
from pseo_das.tasks.publication.assemble import write_release_notes
from pseo_das.tasks.publication.release_files import (MANIFEST, check_destination, discard,
                                                      fingerprints, manifest_text)
from pseo_das.tasks.publication.review_request import ClearedRelease, ReviewRequest

REVIEW_FOLDER = "review"
PREFIX = "review."
HELD = ".held"
RELEASE_NOTES = "public/release_notes.md"
STAMPED = (RELEASE_NOTES, "public/release_notes.html")   # with the clearance, and the manifest


class ReviewError(PseoDasError, RuntimeError):
    """A review step refused: the release is not held, not approved, already decided, or
    its staged files changed."""

    quotes_records = False


class Decision(StrEnum):
    APPROVED = "approved"
    REJECTED = "rejected"


@dataclass(frozen=True)
class Hold:
    release_id: str
    attempt: int
    folder: str
    out_dir: str
    record_sha256: str
    manifest_sha256: str
    mlflow_run_id: str
    tracking_uri: str
    at: str


@dataclass(frozen=True)
class ReviewDecision:
    decision: Decision
    by: str
    at: str
    clearance: str | None = None
    note: str | None = None
    reason: str | None = None
    reviewed_manifest_sha256: str = ""
    manifest_sha256: str = ""     # of the files to publish (after the clearance was added)

    def manifest_entry(self) -> dict:
        """The clearance as the published manifest records it."""
        return {"decision": str(self.decision), "clearance": self.clearance, "by": self.by,
                "at": self.at, **({"note": self.note} if self.note else {})}


@dataclass(frozen=True)
class ReviewState:
    """The latest held attempt of a release: its hold, the board's decision (None: pending)
    and whether it was published."""
    hold: Hold
    decision: ReviewDecision | None
    published: bool


def hold_key(release_id: str, attempt: int) -> str:
    return f"{PREFIX}{release_id}.{attempt}{HELD}"


def decision_key(release_id: str, attempt: int) -> str:
    return f"{PREFIX}{release_id}.{attempt}"


def review_folder(store_path: Path, release_id: str, attempt: int) -> Path:
    return Path(store_path) / REVIEW_FOLDER / f"{release_id}-{attempt}"


def refuse_unreviewed(cfg: ReleaseConfig, hold_for_review: bool) -> None:
    """`release.require_review = true`: a release must be held (before anything is read)."""
    if cfg.release.require_review and not hold_for_review:
        raise ReviewError("release.require_review = true: a release is published only after the "
                          "disclosure review board clears it. Run it with --hold-for-review "
                          "(nothing was read or spent).")


def decision_of(store: PrivacyStore, release_id: str, attempt: int) -> ReviewDecision | None:
    value = store.info(decision_key(release_id, attempt))
    if value is None:
        return None
    return decision_from_tags({"review.decision": value})


def decision_from_tags(tags: dict[str, str]) -> ReviewDecision | None:
    """The board's decision as the release's MLflow run recorded it (tag review.decision)."""
    if "review.decision" not in tags:
        return None
    fields = json.loads(tags["review.decision"])
    return ReviewDecision(**{**fields, "decision": Decision(fields["decision"])})


def review_state(store: PrivacyStore, release_id: str) -> ReviewState | None:
    """The review of the latest attempt of `release_id` that was held; None if none was."""
    for attempt in reversed(store.attempts(release_id)):
        value = store.info(hold_key(release_id, attempt.attempt))
        if value is not None:
            published = not store.table("SELECT 1 FROM publications WHERE attempt = ?",
                                        (attempt.attempt,)).empty
            return ReviewState(Hold(**json.loads(value)),
                               decision_of(store, release_id, attempt.attempt), published)
    return None


def refuse_release_of_held(store: PrivacyStore, release_id: str, supersede: bool) -> None:
    """Before a release of `release_id` plans anything: a held release waits for its
    decision, an approved one is published with `publish`, and a rejected one is corrected
    by a new attempt (--supersede) or a new release id."""
    state = review_state(store, release_id)
    if state is None or state.published:
        return
    hold, decision = state.hold, state.decision
    if decision is None:
        raise ReviewError(f"release {release_id} (attempt {hold.attempt}) is held for review in "
                          f"{hold.folder}; the board decides with `pseo-das review approve|reject "
                          f"{release_id}`. Nothing was read or spent.")
    if decision.decision == Decision.APPROVED:
        raise ReviewError(f"release {release_id} is approved (clearance {decision.clearance}); "
                          f"publish it with `pseo-das publish {release_id} --out OUT`. Nothing "
                          "was read or spent.")
    if not supersede:
        raise ReviewError(f"release {release_id} (attempt {hold.attempt}) was rejected by "
                          f"{decision.by}: {decision.reason}. A corrected release runs with "
                          "--supersede or a new release id (the rejected release's measurements "
                          "stay spent and are reused). Nothing was read or spent.")


def last_cleared(store: PrivacyStore, until: str | None = None) -> ClearedRelease | None:
    """The last release this store's board approved (before the entry of key `until`),
    with its files' SHA-256."""
    entries = list(store.infos(PREFIX).items())
    keys = [key for key, _ in entries]
    entries = entries[:keys.index(until)] if until in keys else entries
    decisions = [(key, json.loads(value)) for key, value in entries if not key.endswith(HELD)]
    for key, decision in reversed(decisions):
        if decision["decision"] == Decision.APPROVED:
            release_id = json.loads(dict(entries)[key + HELD])["release_id"]
            manifest = store.get_json(decision["manifest_sha256"])
            return ClearedRelease(release_id, decision["clearance"], manifest["files"])
    return None


def review_request_of(store: PrivacyStore, release_id: str, attempt: int
                      ) -> ReviewRequest | None:
    """What the DRB report of a held attempt was written with (None: it was not held), for
    `republish`."""
    key = hold_key(release_id, attempt)
    value = store.info(key)
    if value is None:
        return None
    return ReviewRequest(Path(json.loads(value)["folder"]), last_cleared(store, until=key))


def hold_release(store: PrivacyStore, staging: Path, attempt: ReleaseAttempt,
                 record_sha256: str, out_dir: Path, mlflow_run_id: str,
                 tracking_uri: str) -> Hold:
    """Move the complete staged release into the review folder and record the hold."""
    folder = review_folder(store.path, attempt.release_id, attempt.attempt)
    private_folder(folder.parent)
    if folder.exists():       # left by a run killed between the move and the record
        shutil.rmtree(folder)
    shutil.move(staging, folder)
    private_folder(folder)
    hold = Hold(attempt.release_id, attempt.attempt, str(folder), str(out_dir), record_sha256,
                _keep_manifest(store, folder), mlflow_run_id, tracking_uri, utc_now())
    store.record_info(hold_key(hold.release_id, hold.attempt), json.dumps(asdict(hold)))
    return hold


def _keep_manifest(store: PrivacyStore, folder: Path) -> str:
    """The staged manifest, kept in the store's objects; returns its SHA-256."""
    return store.put_object((folder / MANIFEST).read_bytes(), "json")


def check_staged(hold: Hold, manifest_sha256: str) -> Path:
    """The review folder holds exactly the files of the manifest recorded: returns it."""
    folder = Path(hold.folder)
    manifest_file = folder / MANIFEST
    if not manifest_file.is_file() or read_sha256(manifest_file) != manifest_sha256:
        raise ReviewError(f"{manifest_file}: missing or changed since it was recorded in the "
                          "privacy store; the staged release cannot be trusted (run the release "
                          "again with --supersede)")
    expected = json.loads(manifest_file.read_text())["files"]
    on_disk = fingerprints(folder)
    if on_disk != expected:
        differ = sorted({n for n, _ in set(on_disk.items()) ^ set(expected.items())})
        raise ReviewError(f"{folder}: files changed since the release was staged "
                          f"({', '.join(differ[:10])}); nothing is published from it")
    return folder


def clearance_section(decision: ReviewDecision) -> str:
    note = f" Note: {decision.note}" if decision.note else ""
    return (f"\n## Disclosure review\n\nCleared for publication by the disclosure review "
            f"board: clearance **{decision.clearance}**, approved by {decision.by} on "
            f"{decision.at}.{note}\n")


def stamp_clearance(folder: Path, decision: ReviewDecision, into: Path) -> None:
    """The release notes (md and html) and the manifest of the release in `folder` with the
    clearance added, written into `into` (`folder` itself, or a draft of those files)."""
    manifest = json.loads((folder / MANIFEST).read_text())
    notes = (folder / RELEASE_NOTES).read_text() + clearance_section(decision)
    private_folder(into / "public")
    private_folder(into / "internal")
    write_release_notes(into / "public", notes, manifest["release_id"])
    files = {**manifest["files"], **{name: read_sha256(into / name) for name in STAMPED}}
    (into / MANIFEST).write_text(manifest_text(
        manifest["release_id"], manifest["mlflow_run_id"], manifest["tracking_uri"],
        manifest["store_chain"], files, review=decision.manifest_entry()))


def _pending(store: PrivacyStore, release_id: str) -> ReviewState:
    state = review_state(store, release_id)
    if state is None:
        raise ReviewError(f"release {release_id} was never held for review in the privacy store "
                          f"{store.path} (`pseo-das release --hold-for-review`)")
    if state.decision is not None:
        d = state.decision
        raise ReviewError(f"release {release_id} (attempt {state.hold.attempt}) was already "
                          f"{d.decision} by {d.by} on {d.at}; a decision is recorded once")
    return state


def approve(store: PrivacyStore, release_id: str, by: str, clearance: str,
            note: str | None) -> tuple[Hold, ReviewDecision]:
    """Record the board's approval and add its clearance to the staged release notes and
    manifest (the files then are those `publish` publishes)."""
    hold = _pending(store, release_id).hold
    folder = check_staged(hold, hold.manifest_sha256)
    draft = Path(f"{folder}.approving-{uuid.uuid4().hex[:8]}")
    try:
        decision = ReviewDecision(Decision.APPROVED, by, utc_now(), clearance=clearance,
                                  note=note or None, reviewed_manifest_sha256=hold.manifest_sha256)
        stamp_clearance(folder, decision, draft)
        decision = ReviewDecision(**{**asdict(decision),
                                     "manifest_sha256": _keep_manifest(store, draft)})
        store.record_info(decision_key(release_id, hold.attempt), json.dumps(asdict(decision)))
        for name in (*STAMPED, MANIFEST):
            os.replace(draft / name, folder / name)
    finally:
        discard(draft)
    return hold, decision


def reject(store: PrivacyStore, release_id: str, by: str, reason: str
           ) -> tuple[Hold, ReviewDecision]:
    """Record the board's rejection; the staged files are never published."""
    hold = _pending(store, release_id).hold
    decision = ReviewDecision(Decision.REJECTED, by, utc_now(), reason=reason,
                              reviewed_manifest_sha256=hold.manifest_sha256)
    store.record_info(decision_key(release_id, hold.attempt), json.dumps(asdict(decision)))
    return hold, decision


def approved(store: PrivacyStore, release_id: str) -> tuple[Hold, ReviewDecision]:
    """The hold and approval of a release that may be published now; refuses otherwise."""
    state = review_state(store, release_id)
    if state is None:
        raise ReviewError(f"release {release_id} was never held for review in the privacy store "
                          f"{store.path}; only a held and approved release is published with "
                          "`pseo-das publish`")
    hold, decision = state.hold, state.decision
    if state.published:
        raise ReviewError(f"release {release_id} (attempt {hold.attempt}) is already published; "
                          "`pseo-das republish` re-derives it into another folder")
    if decision is None:
        raise ReviewError(f"release {release_id} (attempt {hold.attempt}) is held for review and "
                          "not approved: nothing is published before the board's decision "
                          f"(`pseo-das review approve {release_id} --by NAME --clearance NUMBER`)")
    if decision.decision == Decision.REJECTED:
        raise ReviewError(f"release {release_id} (attempt {hold.attempt}) was rejected by "
                          f"{decision.by} on {decision.at}: {decision.reason}. It is never "
                          "published; a corrected release runs with --supersede or a new "
                          "release id")
    return hold, decision


def copy_keeping_links(source: Path, target: Path) -> None:
    """`shutil.copytree`, with the files that are hard links of each other in `source` (the
    explorer's public and internal copies, tasks/publication/explorer.py) hard links of each
    other in `target` too, not copies; copies where the file system refuses a link."""
    first_copy: dict[tuple[int, int], str] = {}

    def copy(src: str, dst: str) -> str:
        status = os.stat(src)
        key = (status.st_dev, status.st_ino)
        if key in first_copy:
            try:
                os.link(first_copy[key], dst)
                return dst
            except OSError:
                pass
        shutil.copy2(src, dst)
        if status.st_nlink > 1:
            first_copy[key] = dst
        return dst
    shutil.copytree(source, target, copy_function=copy)


def stage_approved(hold: Hold, decision: ReviewDecision, out_dir: Path) -> Path:
    """A copy of the approved release's staged files beside `out_dir` (with its destination
    lock held), checked file by file against the approved manifest: renamed into place by
    `release_files.publish`."""
    folder = check_staged(hold, decision.manifest_sha256)
    check_destination(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = out_dir.parent / f".{out_dir.name}.staging-{uuid.uuid4().hex[:8]}"
    try:
        copy_keeping_links(folder, staging)
        check_staged(Hold(**{**asdict(hold), "folder": str(staging)}), decision.manifest_sha256)
    except BaseException:
        discard(staging)
        raise
    return staging
