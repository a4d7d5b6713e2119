"""Named sound events from YAMNet's scores: the AudioSet ontology and the measured per-class policy.

YAMNet scores 521 AudioSet classes per 0.975 s frame. Its scores are not probabilities one can state: a class
states an event only where its precision was measured on labelled audio (`training/calibrate_yamnet.py`: the
labelled event mixes of the TRAIN packages choose a threshold, those of the DEV packages confirm it). A class is
scored together with everything under it in the ontology (a "group": "Domestic animals, pets" is the best score
of Dog, Cat, Bark, Meow, ...), so where a leaf is not sure enough its parent may still be stated ("Explosion" for
a gunshot it is unsure of). The policy file `events_policy.json` (package data, tied to the model's sha256) lists
every class and group tried, its threshold and its precision and recall on TRAIN and DEV; only those marked
`in_evidence` state events.

Times: the frames' scores are pooled into the same 2 s windows as the other event experts (a window takes the
best score of the frames whose centre lies in it), so an event's span is a run of windows.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from earmark.experts.yamnet.model import (
    CLASS_MAP,
    CLASS_MAP_SHA256,
    FRAME,
    HOP,
    MODEL_SHA256,
    SR,
    checked_bytes,
    read_class_map,
)

HERE = Path(__file__).resolve().parent
ONTOLOGY = HERE / "audioset_ontology.json"
ONTOLOGY_SHA256 = "9c685f4403eecc3ca9be37fd7285cf212feaaea6ff7229d3e7ca89e0d1f2d15d"
POLICY = HERE / "events_policy.json"
WINDOW_S = 2.0


@dataclass(frozen=True)
class Node:
    mid: str
    name: str
    children: tuple[str, ...]  # names


class Ontology:
    """The AudioSet ontology by display name: parents, children, ancestors and the classes under a node."""

    def __init__(self, data: bytes) -> None:
        rows = json.loads(data)
        by_id = {r["id"]: r["name"] for r in rows}
        self.nodes = {
            r["name"]: Node(r["id"], r["name"], tuple(by_id[c] for c in r["child_ids"] if c in by_id)) for r in rows
        }
        self.parents: dict[str, list[str]] = {}
        for n in self.nodes.values():
            for c in n.children:
                self.parents.setdefault(c, []).append(n.name)

    def ancestors(self, name: str) -> set[str]:
        out: set[str] = set()
        todo = list(self.parents.get(name, ()))
        while todo:
            p = todo.pop()
            if p not in out:
                out.add(p)
                todo.extend(self.parents.get(p, ()))
        return out

    def subtree(self, name: str) -> set[str]:
        """The node and every class under it."""
        out, todo = set(), [name]
        while todo:
            n = todo.pop()
            if n not in out and n in self.nodes:
                out.add(n)
                todo.extend(self.nodes[n].children)
        return out


@functools.cache
def ontology() -> Ontology:
    """The vendored ontology (checked by sha256 at load)."""
    return Ontology(checked_bytes(ONTOLOGY, ONTOLOGY_SHA256))


@functools.cache
def class_names() -> tuple[str, ...]:
    """YAMNet's 521 class names in score order (the vendored class map, checked by sha256)."""
    return tuple(c.name for c in read_class_map(checked_bytes(CLASS_MAP, CLASS_MAP_SHA256)))


def group_indices(class_names: Sequence[str], node: str) -> np.ndarray:
    """Indices of `class_names` (YAMNet's 521) that lie in the node's subtree, the node included."""
    sub = ontology().subtree(node)
    return np.array([i for i, n in enumerate(class_names) if n in sub], dtype=np.int64)


def window_bounds_s(n_samples: int) -> list[tuple[float, float]]:
    """The 2 s windows of a clip of `n_samples` at 16 kHz, in seconds (those of the other event experts)."""
    from earmark.experts.learned.windows import window_bounds

    return [(a / SR, b / SR) for a, b in window_bounds(max(int(n_samples), 1), SR, WINDOW_S)]


def window_scores(frame_scores: np.ndarray, n_samples: int) -> np.ndarray:
    """(n_windows, n_classes): per 2 s window the best score of the frames whose centre lies in it (the nearest
    frame where none does)."""
    fs = np.asarray(frame_scores, np.float32)
    centres = (np.arange(len(fs)) * HOP + FRAME / 2) / SR
    bounds = window_bounds_s(n_samples)
    out = np.zeros((len(bounds), fs.shape[1]), np.float32)
    for k, (a, b) in enumerate(bounds):
        inside = (centres >= a) & (centres < b)
        out[k] = fs[inside].max(axis=0) if inside.any() else fs[int(np.argmin(np.abs(centres - (a + b) / 2)))]
    return out


@dataclass(frozen=True)
class Rule:
    name: str  # an AudioSet class or group, by display name
    threshold: float  # the group score from which it is stated
    precision: float  # its precision at that threshold on the DEV packages


@dataclass(frozen=True)
class Stated:
    name: str
    start_s: float
    end_s: float
    score: float  # the run's best group score
    precision: float


def load_policy(path: Path = POLICY) -> dict:
    """The policy file; refused unless it was measured on the vendored model."""
    meta = json.loads(path.read_text())
    if meta.get("model_sha256") != MODEL_SHA256:
        raise ValueError(
            f"{path} was measured on YAMNet {meta.get('model_sha256')!r}, not the vendored {MODEL_SHA256}: "
            "re-run training/calibrate_yamnet.py"
        )
    return meta


@functools.cache
def rules() -> tuple[Rule, ...]:
    """The classes and groups that may state an event (`in_evidence`), most specific first."""
    meta = load_policy()
    return tuple(
        Rule(c["name"], float(c["threshold"]), float(c["dev"]["precision"]))
        for c in meta["classes"]
        if c["in_evidence"]
    )


def stated_events(
    frame_scores: np.ndarray, n_samples: int, class_names: Sequence[str], policy: Iterable[Rule] | None = None
) -> list[Stated]:
    """The events a clip's YAMNet scores state under the policy: per window, every rule whose group score reaches
    its threshold, less those that a more specific stated rule lies under (a dog is said, not also an animal);
    consecutive windows of one rule are one event."""
    pol = list(rules() if policy is None else policy)
    if not pol or len(frame_scores) == 0:
        return []
    onto = ontology()
    ws = window_scores(np.asarray(frame_scores, np.float32), n_samples)
    bounds = window_bounds_s(n_samples)
    group = {r.name: group_indices(class_names, r.name) for r in pol}
    runs: dict[str, list[list[float]]] = {}
    for k, (a, b) in enumerate(bounds):
        hit = {}
        for r in pol:
            idx = group[r.name]
            if idx.size and (s := float(ws[k, idx].max())) >= r.threshold:
                hit[r.name] = s
        covered = set().union(*(onto.ancestors(n) for n in hit)) if hit else set()
        for name, s in hit.items():
            if name in covered:
                continue
            run = runs.setdefault(name, [])
            if run and a <= run[-1][1] + 1e-6:
                run[-1][1], run[-1][2] = max(run[-1][1], b), max(run[-1][2], s)
            else:
                run.append([a, b, s])
    prec = {r.name: r.precision for r in pol}
    return [
        Stated(name, round(a, 3), round(b, 3), round(s, 4), prec[name])
        for name, spans in sorted(runs.items())
        for a, b, s in spans
    ]
