"""Named sound events from YAMNet: the AudioSet ontology, an event head over its embedding, and the measured policy.

YAMNet scores 521 AudioSet classes per 0.975 s frame. Its scores are not probabilities one can state, and on
stylised game effects they name little; a small head over its 1,024-d embedding (`event_head.npz`, trained on the
labelled event mixes of the TRAIN packages by `training/train_yamnet_events.py`) learns the labelled classes
from it. A class states an event only where its precision was measured on labelled audio: per class or ontology
group, the TRAIN packages choose whether the head's probability, YAMNet's own group score (the best score of
everything under the node: "Domestic animals, pets" is the best of Dog, Cat, Bark, Meow, ...;
`training/calibrate_yamnet.py`), either, or both together states it, and from which value; the DEV packages confirm it. Where a
leaf is not sure enough its parent may still be stated ("Explosion" for a gunshot it is unsure of). The policy
file `event_head.json` (package data, tied to the model's and the head's sha256) lists every class and group
tried, its rule and its precision and recall on TRAIN and DEV; only those marked `in_evidence` state events.

Times: the frames are pooled into the same 2 s windows as the other event experts (a window takes the frames
whose centre lies in it), so an event's span is a run of windows.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from earmark.experts.learned.events import member_outputs
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
HEAD = HERE / "event_head.npz"  # the event head over the embedding (training/train_yamnet_events.py)
HEAD_POLICY = HERE / "event_head.json"
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


def window_features(frame_scores: np.ndarray, frame_embeddings: np.ndarray, n_samples: int) -> np.ndarray:
    """(n_windows, 2 * 1024 + 521): per 2 s window the max and the mean of the embeddings of the frames whose
    centre lies in it (the nearest frame where none does), then the max of their scores: the event head's input."""
    fe = np.asarray(frame_embeddings, np.float32)
    centres = (np.arange(len(fe)) * HOP + FRAME / 2) / SR
    bounds = window_bounds_s(n_samples)
    out = np.zeros((len(bounds), 2 * fe.shape[1]), np.float32)
    for k, (a, b) in enumerate(bounds):
        inside = (centres >= a) & (centres < b)
        e = fe[inside] if inside.any() else fe[[int(np.argmin(np.abs(centres - (a + b) / 2)))]]
        out[k, : fe.shape[1]], out[k, fe.shape[1] :] = e.max(axis=0), e.mean(axis=0)
    return np.concatenate([out, window_scores(frame_scores, n_samples)], axis=1)


@dataclass(frozen=True)
class Rule:
    name: str  # an AudioSet class or group, by display name
    threshold: float | None  # YAMNet's group score from which it is stated; None: the scores do not state it
    precision: float  # what it states was right this often on the DEV packages
    head_threshold: float | None = None  # the event head's probability from which it is stated; None: the head does not
    output: int | None = None  # the head's output for this node
    both: bool = False  # stated only where the head and the scores both reach their thresholds
    stated_as: str | None = None  # the class or group it states (None: itself): a thinly measured class's ancestor


@dataclass(frozen=True)
class Stated:
    name: str
    start_s: float
    end_s: float
    score: float  # the run's best score: the head's probability where the head stated it, else YAMNet's group score
    precision: float


def load_policy(path: Path = POLICY) -> dict:
    """A policy file; refused unless it was measured on the vendored model."""
    meta = json.loads(path.read_text())
    if meta.get("model_sha256") != MODEL_SHA256:
        raise ValueError(
            f"{path} was measured on YAMNet {meta.get('model_sha256')!r}, not the vendored {MODEL_SHA256}: "
            "re-run training/calibrate_yamnet.py and training/train_yamnet_events.py"
        )
    return meta


# A class states its own name only where DEV showed it right on >= 10 windows of >= 3 packages (the bar for
# a trusted class); one measured on fewer (Helicopter, Cat, Duck, Sheep, ... on 2 DEV packages each) states its
# nearest ancestor that meets the bar ("Aircraft" for Helicopter), or nothing where none does. On the untuned check
# builds the thin classes were right 4 of 7 times (two jets taking off heard as a helicopter, an alarm under speech
# as a cat), the trusted ones 8 of 9 (2026-11-28, docs/benchmarks-history.md).
TRUSTED_DEV_PACKAGES = 3
TRUSTED_DEV_RIGHT = 10


def _trusted(c: dict) -> bool:
    return int(c["dev"]["packages"]) >= TRUSTED_DEV_PACKAGES and int(c["dev"]["tp"]) >= TRUSTED_DEV_RIGHT


def nearest_trusted(name: str, trusted: set[str]) -> str | None:
    """`name` if trusted, else its nearest ancestor in `trusted` (breadth first up the ontology), else None."""
    parents, level, seen = ontology().parents, [name], set()
    while level:
        for n in level:
            if n in trusted:
                return n
        seen |= set(level)
        level = [p for n in level for p in parents.get(n, ()) if p not in seen]
    return None


@functools.cache
def rules(path: Path | None = None, back_off: bool = True) -> tuple[Rule, ...]:
    """The classes and groups that may state an event (`in_evidence` in the event policy, event_head.json, or the
    policy file `path`), most specific first: each by the head's probability, YAMNet's own group score, either or
    both, as TRAIN chose, and each stating itself or, measured on too few DEV packages, its nearest trusted
    ancestor (`stated_as`; its precision the lower of the two). A class with no trusted ancestor is left out.
    `back_off=False`: every class states itself (the policy before 2026-11-28, for benchmarks/quality/events_truth.py)."""
    meta = load_policy(path or HEAD_POLICY)
    used = [c for c in meta["classes"] if c["in_evidence"]]
    trusted = {c["name"] for c in used if _trusted(c) or not back_off}
    precision = {c["name"]: float(c["dev"]["precision"]) for c in used}
    out = []
    for c in used:
        as_ = nearest_trusted(c["name"], trusted)
        if as_ is None:
            continue
        head = c["rule"] in ("head", "either", "both")
        scores = c["rule"] in ("scores", "either", "both")
        out.append(
            Rule(
                c["name"],
                float(c["score_threshold"]) if scores else None,
                min(precision[c["name"]], precision[as_]),
                float(c["head_threshold"]) if head else None,
                int(c["output"]) if head else None,
                both=c["rule"] == "both",
                stated_as=None if as_ == c["name"] else as_,
            )
        )
    return tuple(out)


def stated_names(policy: Iterable[Rule] | None = None) -> set[str]:
    """The classes and groups the policy can name in an item."""
    return {r.stated_as or r.name for r in (rules() if policy is None else policy)}


@dataclass(frozen=True)
class EventHead:
    """The event head over YAMNet's embedding (training/train_yamnet_events.py): an ensemble of small networks,
    per 2 s window `window_features` -> one probability per node of the policy."""

    members: tuple[tuple[tuple[np.ndarray, np.ndarray], ...], ...]
    nodes: tuple[str, ...]
    sha256: str

    def __call__(self, features: np.ndarray) -> np.ndarray:
        x = np.asarray(features, np.float32)
        out = np.zeros((len(x), len(self.nodes)), np.float64)
        for member in member_outputs(self.members, x):
            out += member
        return (out / len(self.members)).astype(np.float32)


def head_members(arrays: dict[str, np.ndarray]) -> tuple[tuple[tuple[np.ndarray, np.ndarray], ...], ...]:
    """The networks of a head file's arrays `m<member>_W<layer>` / `m<member>_b<layer>`, as float32."""
    n_members = 1 + max(int(k[1:].split("_")[0]) for k in arrays)
    n_layers = 1 + max(int(k.split("_")[1][1:]) for k in arrays)
    return tuple(
        tuple(
            (arrays[f"m{m}_W{j}"].astype(np.float32), arrays[f"m{m}_b{j}"].astype(np.float32)) for j in range(n_layers)
        )
        for m in range(n_members)
    )


@functools.cache
def event_head() -> EventHead:
    """The shipped head (event_head.npz), checked against the sha256 its policy file records."""
    import io

    meta = load_policy(HEAD_POLICY)
    data = checked_bytes(HEAD, meta["head_sha256"])
    with np.load(io.BytesIO(data)) as z:
        arrays = {k: z[k] for k in z.files}
    return EventHead(head_members(arrays), tuple(meta["nodes"]), meta["head_sha256"])


def head_windows(frame_scores: np.ndarray, frame_embeddings: np.ndarray, n_samples: int) -> np.ndarray:
    """(n_windows, n_nodes): the shipped head's probabilities per 2 s window of a clip."""
    return event_head()(window_features(frame_scores, frame_embeddings, n_samples))


def stated_events(
    frame_scores: np.ndarray,
    n_samples: int,
    class_names: Sequence[str],
    policy: Iterable[Rule] | None = None,
    head: np.ndarray | None = None,
) -> list[Stated]:
    """The events a clip's YAMNet scores (and its head's window probabilities `head`, n_windows x n_nodes) state
    under the policy: per window, the name (`stated_as`) of every rule whose group score or head probability reaches
    its threshold (both, for a rule of both), less those that a more specific stated name lies under (a dog is said,
    not also an animal); consecutive windows of one name are one event. Without `head`, rules that need the head
    state nothing."""
    pol = list(rules() if policy is None else policy)
    if not pol or len(frame_scores) == 0:
        return []
    onto = ontology()
    ws = window_scores(np.asarray(frame_scores, np.float32), n_samples)
    bounds = window_bounds_s(n_samples)
    hw = None if head is None or len(head) != len(bounds) else np.asarray(head, np.float32)
    group = {r.name: group_indices(class_names, r.name) for r in pol}
    runs: dict[str, list[list[float]]] = {}
    for k, (a, b) in enumerate(bounds):
        hit = {}
        for r in pol:
            idx = group[r.name]
            score = float(ws[k, idx].max()) if idx.size else 0.0
            prob = float(hw[k, r.output]) if hw is not None and r.output is not None else 0.0
            by_scores = r.threshold is not None and idx.size > 0 and score >= r.threshold
            by_head = hw is not None and r.head_threshold is not None and prob >= r.head_threshold
            if (by_head and by_scores) if r.both else (by_head or by_scores):
                name = r.stated_as or r.name
                hit[name] = max(hit.get(name, 0.0), prob if by_head else score)
        covered = set().union(*(onto.ancestors(n) for n in hit)) if hit else set()
        for name, s in hit.items():
            if name in covered:
                continue
            run = runs.setdefault(name, [])
            if run and a <= run[-1][1] + 1e-6:
                run[-1][1], run[-1][2] = max(run[-1][1], b), max(run[-1][2], s)
            else:
                run.append([a, b, s])
    prec: dict[str, float] = {}
    for r in pol:
        name = r.stated_as or r.name
        prec[name] = min(prec.get(name, 1.0), r.precision)
    return [
        Stated(name, round(a, 3), round(b, 3), round(s, 4), prec[name])
        for name, spans in sorted(runs.items())
        for a, b, s in spans
    ]
