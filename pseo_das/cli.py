"""Command line: `pseo-das key`, `synth`, `release`, `review`, `publish`, `republish`,
`store`, `schedule`, `server`, `audit`, `noise-sample`, `evaluate`, `synthesize`,
`verify-server`, `validate-layout` and `explore`."""
from __future__ import annotations

import argparse
import errno
import gc
import json
import math
import os
import sys
import time
import traceback
from pathlib import Path

from pseo_das.errors import EXIT_BAD_INPUT, EXIT_CHECK_FAILED, PseoDasError, disclosed
from pseo_das.process_memory import limit_malloc_arenas

# What a refusal's message follows, per command (fields: the parsed arguments); the other
# commands: "pseo-das COMMAND: ".
REFUSAL_HEADLINES = {
    "release": "\npseo-das release: FAILED, nothing was published.\n",
    "republish": "\npseo-das republish: FAILED, nothing was written.\n",
    "publish": "\npseo-das publish: FAILED, nothing was published.\n",
    "review": "pseo-das review {action}: ",
    "evaluate": "\npseo-das evaluate: FAILED.\n",
    "synthesize": "pseo-das synthesize: FAILED, nothing was written.\n",
    "store": "pseo-das store {action}: ",
    "verify-server": "pseo-das verify-server {action}: ",
}


def _quiet_prefect_defaults() -> None:
    # Set before prefect is imported: no telemetry from the embedded server.
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")


def _synth(args: argparse.Namespace) -> int:
    from pseo_das.synth import write_synthetic
    started = time.perf_counter()
    if args.jobs and args.part_graduates:
        return refused(args, ValueError("--jobs writes single files: leave out --part-graduates"))
    if args.second_degree_share is not None and not args.jobs:
        return refused(args, ValueError("--second-degree-share is an option of --jobs"))
    try:
        counts = write_synthetic(Path(args.out), graduates=args.graduates, seed=args.seed,
                                 cip_switch_year=args.cip_switch_year,
                                 part_graduates=args.part_graduates,
                                 institutions=args.institutions, employers=args.employers)
    except ValueError as exc:   # arguments the universe cannot meet; nothing is written
        return refused(args, exc)
    if args.jobs:
        from pseo_das.synth_jobs import write_jobs_layout
        try:
            jobs = write_jobs_layout(Path(args.out), args.seed, 2022, args.cip_switch_year,
                                     second_degree_share=args.second_degree_share)
        except ValueError as exc:   # more second degrees than candidates
            return refused(args, exc)
        print(f"synthetic data (jobs layout): {jobs['graduates']:,} degree rows of "
              f"{jobs['persons']:,} persons, {jobs['jobs']:,} job rows in {args.out} "
              f"({time.perf_counter() - started:.1f} s)")
        return 0
    print(f"synthetic data: {counts['graduates']:,} graduates, {counts['outcomes']:,} outcome rows "
          f"in {args.out} ({time.perf_counter() - started:.1f} s)")
    return 0


def positive_int(text: str) -> int:
    value = int(text.replace(",", "").replace("_", ""))
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive whole number, got {text}")
    return value


def engine_of(args: argparse.Namespace):
    from pseo_das.tasks.inputs.true_counts import Engine, EngineKind
    return Engine(EngineKind(args.engine), args.scheduler, args.workers, args.chunk_rows)


def _release(args: argparse.Namespace) -> int:
    if args.scheduler and args.engine != "dask":
        print("pseo-das release: --scheduler is for --engine dask; nothing was read or spent",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    from pseo_das.config import check_release_id, load_config
    from pseo_das.tasks.publication.review import refuse_unreviewed
    # A configuration that cannot make a release stops here: no Prefect server, no MLflow
    # run, no privacy store touched (the flow loads it again, as scheduled runs do).
    refuse_unreviewed(load_config(Path(args.config) if args.config else None),
                      args.hold_for_review)
    if args.release_id:
        check_release_id(args.release_id)
    _quiet_prefect_defaults()
    from pseo_das.prefect_runtime import prefect_api
    from pseo_das.tasks import hide_tracebacks_of

    with prefect_api() as wait_until_ready:  # the server boots while the code below imports
        from pseo_das.flows.quarterly_release import quarterly_release
        from pseo_das.tasks.audit.mlflow_run import absolute_tracking_uri, default_tracking_uri

        if not args.debug:
            hide_tracebacks_of(PseoDasError)
        release_id = args.release_id or time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        wait_until_ready()
        absolute_tracking_uri(args.tracking_uri or default_tracking_uri())  # before any store
        seed = release_seed(args)   # None: the release id's own, or fresh
        result = quarterly_release(Path(args.data), Path(args.out), seed, release_id,
                                   Path(args.config) if args.config else None, args.tracking_uri,
                                   Path(args.reference) if args.reference else None,
                                   Path(args.store) if args.store else None,
                                   args.supersede, args.remeasure, args.init_store,
                                   engine_of(args), args.hold_for_review)
    out, summary = result.out_dir, result.summary
    if result.held is not None:
        print(held_message(result))
        return 0
    if result.already_published:
        print(f"\nRelease {result.release_id} is already published in {out} (complete, matching its "
              "manifest); nothing was redone and nothing was spent.")
        return 0
    pseo_das, mlflow = installed_command("pseo-das"), installed_command("mlflow")
    print(f"""
Release {result.release_id} published. {spending_sentence(summary, result.new_spending)}{guarantee_line(summary)}{demo_line(summary)}{cell_statistics_line(summary)}
  public files:    {out / 'public'}  (as the Census Bureau distributes them: all/ with the official pseoe_all, pseof_all (.csv.gz unless [publication] format = "csv"), pseo_all_institutions.csv, pseo_all_partners.txt, version_pseo.txt and pseo-das's pseoh_all, datapackage.json and parquet/{', pseoemp_all' if any((out / 'public' / 'all').glob('pseoemp_all.csv*')) else ''}; one folder per state; release_notes.html/.md; explorer/)
  internal files:  {out / 'internal'}  (release_summary.json, ledger.csv, lifetime_budget.csv, flows_state.parquet, drb_report.html/.md, manifest.json, config.json, explorer/)
  privacy store:   {summary['store']}
  audit run:       MLflow run {result.mlflow_run_id} in {result.tracking_uri}
Look at it:
  {out / 'public' / 'explorer' / 'index.html'}   # open in a browser: the explorer (internal/explorer: with the board's view)
  {pseo_das} store show {summary['store']}        # the budget spent, per graduate
  {pseo_das} audit {out}      # check the release against its run log
  {mlflow} ui --backend-store-uri {result.tracking_uri}   # the run log""")
    return 0


def held_message(result) -> str:
    """The final message of a release held for review."""
    held, summary = result.held, result.summary
    return f"""
Release {result.release_id} HELD FOR REVIEW: nothing was published. New epsilon \
{summary['new_epsilon']} spent; largest lifetime epsilon of any population \
{summary['max_lifetime_epsilon']} of {summary['lifetime_epsilon_cap']}.{demo_line(summary)}
  staged release:  {held.folder}  (in the privacy store: confidential; these files are what \
`publish` publishes, byte for byte)
  decision document: {Path(held.folder) / 'internal' / 'drb_report.html'}  (section "Decision requested")
  the board decides: pseo-das review approve {result.release_id} --by NAME --clearance NUMBER \
[--note TEXT]
                     pseo-das review reject {result.release_id} --by NAME --reason TEXT
  then:            pseo-das publish {result.release_id} --out {held.out_dir}
  audit run:       MLflow run {result.mlflow_run_id} in {result.tracking_uri}"""


def _review(args: argparse.Namespace) -> int:
    from pseo_das.flows.review_release import approve_release, reject_release
    from pseo_das.tasks.privacy.store import resolve_store
    from pseo_das.tasks.publication.review import ReviewError

    needed = {"--by": args.by} | ({"--clearance": args.clearance} if args.action == "approve"
                                  else {"--reason": args.reason})
    missing = [option for option, value in needed.items() if not (value or "").strip()]
    if missing:
        raise ReviewError(f"{' and '.join(missing)} needed (recorded in the privacy store's "
                          "hash chain and the MLflow run)")
    store = resolve_store(args.store)
    if args.action == "approve":
        hold, decision = approve_release(store, args.release, args.by.strip(),
                                         args.clearance.strip(), args.note)
        print(f"release {args.release} (attempt {hold.attempt}) APPROVED by {decision.by}, "
              f"clearance {decision.clearance}: recorded in the privacy store {store} and MLflow "
              f"run {hold.mlflow_run_id}; the clearance is in the staged release notes and "
              f"manifest ({hold.folder}).\n  publish it: pseo-das publish {args.release} --out "
              f"{hold.out_dir}")
    else:
        hold, decision = reject_release(store, args.release, args.by.strip(),
                                        args.reason.strip())
        print(f"release {args.release} (attempt {hold.attempt}) REJECTED by {decision.by}: "
              f"{decision.reason}; recorded in the privacy store {store} and MLflow run "
              f"{hold.mlflow_run_id}. It is never published. Its measurements stay spent and "
              "are reused by a corrected release (`pseo-das release ... --supersede`, or a new "
              "release id).")
    return 0


def _publish(args: argparse.Namespace) -> int:
    from pseo_das.flows.review_release import publish_release
    from pseo_das.tasks.privacy.store import resolve_store

    store = resolve_store(args.store)
    hold, decision, out = publish_release(store, args.release, Path(args.out))
    print(f"\nRelease {args.release} published to {out} (cleared by {decision.by}, clearance "
          f"{decision.clearance}): exactly the staged files, checked against the approved "
          f"manifest. Recorded in the privacy store {store} and MLflow run "
          f"{hold.mlflow_run_id}.")
    return 0


def installed_command(name: str) -> str:
    """How to run `name` of this installation from the current folder: its bare name when
    the shell finds this very program, else its path (`.venv/bin/pseo-das` after `make
    release`, where the virtual environment is not activated)."""
    import shutil

    here = Path(sys.executable).parent / name
    if not here.exists() or shutil.which(name) == str(here):
        return name
    try:
        return str(here.relative_to(Path.cwd()))
    except ValueError:
        return str(here)


def spending_sentence(summary: dict, new_spending: bool) -> str:
    """What this run spent, in words: a run that re-derived a release measured by an
    earlier run spent nothing, whatever the release's own figures are."""
    lifetime = (f"Largest lifetime epsilon of any graduate: {summary['max_lifetime_epsilon']} "
                f"of the store's cap {summary['lifetime_epsilon_cap']}.")
    if not new_spending:
        return (f"This run spent nothing: the release was measured by an earlier run (new "
                f"epsilon {summary['new_epsilon']} then), and its files were derived again from "
                f"the privacy store. {lifetime}")
    new, reused = summary["new_measurements"], summary["reused_measurements"]
    if not new:
        return (f"This run spent nothing: all {reused:,} measurements (tabulation x "
                f"population units, {summary['populations_reused']:,} populations) were reused "
                f"from the privacy store at zero epsilon. {lifetime}")
    drawn = (f"a new epsilon of {summary['new_epsilon']} ({new:,} tabulation x population units "
             f"measured in {summary['populations_measured']:,} populations")
    if reused:
        whole = summary["populations_reused"]
        drawn += (f"; {reused:,} earlier measurements reused from the store at zero epsilon"
                  + (f", {whole:,} populations entirely from the store" if whole else ""))
    return f"This run spent {drawn}). {lifetime}"


def guarantee_line(summary: dict) -> str:
    """The final message's lines on the release's guarantee (release_summary.json's,
    derived from its measurements' statements)."""
    said = summary.get("guarantee")
    if not said:
        return ""
    delta = "" if said["delta"] == "0" else (
        f"\n  lifetime delta:  largest {summary['max_lifetime_delta']} of any population "
        "(recorded in the privacy store and capped by its policy when it has a delta cap)")
    return (f"\n  guarantee:       {said['graduates']}\n  sampling:        {said['sampling']}"
            f"\n  employers:       {said['employers']}{delta}")


def cell_statistics_line(summary: dict) -> str:
    """The final message's line on the optional cell statistics (pseom_all.csv)."""
    kept = summary.get("cell_statistics")
    if not kept:
        return ""
    return (f"\n  CELL STATISTICS: pseom_all.csv ({kept['variant']}) carries epsilon "
            f"{kept['ledger_epsilon']}, in the privacy store's lifetime budget per population: "
            f"new epsilon {kept['new_epsilon']} ({kept['new_measurements']:,} statistic x "
            f"population units measured, {kept['reused_measurements']:,} reused at zero "
            "epsilon)")


def demo_line(summary: dict) -> str:
    """The final message's warning when the packaged SYNTHETIC demo inputs were used."""
    demo = summary.get("demo_inputs") or []
    if not demo:
        return ""
    return (f"\n  DEMO INPUTS:     the packaged SYNTHETIC {', '.join(demo)} file(s) were used: not "
            "fit for publication (give --reference DIR; release.production = true refuses them)")


def _republish(args: argparse.Namespace) -> int:
    from pseo_das.tasks.privacy.store import PrivacyStore, resolve_store

    store = resolve_store(args.store)
    with PrivacyStore.open(store) as opened:   # an unknown release: refused before Prefect starts
        opened.stored_publication_record(args.release)
    _quiet_prefect_defaults()
    from pseo_das.prefect_runtime import prefect_api
    from pseo_das.tasks import hide_tracebacks_of

    with prefect_api() as wait_until_ready:
        from pseo_das.flows.quarterly_release import republish

        if not args.debug:
            hide_tracebacks_of(PseoDasError)
        wait_until_ready()
        result = republish(store, args.release, Path(args.out),
                           args.cip_vintage,
                           Path(args.reference) if args.reference else None)
    print(f"\nRelease {result.release_id} re-derived from the privacy store into {result.out_dir} "
          "(no microdata read, no noise drawn, nothing spent).")
    return 0


def _store(args: argparse.Namespace) -> int:
    from pseo_das.tasks.privacy.store import (DEFAULT_LIFETIME_CAP, DEFAULT_LIFETIME_DELTA_CAP,
                                              DEFAULT_MAX_TABULATION_EPSILON, PrivacyStore,
                                              StoreError, epsilon_text, init_store,
                                              resolve_store, store_lock)
    from pseo_das.tasks.privacy.store_integrity import verify_store
    from pseo_das.tasks.privacy.store_summary import store_summary

    path = resolve_store(args.dir)
    if args.action == "init":
        init_store(path, args.lifetime_cap or DEFAULT_LIFETIME_CAP,
                   args.max_tabulation_epsilon or DEFAULT_MAX_TABULATION_EPSILON,
                   args.by, args.reason or "store created",
                   args.lifetime_delta_cap or DEFAULT_LIFETIME_DELTA_CAP)
        with PrivacyStore.open(path) as store:
            policy = store.policy()
        print(f"created an empty privacy store in {path} (lifetime epsilon cap "
              f"{epsilon_text(policy.lifetime_cap)} and delta cap "
              f"{epsilon_text(policy.lifetime_delta_cap or 0)} per graduate, at most epsilon "
              f"{epsilon_text(policy.max_tabulation_epsilon)} per tabulation)")
    elif args.action == "set-policy":
        if not (args.lifetime_cap or args.max_tabulation_epsilon or args.lifetime_delta_cap) \
                or not args.by or not args.reason:
            raise StoreError("set-policy needs --lifetime-cap, --lifetime-delta-cap and/or "
                             "--max-tabulation-epsilon, and --by WHO and --reason WHY "
                             "(both are recorded in the store)")
        with store_lock(path):
            verify_store(path).raise_if_failed()
            with PrivacyStore.open(path) as store:
                before = store.policy()
                after = store.set_policy(args.by, args.reason, args.lifetime_cap,
                                         args.max_tabulation_epsilon, args.lifetime_delta_cap)
        print(f"privacy store {path}: policy {after.policy} recorded (lifetime cap "
              f"{epsilon_text(before.lifetime_cap)} -> {epsilon_text(after.lifetime_cap)}, "
              f"lifetime delta cap {_delta_cap(before)} -> {_delta_cap(after)}, "
              f"largest epsilon per tabulation {epsilon_text(before.max_tabulation_epsilon)} "
              f"-> {epsilon_text(after.max_tabulation_epsilon)}; by {after.set_by}: "
              f"{after.reason})")
    elif args.action == "verify":
        return _verify_store(path, args.tracking_uri)
    elif args.action == "adopt":
        return _adopt_store(path, args.tracking_uri, args.by, args.reason)
    else:
        print(store_summary(path, args.top))
    return 0


def _delta_cap(policy) -> str:
    from pseo_das.epsilon import epsilon_text
    return "none" if policy.lifetime_delta_cap is None else epsilon_text(policy.lifetime_delta_cap)


def _adopt_store(path: Path, tracking_uri: str | None, by: str | None, reason: str | None) -> int:
    """`store adopt`: the agency names this store as the one of its id (a copy or fork of it
    diverged); the other's runs are disowned, and the adoption recorded in the store."""
    from mlflow.tracking import MlflowClient

    from pseo_das.tasks.audit.mlflow_run import (absolute_tracking_uri, default_tracking_uri,
                                                 existing_runs_of_store)
    from pseo_das.tasks.audit.store_witness import adopt_store
    from pseo_das.tasks.privacy.store import PrivacyStore, StoreError, store_lock
    from pseo_das.tasks.privacy.store_integrity import verify_store

    if not by or not reason:
        raise StoreError("adopt needs --by WHO and --reason WHY (both are recorded in the store)")
    uri = absolute_tracking_uri(tracking_uri or default_tracking_uri())
    with store_lock(path):
        verify_store(path, check_objects=True).raise_if_failed()
        with PrivacyStore.open(path) as store:
            runs = existing_runs_of_store(uri, path, store.store_id) or []
            disowned = adopt_store(store, MlflowClient(tracking_uri=uri), runs, by, reason)
    if not disowned:
        print(f"privacy store {path}: no copy of it with another history in {uri}; nothing "
              "to adopt, nothing recorded")
    else:
        print(f"privacy store {path} adopted as the store of its id (by {by}: {reason}); "
              f"{len(disowned)} run(s) of its diverged copy disowned: {', '.join(disowned)}")
    return 0


def _verify_store(path: Path, tracking_uri: str | None) -> int:
    """The store's own integrity, then what the MLflow runs that used it recorded."""
    from pseo_das.tasks.audit.mlflow_run import (TrackingStoreError, default_tracking_uri,
                                                 existing_runs_of_store)
    from pseo_das.tasks.audit.store_witness import plaintext_seed_runs, witness_problems
    from pseo_das.tasks.measurements.publication_record import record_objects
    from pseo_das.tasks.privacy.store import PrivacyStore
    from pseo_das.tasks.privacy.store_integrity import verify_store
    from pseo_das.tasks.verification.ledger import (ledger_custody, ledger_path,
                                                    plaintext_server_seed, verify_ledger)

    report = verify_store(path, check_objects=True, record_objects=record_objects)
    report.problems += [f"verification ledger: {p}" for p in ledger_custody(path)]
    if ledger_path(path).is_file():     # the verification server's ledger, when the store has one
        report.problems += [f"verification ledger: {p}" for p in verify_ledger(path)]
        report.exposures += plaintext_server_seed(path)
    uri = tracking_uri or default_tracking_uri()
    try:
        with PrivacyStore.open(path) as store:
            store_id = store.store_id
        runs = existing_runs_of_store(uri, path, store_id)
    except TrackingStoreError as exc:
        report.problems.append(str(exc))
        runs = None
    if runs is not None and report.ok:
        with PrivacyStore.open(path) as store:
            report.problems += witness_problems(store, runs)
        report.exposures += plaintext_seed_runs(runs)
    print(report.message(limit=50), file=sys.stdout if report.ok else sys.stderr)
    if report.ok:
        print(f"  recorded heads: {len(runs)} MLflow run(s) in {uri} used this store; all agree"
              if runs else f"  no MLflow run in {uri} used this store (nothing to compare)")
    return 0 if report.ok else EXIT_CHECK_FAILED


def _audit(args: argparse.Namespace) -> int:
    if args.data and not Path(args.data).is_dir():   # never a silent waiver of the replay
        raise PseoDasError(f"--data {args.data}: no such folder (the confidential inputs to "
                           "replay the release with; --no-replay audits without them)")
    _quiet_prefect_defaults()
    from pseo_das.prefect_runtime import prefect_api

    with prefect_api() as wait_until_ready:  # the server boots while the code below imports
        from pseo_das.flows.audit_release import audit_release
        from pseo_das.tasks.audit.audit_target import resolve_audit_target

        resolve_audit_target(args.target, args.tracking_uri)  # an unusable target stops here
        wait_until_ready()
        verdict = audit_release(args.target, args.tracking_uri,
                                Path(args.data) if args.data else None,
                                Path(args.report) if args.report else None, not args.no_replay)
    print("\n" + verdict.printed())
    return verdict.exit_code


NOT_SYNTHETIC = (
    "{data}: not synthetic data written by `pseo-das synth` (its graduates.parquet does not "
    "carry the synthetic mark). The accuracy study writes true per-cell values (percentiles "
    "and counts) to its output, so it runs on synthetic data only. If this folder is "
    "synthetic data made another way, say so with --i-know-this-is-synthetic.")


def _evaluate_employer_flows(args: argparse.Namespace) -> int:
    from pseo_das.tasks.study.employer_flows_study import employer_flows_study
    from pseo_das.tasks.study.flows_study import DEFAULT_FLOWS_STUDY_SEED

    result = employer_flows_study(Path(args.data), Path(args.out), args.mechanisms,
                                  args.seed or DEFAULT_FLOWS_STUDY_SEED, args.draws or 1,
                                  args.alphas, args.epsilons)
    out = Path(args.out)
    print(f"\nEmployer-protection flows study done in {result['seconds']:.0f} s "
          f"({result['settings']} settings, {result['infeasible']} infeasible).\n"
          f"  report:  {out / 'employer_flows_accuracy.md'}\n"
          f"  tables:  {out / 'employer_flows_accuracy.csv'}, "
          f"{out / 'employer_flows_measures_by_draw.csv'}, {out / 'employer_flows_infeasible.csv'}")
    return 0


def _evaluate_flows(args: argparse.Namespace) -> int:
    if args.mechanisms:
        return _evaluate_employer_flows(args)
    from pseo_das.tasks.study.flows_accuracy_study import flows_accuracy_study
    from pseo_das.tasks.study.flows_study import DEFAULT_FLOWS_STUDY_SEED

    result = flows_accuracy_study(Path(args.data), Path(args.out), quick=args.quick,
                                  seed_hex=args.seed or DEFAULT_FLOWS_STUDY_SEED,
                                  epsilons=args.epsilons, draws=args.draws,
                                  total_shares=args.total_shares,
                                  nonemployed_weights=args.nonemployed_weights)
    out, outcome = result.out_dir, result.outcome
    print(f"\nFlows accuracy study{' (quick grid)' if args.quick else ''} done in {result.seconds:.0f} s.\n"
          f"  report:  {out / 'flows_accuracy_report.html'}  (figures in {out / 'figures'})\n"
          f"  tables:  {out / 'flows_accuracy.csv'}, {out / 'flows_targets.csv'}, "
          f"{out / 'flows_measures_by_draw.csv'}")
    for row in outcome["targets"]:
        print(f"  [{'met' if row['meets_target'] else 'missed'}] epsilon {outcome['epsilon']:g}, "
              f"{row['setting']}: MAE not employed {row['mae_nonemployed']:.2f}")
    best, shipped = outcome["recommended"], outcome["shipped"]
    print(f"  recommended: {best['setting'] if best else 'none meets the target'}")
    if shipped:
        print(f"  shipped default ({shipped['setting']}): "
              f"{'meets' if shipped['meets_target'] else 'misses'} the target, "
              f"{'the recommended setting' if shipped['wins'] else 'not the recommended setting'}")
    return 0


def _mechanisms(text: str) -> list[str]:
    names = [x.strip() for x in text.split(",") if x.strip()]
    known = ("geometric", "log-laplace", "smooth-gamma", "smooth-laplace")
    bad = [n for n in names if n not in known]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"unknown mechanism(s) {', '.join(bad) or '(none)'}; "
                                         f"expected some of {', '.join(known)}")
    return names


def _evaluate_mos(args: argparse.Namespace) -> int:
    """The cell statistics' accuracy study (mos, mos-dp, histogram means; docs/method/cell-statistics.md)."""
    from pseo_das.tasks.study.mos_accuracy import DEFAULT_MOS_STUDY_SEED, mos_accuracy_study

    result = mos_accuracy_study(Path(args.data), Path(args.out), epsilons=args.epsilons,
                                draws=args.draws or 20,
                                seed_hex=args.seed or DEFAULT_MOS_STUDY_SEED)
    print(f"\nCell statistics accuracy study done in {result.seconds:.0f} s.\n"
          f"  tables:  {result.out_dir / 'mos_accuracy.csv'}, "
          f"{result.out_dir / 'mos_accuracy_winners.csv'}")
    print(result.winners.to_string(index=False))
    return 0


def _evaluate_bounding(args: argparse.Namespace) -> int:
    """The contribution bound's study (k = 1, 2, 3; docs/method/accuracy.md)."""
    from pseo_das.tasks.study.bounding_accuracy_study import bounding_accuracy_study
    from pseo_das.tasks.study.bounding_study import DEFAULT_BOUNDING_STUDY_SEED

    result = bounding_accuracy_study(Path(args.data), Path(args.out), quick=args.quick,
                                     seed_hex=args.seed or DEFAULT_BOUNDING_STUDY_SEED,
                                     draws=args.draws)
    study, out = result.study, result.out_dir
    print(f"\nBounding study{' (quick)' if args.quick else ''} done in {result.seconds:.0f} s.\n"
          f"  report:  {out / 'bounding_report.md'} (.html)\n"
          f"  tables:  {out / 'bounding_accuracy.csv'}, {out / 'bounding_by_k.csv'}\n"
          "  mean error over the headline measures (cells of 30 and over): "
          + ", ".join(f"k = {k}: {v:.1%}" for k, v in study["mean_headline_error"].items())
          + f"\n  recommended: k = {study['recommended_k']}")
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    from pseo_das.synth import is_synthetic

    if not (is_synthetic(Path(args.data)) or args.i_know_this_is_synthetic):
        print(f"pseo-das evaluate: refused.\n{NOT_SYNTHETIC.format(data=args.data)}",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.product == "flows":
        return _evaluate_flows(args)
    if args.product == "mos":
        return _evaluate_mos(args)
    if args.product == "bounding" and not (args.epsilons or args.total_shares or
                                           args.nonemployed_weights or args.mechanisms or
                                           args.alphas):
        return _evaluate_bounding(args)
    if args.epsilons or args.draws or args.total_shares or args.nonemployed_weights or \
            args.mechanisms or args.alphas:
        print("pseo-das evaluate: --epsilons, --draws, --total-shares, --nonemployed-weights, "
              "--mechanisms and --alphas are options of --product flows (--draws also of "
              "mos and bounding)",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    _quiet_prefect_defaults()
    from pseo_das.prefect_runtime import prefect_api

    with prefect_api() as wait_until_ready:  # the server boots while the code below imports
        from pseo_das.flows.accuracy_study import accuracy_study
        from pseo_das.tasks.study.accuracy_grid import DEFAULT_STUDY_SEED

        wait_until_ready()
        result = accuracy_study(Path(args.data), Path(args.out), quick=args.quick,
                                seed_hex=args.seed or DEFAULT_STUDY_SEED)
    out = result.out_dir
    print(f"\nAccuracy study{' (quick grid)' if args.quick else ''} done in {result.seconds:.0f} s.\n"
          f"  report:  {out / 'accuracy_report.html'}  (figures in {out / 'figures'})\n"
          f"  tables:  {out / 'relative_accuracy.csv'}, {out / 'l1_error.csv'}, {out / 'cells.csv'}")
    for finding in result.findings:
        print(f"  [{finding.verdict}] {finding.claim}: {finding.measured}")
    return 0


def _noise_sample(args: argparse.Namespace) -> int:
    import numpy as np

    from pseo_das.epsilon import epsilon_from_text, epsilon_range_problem
    from pseo_das.tasks.privacy.geometric import discrete_laplace_noise

    try:
        epsilon = epsilon_from_text(args.epsilon)
    except ValueError:
        print(f"pseo-das noise-sample: --epsilon {args.epsilon!r} is not a positive exact number "
              "(a decimal such as 1.5, or a fraction such as 3/2)", file=sys.stderr)
        return EXIT_BAD_INPUT
    problem = epsilon_range_problem(epsilon)
    if problem:
        print(f"pseo-das noise-sample: --epsilon {args.epsilon}: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.count < 1:
        print("pseo-das noise-sample: --count must be at least 1", file=sys.stderr)
        return EXIT_BAD_INPUT
    noise = discrete_laplace_noise(bytes.fromhex(args.seed), args.tabulation, epsilon,
                                   (args.count,))
    if args.out == "-":
        sys.stdout.write("\n".join(map(str, noise.tolist())) + "\n")
    else:
        np.save(args.out, noise, allow_pickle=False)
        print(f"{args.count:,} draws (int64) of the two-sided geometric noise at epsilon "
              f"{args.epsilon}, stream of {args.tabulation!r}, written to {args.out}",
              file=sys.stderr)
    return 0


def _schedule(args: argparse.Namespace) -> int:
    _quiet_prefect_defaults()
    from pseo_das.prefect_server import use_kept_server
    use_kept_server()
    from prefect import serve
    from prefect.settings import PREFECT_API_URL

    from pseo_das.flows.scheduled_release import quarterly_deployment

    if not PREFECT_API_URL.value():
        print("pseo-das schedule: no Prefect server configured. Scheduled runs need one that "
              "outlives this process:\n  pseo-das server start\n  pseo-das schedule ...\n"
              "or a server of your own: export PREFECT_API_URL=http://HOST:4200/api",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    deployment = quarterly_deployment(Path(args.data), Path(args.releases),
                                      Path(args.config) if args.config else None,
                                      Path(args.reference) if args.reference else None,
                                      args.tracking_uri, Path(args.store) if args.store else None,
                                      args.cron, args.timezone)
    serve(deployment)  # runs until interrupted; each scheduled run executes in this process
    return 0


def _server(args: argparse.Namespace) -> int:
    from pseo_das import prefect_server
    if args.action == "start":
        print(f"Prefect server {prefect_server.start(args.port).describe()}\n"
              "releases and the other commands report to it until `pseo-das server stop`")
    elif args.action == "stop":
        found = prefect_server.stop()
        print("stopped: " + found.describe() if found.record else found.describe())
    else:
        found = prefect_server.status()
        print(found.describe())
        return 0 if found.state is prefect_server.ServerState.RUNNING else 3
    return 0


SEED_ENV = "PSEO_DAS_SEED"


def _validate_layout(args: argparse.Namespace) -> int:
    from pseo_das.schemas.pseo_layout import SCHEMA_VERSION, check_public_folder

    report = check_public_folder(Path(args.public_dir))
    counts = ", ".join(f"{name} {rows:,} rows" for name, rows in report.rows.items())
    if report.ok:
        print(f"layout valid: {counts} (LEHD Public Use Schema {SCHEMA_VERSION})")
        return 0
    print("\n".join(str(problem) for problem in report.problems))
    print(f"layout INVALID: {len(report.problems)} problem(s) in {report.folder} ({counts}; "
          f"LEHD Public Use Schema {SCHEMA_VERSION})")
    return EXIT_CHECK_FAILED


def _explore(args: argparse.Namespace) -> int:
    from pseo_das.tasks.publication.explorer import default_out, explore
    out = explore(Path(args.release_dir), Path(args.out) if args.out else
                  default_out(Path(args.release_dir)), board=args.board)
    print(f"wrote the explorer {out}/: open {out / 'index.html'} in a browser (it reads only "
          "the files in that folder)")
    return 0


def _seed_hex(text: str) -> str:
    """A 256-bit seed option (64 hexadecimal digits), checked as release seeds are."""
    from pseo_das.tasks.privacy.release_seed import ReleaseSeed, SeedError
    try:
        return ReleaseSeed.from_hex(text).hex()
    except SeedError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive_seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not 0 < seconds <= 3600:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0 and at "
                                         "most 3600")
    return seconds


def _concurrency(text: str) -> int:
    if not (text.isascii() and text.isdigit() and 1 <= int(text) <= 64):
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number from 1 to 64")
    return int(text)


def _rate_limit(text: str) -> str:
    """A rate such as 30/minute or 100/hour (the `limits` package's notation)."""
    from limits import parse
    try:
        if parse(text).amount >= 1:
            return text
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(f"{text!r} is not a rate such as 30/minute or 100/hour")


def release_seed(args: argparse.Namespace):
    """The seed from --seed-file, $PSEO_DAS_SEED or --seed (in that order; the first two do
    not show in `ps`), as the flow's masked parameter (a SecretStr); None if none is given."""
    from pseo_das.tasks.privacy.release_seed import ReleaseSeed, SeedError
    given = [(name, value) for name, value in [
        ("--seed-file", args.seed_file), (f"${SEED_ENV}", os.environ.get(SEED_ENV)),
        ("--seed", args.seed)] if value]
    if len(given) > 1:
        raise SeedError(f"the seed is given twice ({' and '.join(n for n, _ in given)}): give one")
    if not given:
        return None
    name, value = given[0]
    if name == "--seed-file":
        try:
            value = Path(value).read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise SeedError(f"--seed-file {value}: cannot read it ({exc})") from exc
    try:
        return ReleaseSeed.from_hex(value).secret()
    except SeedError as exc:
        raise SeedError(f"{name}: {exc}") from exc


def _verify_server(args: argparse.Namespace) -> int:
    """`pseo-das verify-server [serve|init|add-analyst|show|fit]` (tasks/verification)."""
    from pydantic import ValidationError

    from pseo_das.config import load_config
    from pseo_das.tasks.audit.mlflow_run import default_tracking_uri
    from pseo_das.tasks.privacy.store import StoreError, resolve_store
    from pseo_das.tasks.verification import commands
    from pseo_das.tasks.verification.ledger import VerificationLedger, init_ledger

    try:
        cfg = load_config(Path(args.config) if args.config else None)
        years = (cfg.cells.first_cohort_year, cfg.cells.last_earnings_year)
        if args.action == "fit":
            if not (args.data and args.query):
                raise StoreError("fit needs --data DIR (synthetic data) and --query FILE.json")
            from pseo_das.tasks.synthesis.synthesizer import is_cart_synthetic
            from pseo_das.synth import is_synthetic
            if not (is_cart_synthetic(Path(args.data)) or is_synthetic(Path(args.data))):
                raise StoreError(f"{args.data}: not synthetic data (written by `pseo-das "
                                 "synthesize` or `pseo-das synth`); fit prints exact estimates, "
                                 "so it never runs on confidential data")
            print(json.dumps(commands.fit_on_synthetic(Path(args.data), commands.read_query(
                Path(args.query)), *years), indent=1))
            return 0
        store = resolve_store(args.store)
        if args.action == "init":
            if not args.global_budget:
                raise StoreError("init needs --global-budget E (the epsilon all queries may spend)")
            path = init_ledger(store, args.global_budget, args.by or "unknown")
            print(f"created the verification ledger {path} (global budget {args.global_budget})")
        elif args.action == "add-analyst":
            if not (args.name and args.budget):
                raise StoreError("add-analyst needs NAME and --budget E")
            with VerificationLedger.open(store) as ledger:
                token = ledger.add_analyst(args.name, args.budget, args.by or "unknown")
                above = ledger.analyst_budget(args.name) > ledger.global_cap()
                cap = ledger.global_cap()
            print(f"analyst {args.name} registered with epsilon budget {args.budget}. Their token "
                  f"(shown once, only its SHA-256 is kept):\n{token}")
            if above:
                print(f"WARNING: {args.name}'s budget {args.budget} is above the global budget "
                      f"{cap}: every query is also charged to the global budget, so they can "
                      f"never spend more than {cap} (less once others have spent)",
                      file=sys.stderr)
        elif args.action == "show":
            print(commands.ledger_summary(store))
        else:
            if not args.data:
                raise StoreError("serve needs --data DIR (the confidential graduates and outcomes)")
            return _serve_verification(args, store, years, default_tracking_uri)
    except (ValidationError, json.JSONDecodeError) as exc:   # a query file that is not one
        return refused(args, exc)
    return 0


def check_port_free(host: str, port: int) -> None:
    """The server's address can be bound (it is bound again by the server itself)."""
    import socket

    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise PseoDasError(f"cannot serve on {host}:{port}: {exc.strerror or exc} (another "
                               "server there? choose one with --port); nothing was read") from exc


def _serve_verification(args, store: Path, years: tuple[int, int], default_tracking_uri) -> int:
    import uvicorn

    from pseo_das.tasks.verification.limits import ServerLimits
    from pseo_das.tasks.verification.records import load_records
    from pseo_das.tasks.verification.server import ServerState, create_app
    from pseo_das.tasks.verification.session_log import SessionLog

    from pseo_das.tasks.verification.ledger import VerificationLedger
    VerificationLedger.open(store).close()      # a missing ledger is refused before any reading
    check_port_free(args.host, args.port)       # before minutes of reading the data
    records = load_records(Path(args.data), *years)
    uri = args.tracking_uri or default_tracking_uri()
    session = SessionLog(uri, {"store": str(store), "data_dir": str(Path(args.data).resolve()),
                               "data_version": records.data_version, "records": len(records)})
    limits = ServerLimits(**{name: value for name, value in [
        ("query_seconds", args.query_seconds), ("concurrent_queries", args.concurrent_queries),
        ("rate_limit", args.rate_limit)] if value is not None})
    state = ServerState(store, records, years, session, limits)
    print(f"verification server: {len(records):,} outcome records (data version "
          f"{records.data_version[:16]}), ledger {store}; audit: MLflow run {session.run_id} in "
          f"{session.tracking_uri}; http://{args.host}:{args.port}/ (API docs at /docs)",
          flush=True)
    try:
        uvicorn.run(create_app(state), host=args.host, port=args.port, log_level="warning")
    finally:
        if not session.closed:                  # the server never started (e.g. port taken)
            session.close({"note": "the server did not start or stopped abnormally"})
    return 0


def _synthesize(args: argparse.Namespace) -> int:
    from pseo_das.config import load_config
    from pseo_das.tasks.synthesis.synthesizer import synthesize

    cfg = load_config(Path(args.config) if args.config else None)
    try:
        result = synthesize(Path(args.data), Path(args.out), bytes.fromhex(args.seed), cfg)
    except FileExistsError as exc:   # the output folder is there already
        return refused(args, exc)
    print(f"synthetic data: {result.graduates:,} graduates, {result.outcomes:,} outcome rows in "
          f"{result.out_dir} (sequential CART; NO formal privacy guarantee: review before any "
          f"release)\n  disclosure review report (confidential statistics, never release it "
          f"with the files): {result.report}")
    return 0


class _PrintVersion(argparse.Action):
    """--version: computed only when asked (code_version asks git), imports no Prefect."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        from pseo_das.version import code_version
        print(f"pseo-das {code_version()}")
        parser.exit()


def parser() -> argparse.ArgumentParser:
    main = argparse.ArgumentParser(prog="pseo-das", description=__doc__)
    main.add_argument("--version", action=_PrintVersion,
                      help="print the version (and the git commit of a checkout) and exit")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", help="show the traceback of an "
                        "unexpected error")
    keyed = argparse.ArgumentParser(add_help=False)
    keyed.add_argument("--seed-key", help="the agency's seed key file (default: "
                       "$PSEO_DAS_SEED_KEY): seals new release seeds in the privacy store and "
                       "opens recorded ones (reruns, republication, replay)")
    sub = main.add_subparsers(dest="command", required=True)

    key = sub.add_parser("key", parents=[common], help="create the agency's seed key (the "
                         "custodian's; kept apart from the privacy store)")
    key.add_argument("action", choices=["new"], help="new: write a new random 256-bit key, "
                     "created readable by its owner only")
    key.add_argument("file", help="the key file to create (never overwritten)")
    key.set_defaults(run=_key)

    synth = sub.add_parser("synth", parents=[common], help="write a synthetic confidential data set (Parquet)")
    synth.add_argument("--out", required=True, help="folder for graduates.parquet and outcomes.parquet")
    synth.add_argument("--graduates", type=positive_int, default=200_000, help="number of graduates (default 200,000)")
    synth.add_argument("--seed", type=int, default=20240101, help="random seed (default 20240101)")
    synth.add_argument("--cip-switch-year", type=int, default=2020,
                       help="first graduation year coded in CIP-2020; earlier graduates carry "
                            "CIP-2010 codes (default 2020, as cip.switch_year)")
    synth.add_argument("--part-graduates", type=positive_int, metavar="N",
                       help="write folders graduates/ and outcomes/ of Parquet part files of "
                            "about N graduates each (a partitioned dataset) instead of one file each")
    synth.add_argument("--institutions", type=positive_int, default=40, metavar="N",
                       help="40 (default): the demo universe, 40 institutions in 5 states; any "
                            "other N: a national universe of N institutions in every state, the "
                            "largest with a few percent of the graduates (at N of 500 and more)")
    synth.add_argument("--employers", action="store_true",
                       help="add the optional outcomes column employer_id (synthetic "
                            "establishments, a few dominant ones) for flows.mechanism other than "
                            "geometric; every other value is the same as without it")
    synth.add_argument("--jobs", action="store_true",
                       help="write the agency's layout instead: graduates one row per degree "
                            "(about 20%% of bachelor's graduates with a master's too) and "
                            "jobs.parquet, one row per person, year and job (a quarter of the "
                            "years over two jobs); single files only")
    synth.add_argument("--second-degree-share", type=float, metavar="S",
                       help="--jobs only: the expected share S of persons with a second degree "
                            "(a master's), e.g. 0.2 for the bounding study (default: 20%% of the "
                            "bachelor's graduates who can, about 7.8%% of persons)")
    synth.set_defaults(run=_synth)

    release = sub.add_parser("release", parents=[common, keyed], help="run a quarterly release (earnings and employment flows)")
    release.add_argument("--data", required=True, help="folder with graduates and outcomes (.parquet or .csv)")
    release.add_argument("--out", required=True, help="release folder to create (must not exist)")
    release.add_argument("--config", help="TOML file overriding the default configuration")
    release.add_argument("--seed", help="release seed, 64 hex digits (default: the release id's "
                         "recorded seed, else 256 fresh random bits); visible to other users in "
                         "`ps`: prefer --seed-file or $PSEO_DAS_SEED")
    release.add_argument("--seed-file", help="file holding the release seed (64 hex digits)")
    release.add_argument("--reference", help="folder with the public reference files: "
                         "j2j_state_flows.csv (or j2jod/, the per-state downloads), "
                         "qcew_state_sector.csv (or qcew/, the annual CSVs by area or industry), "
                         "state_coverage.csv, nces/Crosswalk2010to2020.csv, ipeds/ (completions and "
                         "directories), bls/cu.data*, cip_hard_coded_transitions.csv "
                         "(default: the packaged demo files)")
    release.add_argument("--release-id", help="release identifier (default: UTC timestamp); "
                         "running a recorded release id again with the same inputs reuses its seed "
                         "and spends nothing")
    release.add_argument("--store", help="the privacy store folder (default: $PSEO_DAS_STORE, else "
                         "privacy.store of the configuration; never the current folder)")
    release.add_argument("--init-store", action="store_true", help="create the privacy store if "
                         "it does not exist (otherwise a missing store is refused)")
    release.add_argument("--remeasure", metavar="POPULATIONS|all", help="measure these populations "
                         "again although the store has their measurements (new spending, checked "
                         "against the lifetime cap): 'all' or INSTITUTION[:DEGREE[:COHORT]],...")
    release.add_argument("--supersede", action="store_true", help="plan a recorded release id "
                         "again with changed inputs or configuration (into a new folder)")
    release.add_argument("--tracking-uri", help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI "
                         "or sqlite:///<cwd>/audit/mlflow.db)")
    release.add_argument("--engine", choices=["local", "dask"], default="local",
                         help="how the microdata are read and counted: in this process, in "
                         "chunks (local, default), or by the workers of a Dask cluster (dask: "
                         "Parquet inputs sorted by person_id); the counts are the same")
    release.add_argument("--scheduler", metavar="ADDRESS", help="with --engine dask: the "
                         "scheduler of a running cluster, e.g. tcp://10.0.0.5:8786 (default: a "
                         "LocalCluster on this machine)")
    release.add_argument("--workers", type=positive_int, default=2, help="with --engine dask "
                         "and no --scheduler: LocalCluster worker processes (default 2)")
    release.add_argument("--chunk-rows", type=positive_int, default=1_000_000,
                         help="graduates per chunk (local) or per Dask task (default "
                         "1,000,000): bounds the memory per chunk; changes no count")
    release.add_argument("--hold-for-review", action="store_true", help="measure, "
                         "post-process and stage the complete release in the privacy store's "
                         "review folder instead of publishing it; `pseo-das review approve` "
                         "then `pseo-das publish` publish it (required when "
                         "release.require_review = true)")
    release.set_defaults(run=_release)

    review = sub.add_parser("review", parents=[common], help="the disclosure review board's "
                            "decision on a release held for review (recorded in the privacy "
                            "store's hash chain and the MLflow run)")
    review.add_argument("action", choices=["approve", "reject"])
    review.add_argument("release", metavar="RELEASE", help="the release id held for review")
    review.add_argument("--by", help="who decides (recorded)")
    review.add_argument("--clearance", help="approve: the clearance number (recorded; in the "
                        "release notes and manifest)")
    review.add_argument("--note", help="approve: a note (recorded; in the release notes)")
    review.add_argument("--reason", help="reject: why (recorded)")
    review.add_argument("--store", help="the privacy store folder (default: $PSEO_DAS_STORE)")
    review.set_defaults(run=_review)

    publish = sub.add_parser("publish", parents=[common], help="publish a release the board "
                             "approved: exactly its staged files, atomically")
    publish.add_argument("release", metavar="RELEASE", help="the approved release id")
    publish.add_argument("--out", required=True, help="release folder to create (must not "
                         "exist)")
    publish.add_argument("--store", help="the privacy store folder (default: $PSEO_DAS_STORE)")
    publish.set_defaults(run=_publish)

    republish = sub.add_parser("republish", parents=[common, keyed], help="re-derive a published release's files from the "
                               "privacy store alone (no microdata, no new noise)")
    republish.add_argument("--store", help="the privacy store folder (default: $PSEO_DAS_STORE)")
    republish.add_argument("--release", required=True, help="the release id to re-derive")
    republish.add_argument("--out", required=True, help="release folder to create (must not exist)")
    republish.add_argument("--cip-vintage", choices=["2020"],
                           help="publish a release of an earlier version (CIP-2010 codes) in "
                                "CIP-2020 codes, recast from its stored measurements")
    republish.add_argument("--reference", help="folder with the CIP recast's inputs for "
                           "--cip-vintage (nces/, ipeds/, cip_hard_coded_transitions.csv; "
                           "default: the packaged ones)")
    republish.set_defaults(run=_republish)

    store = sub.add_parser("store", parents=[common], help="create, inspect, verify a privacy store or change "
                           "its policy")
    store.add_argument("action", choices=["init", "show", "verify", "set-policy", "adopt"],
                       help="init: create an empty store; show: releases, measurements and "
                       "epsilon spent per graduate and population; verify: check its hash chain, rows, "
                       "triggers and objects, and the chain heads MLflow runs recorded; "
                       "set-policy: record a new lifetime cap or largest epsilon per tabulation; "
                       "adopt: name this store the one of its id when a copy of it has "
                       "diverged (the copy's MLflow runs are disowned)")
    store.add_argument("dir", nargs="?", metavar="DIR", help="the store folder (default: "
                       "$PSEO_DAS_STORE)")
    store.add_argument("--top", type=int, default=10, help="show: graduation years to list (default 10)")
    store.add_argument("--lifetime-cap", help="init, set-policy: lifetime epsilon cap per "
                       "graduate (init default 30)")
    store.add_argument("--lifetime-delta-cap", help="init, set-policy: lifetime delta cap per "
                       "graduate (init default 0.01; below 1)")
    store.add_argument("--max-tabulation-epsilon", help="init, set-policy: largest epsilon of "
                       "one tabulation (init default 10, at most 10)")
    store.add_argument("--by", help="init, set-policy, adopt: who decides (recorded; init "
                       "default: the login name)")
    store.add_argument("--reason", help="set-policy, adopt: why (recorded; e.g. the DRB "
                       "decision)")
    store.add_argument("--tracking-uri", help="verify, adopt: the MLflow tracking store whose runs "
                       "recorded the store's chain heads (default as for release)")
    store.set_defaults(run=_store)

    schedule = sub.add_parser("schedule", parents=[common, keyed], help="serve the quarterly release deployment (needs a "
                              "Prefect server: PREFECT_API_URL)")
    schedule.add_argument("--data", required=True, help="folder with graduates and outcomes")
    schedule.add_argument("--releases", required=True, help="folder for release folders "
                          "(each run publishes to RELEASES/<quarter, e.g. 2027Q1>)")
    schedule.add_argument("--config", help="TOML file overriding the default configuration")
    schedule.add_argument("--reference", help="folder with the public reference files")
    schedule.add_argument("--tracking-uri", help="MLflow tracking URI (default as for release)")
    schedule.add_argument("--store", help="the privacy store folder (default: $PSEO_DAS_STORE, "
                          "else privacy.store of the configuration)")
    schedule.add_argument("--cron", default="0 6 15 1,4,7,10 *",
                          help="schedule (default: 06:00 on the 15th of Jan, Apr, Jul, Oct)")
    schedule.add_argument("--timezone", default="America/New_York", help="time zone of the schedule")
    schedule.set_defaults(run=_schedule)

    server = sub.add_parser("server", parents=[common], help="a Prefect server kept running "
                            "between commands (releases report to it instead of starting one)")
    server.add_argument("action", choices=["start", "stop", "status"])
    server.add_argument("--port", type=positive_int, help="start: its port on 127.0.0.1 "
                        "(default: a free one)")
    server.set_defaults(run=_server)

    audit = sub.add_parser("audit", parents=[common, keyed], help="verify a published release against its MLflow run "
                           "(outputs, ledger, inputs, replay); exit 0 only if every check passes")
    audit.add_argument("target", metavar="RUN_ID_OR_RELEASE_DIR",
                       help="a release folder (its manifest names the run) or an MLflow run id")
    audit.add_argument("--tracking-uri", help="MLflow tracking URI (default: the one in the "
                       "release's manifest; for a run id $MLFLOW_TRACKING_URI or "
                       "sqlite:///<cwd>/audit/mlflow.db)")
    audit.add_argument("--data", help="folder with the confidential inputs (default: the folder "
                       "the run logged)")
    audit.add_argument("--report", help="folder for audit_report.md/.html (default: "
                       "audit_reports/<release id>-<UTC time>/)")
    audit.add_argument("--no-replay", action="store_true", help="do not rerun the release, and "
                       "accept that the confidential inputs are not available")
    audit.set_defaults(run=_audit)

    noise = sub.add_parser("noise-sample", parents=[common], help="draws from exactly the "
                           "release's noise sampler and stream, for an auditor's own tests")
    noise.add_argument("--epsilon", required=True, help="exact epsilon: a decimal (1.5) or a "
                       "fraction (3/2)")
    noise.add_argument("--count", type=int, required=True, help="number of draws")
    noise.add_argument("--seed", type=_seed_hex, required=True, help="a seed, 64 hex digits")
    noise.add_argument("--tabulation", default="noise-sample", help="the measurement id that "
                       "keys the stream (a release's is e.g. earnings.I.cip4.y1@2026Q4/1; "
                       "default noise-sample)")
    noise.add_argument("--out", required=True, help="FILE.npy (int64), or - for one value per "
                       "line on standard output")
    noise.set_defaults(run=_noise_sample)

    evaluate = sub.add_parser("evaluate", parents=[common], help="run the accuracy study (paper section 5) on synthetic data")
    evaluate.add_argument("--data", required=True, help="folder with synthetic graduates and outcomes")
    evaluate.add_argument("--out", required=True, help="folder for the tables, figures and report "
                          "(created if missing; existing study files are replaced)")
    evaluate.add_argument("--product", choices=["earnings", "flows", "mos", "bounding"],
                          default="earnings",
                          help="earnings: the percentile study (paper section 5); flows: the "
                          "employment flows post-processing study; mos: the cell statistics (mos, mos-dp, histogram means; --epsilons, --draws); "
                          "bounding: percentiles, counts and flows at privacy.max_degrees_per_person "
                          "k = 1, 2, 3 on the jobs layout (--draws, default 10; --quick: 1)")
    evaluate.add_argument("--quick", action="store_true", help="reduced grid (earnings: bins 10-30 by 5, "
                          "7 epsilons, 5 draws, under two minutes; flows: epsilon 1.5, 2 draws; bounding: 1 draw)")
    evaluate.add_argument("--epsilons", type=lambda t: [float(x) for x in t.split(",")],
                          help="flows only: comma-separated epsilons (default 0.5,1,1.5,2,3)")
    evaluate.add_argument("--draws", type=int, help="flows only: noise draws per setting (default 5)")
    evaluate.add_argument("--total-shares", type=lambda t: [float(x) for x in t.split(",")],
                          help="flows only: comma-separated shares of epsilon for a measured "
                          "origin-cell total (default 0.1,0.2)")
    evaluate.add_argument("--nonemployed-weights", type=lambda t: [float(x) for x in t.split(",")],
                          help="flows only: comma-separated non-employed weights of the appendix "
                          "candidate (default 1,0.01,3e-06)")
    evaluate.add_argument("--mechanisms", type=_mechanisms, help="flows only: comma-separated "
                          "flows mechanisms (geometric, log-laplace, smooth-gamma, smooth-laplace) "
                          "to compare on data with employer_id, at --alphas x --epsilons "
                          "(default 0.01,0.05,0.1,0.15,0.2 x 0.25,0.5,1,2,4), instead of the "
                          "correction study")
    evaluate.add_argument("--alphas", type=lambda t: [float(x) for x in t.split(",")],
                          help="flows --mechanisms only: comma-separated alphas")
    evaluate.add_argument("--seed", type=_seed_hex, help="simulation seed, 64 hex digits "
                          "(default: a fixed public seed, so the study is repeatable)")
    evaluate.add_argument("--i-know-this-is-synthetic", action="store_true",
                          help="run on a folder without the mark `pseo-das synth` writes "
                               "(the study writes true per-cell values: never on confidential data)")
    evaluate.set_defaults(run=_evaluate)

    synthesize = sub.add_parser("synthesize", parents=[common], help="synthetic microdata "
                                "from the confidential inputs by sequential CART models (no "
                                "formal privacy guarantee), with a comparison report")
    synthesize.add_argument("--data", required=True, help="folder with the confidential "
                            "graduates and outcomes")
    synthesize.add_argument("--out", required=True, help="folder to create for the synthetic "
                            "graduates.parquet and outcomes.parquet (must not exist)")
    synthesize.add_argument("--seed", type=_seed_hex, default="5e" * 32,
                            help="64 hex digits (default: a fixed public seed)")
    synthesize.add_argument("--config", help="TOML file overriding the default configuration")
    synthesize.set_defaults(run=_synthesize)

    verify = sub.add_parser("verify-server", parents=[common, keyed], help="the verification server "
                            "(Barrientos et al. 2017): serve, init, add-analyst, show, fit")
    verify.add_argument("action", nargs="?", default="serve",
                        choices=["serve", "init", "add-analyst", "show", "fit"],
                        help="serve (default): answer queries over HTTP; init: create the "
                        "verification ledger in a privacy store (--global-budget); add-analyst "
                        "NAME --budget E: register an analyst and print their token; show: "
                        "budgets and the ledger's check; fit: a query's estimate on synthetic "
                        "data (--data, --query)")
    verify.add_argument("name", nargs="?", help="add-analyst: the analyst's name")
    verify.add_argument("--data", help="serve: the confidential data folder; fit: synthetic data")
    verify.add_argument("--store", help="the privacy store folder (default: $PSEO_DAS_STORE)")
    verify.add_argument("--host", default="127.0.0.1", help="serve: address (default 127.0.0.1)")
    verify.add_argument("--port", type=int, default=8765, help="serve: port (default 8765)")
    verify.add_argument("--budget", help="add-analyst: the analyst's epsilon budget")
    verify.add_argument("--global-budget", help="init: epsilon all queries together may spend")
    verify.add_argument("--by", help="init, add-analyst: who does it (recorded)")
    verify.add_argument("--query", help="fit: the query, a JSON file")
    verify.add_argument("--tracking-uri", help="serve: MLflow tracking URI for the session's "
                        "audit run (default as for release: $MLFLOW_TRACKING_URI, else "
                        "./audit/mlflow.db, created in the current folder if missing)")
    verify.add_argument("--query-seconds", type=_positive_seconds, help="serve: a query is "
                        "answered or refused (HTTP 503, nothing charged) within this many "
                        "seconds (default: docs/method/verification.md, Limits)")
    verify.add_argument("--concurrent-queries", type=_concurrency, metavar="N",
                        help="serve: new measurements computed at once, 1 to 64")
    verify.add_argument("--rate-limit", type=_rate_limit, help="serve: authenticated requests "
                        "per analyst, e.g. 30/minute or 100/hour (HTTP 429 beyond)")
    verify.add_argument("--config", help="TOML configuration (the cohort years of the inputs)")
    verify.set_defaults(run=_verify_server)

    layout = sub.add_parser("validate-layout", parents=[common], help="check a release's public "
                            "pseoe_all and pseof_all (.csv.gz or .csv) against the LEHD Public "
                            "Use Schema V4.14 (exit 0 valid, 1 problems, 2 missing folder or file)")
    layout.add_argument("public_dir", metavar="PUBLIC_DIR", help="the folder holding the files: "
                        "a release's public/ (its all/ folder is read) or a folder of downloads")
    layout.set_defaults(run=_validate_layout)

    explore = sub.add_parser("explore", parents=[common], help="write the offline explorer of a "
                             "release (every release writes public/explorer and internal/explorer)")
    explore.add_argument("release_dir", metavar="RELEASE_DIR", help="a release folder")
    explore.add_argument("--out", help="the explorer folder to create (default: RELEASE_DIR-explorer "
                         "beside the release; a release folder is never changed)")
    explore.add_argument("--board", action="store_true", help="add the review board's view "
                         "(from the release's internal folder: keep that copy internal)")
    explore.set_defaults(run=_explore)
    return main


def _key(args: argparse.Namespace) -> int:
    from pseo_das.tasks.privacy.seed_custody import SEED_KEY_ENV, create_key_file
    path = create_key_file(Path(args.file))
    print(f"created the seed key {path} (mode 0600). Keep it apart from the privacy store, "
          f"with the custodian; releases find it by --seed-key or ${SEED_KEY_ENV}")
    return 0


def _use_seed_key(args: argparse.Namespace) -> None:
    """--seed-key FILE: checked, then named to the whole process ($PSEO_DAS_SEED_KEY)."""
    if getattr(args, "seed_key", None):
        from pseo_das.tasks.privacy.seed_custody import SEED_KEY_ENV, SeedKey
        os.environ[SEED_KEY_ENV] = str(SeedKey.from_file(Path(args.seed_key)).path)


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    limit_malloc_arenas()      # before a release's threads make arenas of their own
    try:
        _use_seed_key(args)
        code = args.run(args)
    except BrokenPipeError:  # output piped into a reader that stopped (e.g. `| head`)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    except KeyboardInterrupt:
        print(f"\npseo-das {args.command}: interrupted", file=sys.stderr)
        code = 130
    except Exception as exc:
        code = _failed(args, disclosed(exc))   # on the terminal, its message in full
    # What is left is freed at exit without the interpreter's final collections walking it
    # (2-3 s after a tiny release on a loaded machine; docs/develop/performance.md): files
    # are closed and Prefect's and logging's exit hooks still run.
    gc.freeze()
    raise SystemExit(code)


def _failed(args: argparse.Namespace, exc: BaseException) -> int:
    """Report the exception the command stopped on; returns the exit code."""
    if isinstance(exc, PseoDasError):  # a refusal or a failed check: its message, exit code
        if args.debug:
            traceback.print_exception(exc)
        return refused(args, exc, exc.exit_code)
    if args.debug:   # no traceback reaches a user unless --debug asks for it
        raise exc
    return _unexpected(args.command, exc)


def refused(args: argparse.Namespace, exc: BaseException, exit_code: int = EXIT_BAD_INPUT) -> int:
    """Say why the command stopped: its headline, then the exception's message. Returns
    the exit code."""
    headline = REFUSAL_HEADLINES.get(args.command, "pseo-das {command}: ")
    print(headline.format(**vars(args)) + str(exc), file=sys.stderr)
    return exit_code


def _unexpected(command: str, exc: BaseException) -> int:
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        where = f" writing {exc.filename}" if exc.filename else ""
        print(f"\npseo-das {command}: FAILED: the disk is full{where} ({exc.strerror}); nothing "
              "was published. Free some space and run the same command again.", file=sys.stderr)
        return EXIT_BAD_INPUT
    if isinstance(exc, OSError):
        print(f"\npseo-das {command}: FAILED: {exc.strerror or exc}"
              + (f": {exc.filename}" if exc.filename else ""), file=sys.stderr)
        return EXIT_BAD_INPUT
    print(f"\npseo-das {command}: FAILED with an unexpected error: {type(exc).__name__}: {exc}\n"
          "Run the same command with --debug for the traceback, and report it.", file=sys.stderr)
    return EXIT_CHECK_FAILED
