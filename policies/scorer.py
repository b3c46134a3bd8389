"""Scoring models of the `learned` policy: a linear scorer or a small MLP, numpy only, in JSON.

A model scores each of the K candidates of a decision point (`schedlab.policies.observation`)
from its own features followed by the global ones (``inputs``: the F + G names), and
scores "no more starts" from the global features alone (``stop_weights``). The
greedy choice is the best valid score (ties: the lowest index). A linear model is one
layer; an MLP has hidden layers with tanh and a last layer of width 1.

File format (JSON, one object)::

    {"format": "schedlab-scorer", "version": 1, "kind": "linear" | "mlp",
     "k": 16, "durations": true,
     "inputs": ["present", ..., "cpu_only", "bias", ..., "running_left"],
     "global_inputs": ["bias", ..., "running_left"],
     "layers": [{"weights": [[...], ...], "bias": [...]}, ...],   # (in, out) matrices
     "stop_weights": [...]}

`k` and `durations` are the observation the model was trained on: the policy and the
Gym environment rebuild exactly that observation from them.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from schedlab.policies.observation import GLOBAL_FEATURES, JOB_FEATURES, ObsConfig
from schedlab.sim.errors import InvalidParameter

__all__ = ["FORMAT", "Scorer", "load_scorer"]

FORMAT = "schedlab-scorer"
VERSION = 1
INPUTS: tuple[str, ...] = JOB_FEATURES + GLOBAL_FEATURES
"""What each candidate's score reads: its own features, then the global ones."""

Layer = tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True, eq=False)
class Scorer:
    """A scoring model over decision points of one observation shape (`cfg`)."""

    cfg: ObsConfig
    layers: tuple[Layer, ...]
    stop_weights: np.ndarray

    @property
    def kind(self) -> str:
        """'linear' (one layer) or 'mlp'."""
        return "linear" if len(self.layers) == 1 else "mlp"

    # --- construction ---

    @classmethod
    def linear(cls, cfg: ObsConfig, job_weights: Any, stop_weights: Any) -> Scorer:
        """A linear scorer: weights over `INPUTS` for candidates, over the globals for stop."""
        w = np.asarray(job_weights, dtype=np.float64).reshape(len(INPUTS), 1)
        return cls(cfg, ((w, np.zeros(1)),), np.asarray(stop_weights, dtype=np.float64))

    @classmethod
    def default(cls, cfg: ObsConfig | None = None) -> Scorer:
        """Earliest placeable candidate first, never "no more" while one fits.

        That is fifo-backfill over the first K pending jobs: the model `learned` runs
        without a model file.
        """
        cfg = cfg or ObsConfig()
        w = np.zeros(len(INPUTS))
        w[INPUTS.index("position")] = -1.0
        stop = np.zeros(len(GLOBAL_FEATURES))
        stop[GLOBAL_FEATURES.index("bias")] = -10.0
        return cls.linear(cfg, w, stop)

    @classmethod
    def from_vector(cls, cfg: ObsConfig, theta: Any) -> Scorer:
        """A linear scorer from one flat vector: candidate weights, then stop weights."""
        theta = np.asarray(theta, dtype=np.float64)
        n = len(INPUTS)
        if theta.shape != (n + len(GLOBAL_FEATURES),):
            raise ValueError(f"expected a vector of {n + len(GLOBAL_FEATURES)} numbers, "
                             f"got shape {theta.shape}")
        return cls.linear(cfg, theta[:n], theta[n:])

    @staticmethod
    def vector_size() -> int:
        """Length of the flat parameter vector of a linear scorer (`from_vector`)."""
        return len(INPUTS) + len(GLOBAL_FEATURES)

    # --- scoring ---

    def reads(self) -> frozenset[str]:
        """The observation features some weight reads (nonzero in the first layer or stop).

        The others add an exact 0 to every score whatever their value, so an observer
        may leave them 0 (`Observer(cfg, reads)`): the scores are bit for bit the same.
        """
        w = self.layers[0][0]
        used = {name for name, row in zip(INPUTS, w, strict=True) if np.any(row != 0)}
        used.update(name for name, x in zip(GLOBAL_FEATURES, self.stop_weights, strict=True)
                    if x != 0)
        return frozenset(used)

    def scores(self, obs: np.ndarray) -> np.ndarray:
        """Scores of the K start choices and of "no more" (K + 1 numbers)."""
        g = len(GLOBAL_FEATURES)
        f = len(JOB_FEATURES)
        k = self.cfg.k
        x = np.asarray(obs, dtype=np.float64)
        glob = x[:g]
        h = np.empty((k, f + g))  # each candidate's features, then the global ones
        h[:, :f] = x[g:].reshape(k, f)
        h[:, f:] = glob
        last = len(self.layers) - 1
        for i, (w, b) in enumerate(self.layers):
            h = h @ w + b
            if i < last:
                h = np.tanh(h)
        out = np.empty(k + 1)
        out[:k] = h[:, 0]
        out[k] = glob @ self.stop_weights
        return out

    def act(self, obs: np.ndarray, mask: np.ndarray) -> int:
        """The greedy choice: the best-scoring valid action (ties: lowest index)."""
        s = self.scores(obs)
        s[np.asarray(mask) == 0] = -np.inf
        return int(np.argmax(s))

    # --- files ---

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of the file format."""
        return {
            "format": FORMAT, "version": VERSION, "kind": self.kind, "k": self.cfg.k,
            "durations": self.cfg.durations, "inputs": list(INPUTS),
            "global_inputs": list(GLOBAL_FEATURES),
            "layers": [{"weights": w.tolist(), "bias": b.tolist()} for w, b in self.layers],
            "stop_weights": self.stop_weights.tolist(),
        }

    def save(self, path: str | Path) -> Path:
        """Write the model as JSON; returns the path."""
        p = Path(path)
        p.write_text(json.dumps(self.to_dict(), indent=1) + "\n", encoding="utf-8")
        return p

    @classmethod
    def from_dict(cls, data: Any, where: str = "model") -> Scorer:
        """A model from its JSON object; a bad field raises InvalidParameter naming it."""
        def bad(field: str, why: str) -> InvalidParameter:
            return InvalidParameter(f"{where}: field {field!r}: {why}")

        if not isinstance(data, dict):
            raise InvalidParameter(f"{where}: expected a JSON object, got {type(data).__name__}")
        if data.get("format") != FORMAT:
            raise bad("format", f"{data.get('format')!r}; expected {FORMAT!r}")
        if data.get("version") != VERSION:
            raise bad("version", f"{data.get('version')!r}; this schedlab reads {VERSION}")
        k = data.get("k")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise bad("k", f"{k!r}; expected an integer >= 1 (candidates per decision)")
        durations = data.get("durations", True)
        if not isinstance(durations, bool):
            raise bad("durations", f"{durations!r}; expected true or false")
        cfg = ObsConfig(k=k, durations=durations)
        for field, names in (("inputs", INPUTS), ("global_inputs", GLOBAL_FEATURES)):
            if list(data.get(field) or []) != list(names):
                raise bad(field, f"features {data.get(field)!r} differ from this schedlab's "
                          f"{list(names)}")
        layers_raw = data.get("layers")
        if not isinstance(layers_raw, list) or not layers_raw:
            raise bad("layers", "expected a non-empty list of {weights, bias}")
        layers: list[Layer] = []
        width = len(INPUTS)
        for i, layer in enumerate(layers_raw):
            name = f"layers[{i}]"
            if not isinstance(layer, dict):
                raise bad(name, "expected an object with weights and bias")
            w = _array(layer.get("weights"), 2, bad, f"{name}.weights")
            b = _array(layer.get("bias"), 1, bad, f"{name}.bias")
            if w.shape[0] != width:
                raise bad(f"{name}.weights", f"{w.shape[0]} rows; expected {width} (the "
                          "previous layer's width)")
            if b.shape != (w.shape[1],):
                raise bad(f"{name}.bias", f"{b.shape[0]} numbers; expected {w.shape[1]}")
            layers.append((w, b))
            width = w.shape[1]
        if width != 1:
            raise bad(f"layers[{len(layers) - 1}].weights", f"{width} columns; the last "
                      "layer gives one score per candidate: expected 1")
        stop = _array(data.get("stop_weights"), 1, bad, "stop_weights")
        if stop.shape != (len(GLOBAL_FEATURES),):
            raise bad("stop_weights", f"{stop.shape[0]} numbers; expected "
                      f"{len(GLOBAL_FEATURES)} (one per global input)")
        return cls(cfg, tuple(layers), stop)


def _array(value: Any, ndim: int, bad: Any, field: str) -> np.ndarray:
    try:
        a = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise bad(field, f"expected a {'matrix' if ndim == 2 else 'list'} of numbers") \
            from None
    if a.ndim != ndim or a.size == 0:
        raise bad(field, f"expected a non-empty {'matrix' if ndim == 2 else 'list'} of numbers")
    if not all(math.isfinite(x) for x in a.ravel().tolist()):
        raise bad(field, "expected finite numbers")
    return a


def load_scorer(path: str | Path) -> Scorer:
    """Read a model file (the format of the module doc); errors name the file and field."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except OSError as e:
        raise InvalidParameter(f"model file {p}: cannot read it: {e.strerror or e}") from None
    except json.JSONDecodeError as e:
        raise InvalidParameter(f"model file {p}: not JSON: line {e.lineno} column "
                               f"{e.colno}: {e.msg}") from None
    return Scorer.from_dict(data, f"model file {p}")
