"""One step of a sequential CART synthesizer (Reiter 2005; Barrientos et al. 2017, section
2.2): a decision tree fitted on the confidential records predicts the variable from the
variables synthesized before it; each synthetic record falls in a leaf and takes the value
of a confidential record (a donor) drawn uniformly from that leaf. Privacy cost: none is
claimed, and none is guaranteed: donors' values are copied into the synthetic file.
"""
from __future__ import annotations

import numpy as np
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

MIN_LEAF = 25           # donors per leaf at least (a value is never drawn from fewer)
TREE_STATE = 0          # sklearn's tie-breaking among equal splits: fixed, so fits repeat


def fit_leaves(x_train: np.ndarray, y_train: np.ndarray, continuous: bool,
               min_leaf: int = MIN_LEAF):
    """The fitted tree (classifier for a code, regressor for an amount)."""
    model = (DecisionTreeRegressor if continuous else DecisionTreeClassifier)(
        min_samples_leaf=min_leaf, random_state=TREE_STATE)
    return model.fit(x_train, y_train)


def donors(train_leaves: np.ndarray, new_leaves: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
    """For each new record, a training record of its leaf, drawn by its uniform in [0, 1)."""
    order = np.argsort(train_leaves, kind="stable")
    ordered = train_leaves[order]
    start = np.searchsorted(ordered, new_leaves, "left")
    end = np.searchsorted(ordered, new_leaves, "right")
    assert (end > start).all(), "a leaf without donors"
    return order[start + np.floor(uniforms * (end - start)).astype(np.int64)]


def synthesize_step(x_train: np.ndarray, y_train: np.ndarray, x_new: np.ndarray,
                    uniforms: np.ndarray, continuous: bool = False) -> np.ndarray:
    """Donor indices (into the training records) for the new records, one uniform in
    [0, 1) each. With no predictors (no columns) the donors are drawn from all training
    records (the marginal)."""
    if len(x_new) == 0:
        return np.zeros(0, dtype=np.int64)
    if x_train.shape[1] == 0:
        return np.floor(uniforms * len(y_train)).astype(np.int64)
    tree = fit_leaves(x_train, y_train, continuous)
    return donors(tree.apply(x_train), tree.apply(x_new), uniforms)
