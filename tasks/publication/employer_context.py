"""What the DRB report says about the employer-side protection of the flows
(flows.mechanism other than "geometric"): the mechanism, its parameters and the two
guarantees, from the configuration and the ledger. Privacy cost: none (public parameters;
x_v and S*, computed from confidential data, are never reported)."""
from __future__ import annotations

from pseo_das.config import ReleaseConfig
from pseo_das.tasks.privacy.establishment import (MECHANISM_NAMES, FlowsMechanism,
                                                  log_laplace_lambda, smooth_gamma_min_epsilon,
                                                  smooth_laplace_min_epsilon)
from pseo_das.tasks.privacy.ledger import PrivacyLedger


def employer_context(cfg: ReleaseConfig, ledger: PrivacyLedger) -> dict | None:
    """None for the geometric mechanism; otherwise the mechanism, alpha, epsilon, delta,
    the feasibility margin and, per measured flows tabulation, the employers' notion and
    worst-case epsilon (the ledger's)."""
    protection = cfg.flows.employer_protection()
    if protection is None:
        return None
    m = protection.mechanism
    if m is FlowsMechanism.LOG_LAPLACE:
        condition = (f"lambda = 2 ln(1 + alpha) / epsilon = {log_laplace_lambda(protection.alpha, protection.epsilon):.4f} "
                     "(below 1: finite mean; below 1/2: finite variance)")
    elif m is FlowsMechanism.SMOOTH_GAMMA:
        condition = (f"1 + alpha <= e^(epsilon/4): the smallest epsilon for alpha "
                     f"{protection.alpha:g} is {smooth_gamma_min_epsilon(protection.alpha):.4f}")
    else:
        condition = (f"1 + alpha <= e^(epsilon / (2 ln(2/delta))): the smallest epsilon for "
                     f"alpha {protection.alpha:g} and delta {protection.delta:g} is "
                     f"{smooth_laplace_min_epsilon(protection.alpha, protection.delta):.4f}")
    tabulations = [{"tabulation_id": e.tabulation_id, "n_cells": e.n_cells,
                    "notion": e.employer_notion, "employer_epsilon": e.employer_epsilon}
                   for e in ledger.entries if e.employer_notion]
    return {"mechanism": m.value, "name": MECHANISM_NAMES[m], "alpha": protection.alpha,
            "epsilon": protection.epsilon, "delta": protection.delta,
            "unbiased": protection.unbiased, "condition": condition,
            "log_laplace": m is FlowsMechanism.LOG_LAPLACE, "tabulations": tabulations}
