"""The registry of named sound events: `prompts/evidence.toml`'s `[events]` rows, checked against the vendored
AudioSet ontology and read by everything that names an event.

- the evidence stage: which classes an AudioSet label may be stated as (`audioset_class`);
- the renderer and the rule writers: the words a class is said in (`noun`, `clause`);
- the claim audit: the words a caption may use for it (`claim`), and which classes lie under a group;
- the wording check: the class names an item may use.

Adding a class is a row of data there: its name must be an ontology display name (a misspelt one is refused,
naming the closest), its MID and parents come from the ontology.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from earmark.experts.yamnet.events import ontology
from earmark.prompts import Phrases, load_phrases


@dataclass(frozen=True)
class EventClass:
    """One named event class (or ontology group) of the registry."""

    name: str  # the AudioSet display name
    mid: str  # the AudioSet MID ("/m/0bt9lr")
    parents: tuple[str, ...]  # its parents in the ontology
    noun: str  # what is heard: "a dog"
    clause: str  # what happens: "a dog barks"
    claim: str  # the words a caption may use for it (a regular expression)
    group: bool = False  # an ontology group stated only where no class under it is sure
    audioset: tuple[str, ...] = ()  # AudioSet labels mapped to it where two classes are nearest


class RegistryError(ValueError):
    """A row of `[events]` that cannot be read: the message names the row and what to fix."""


def registry(phrases: Phrases | None = None) -> dict[str, EventClass]:
    """The event classes in `[events]` order (the claim audit's reading order), from `phrases` (an
    evidence.toml already loaded) or the evidence phrase file of the prompt directory in use."""
    rows = (phrases if phrases is not None else load_phrases("evidence"))["events"]
    return _parse(_frozen(rows))


def _frozen(rows: Mapping[str, Any]) -> tuple:
    """A hashable copy of the rows (parsing is cached by content)."""
    return tuple(
        (name, tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in row.items())))
        for name, row in rows.items()
    )


@functools.cache
def _parse(rows: tuple) -> dict[str, EventClass]:
    onto = ontology()
    out: dict[str, EventClass] = {}
    for name, items in rows:
        row = dict(items)
        node = onto.nodes.get(name)
        if node is None:
            near = difflib.get_close_matches(name, onto.nodes, n=3)
            raise RegistryError(
                f"evidence.toml [events] {name!r} is not an AudioSet class name"
                + (f"; did you mean {', '.join(repr(n) for n in near)}?" if near else "")
                + " (the names are the ontology's display names, experts/yamnet/audioset_ontology.json)"
            )
        missing = [k for k in ("noun", "clause", "claim") if not row.get(k)]
        if missing:
            raise RegistryError(f"evidence.toml [events] {name!r} lacks {', '.join(missing)}")
        unknown = [lab for lab in row.get("audioset", ()) if lab not in onto.nodes]
        if unknown:
            raise RegistryError(f"evidence.toml [events] {name!r}: audioset labels not in the ontology: {unknown}")
        out[name] = EventClass(
            name=name,
            mid=node.mid,
            parents=tuple(onto.parents.get(name, ())),
            noun=row["noun"],
            clause=row["clause"],
            claim=row["claim"],
            group=bool(row.get("group", False)),
            audioset=tuple(row.get("audioset", ())),
        )
    return out


def under(cls: str) -> set[str]:
    """The class and every class under it in the ontology (what supports a claim of a group)."""
    return ontology().subtree(cls) | {cls}


def audioset_class(label: str, classes: Mapping[str, EventClass]) -> str | None:
    """The registry class an AudioSet label is stated as: itself where it is one; the row that lists it under
    `audioset`; else its nearest class up the ontology (fewest steps; groups are not taken). None where no class
    lies above it, or two lie equally near and no row settles it."""
    return _audioset_map(tuple(classes.values())).get(label)


@functools.cache
def _audioset_map(classes: tuple[EventClass, ...]) -> dict[str, str]:
    onto = ontology()
    named = {c.name for c in classes}
    targets = {c.name for c in classes if not c.group}
    listed = {lab: c.name for c in classes for lab in c.audioset}
    out: dict[str, str] = {}
    for label in onto.nodes:
        if label in named:
            out[label] = label
        elif label in listed:
            out[label] = listed[label]
        elif len(near := nearest(label, targets)) == 1:
            out[label] = near[0]
    return out


def nearest(label: str, targets: set[str]) -> list[str]:
    """The targets reached first going up the ontology from `label` (breadth first), sorted."""
    onto = ontology()
    frontier, seen = [label], {label}
    while frontier:
        hits = sorted(f for f in frontier if f in targets)
        if hits:
            return hits
        nxt = []
        for f in frontier:
            for p in onto.parents.get(f, ()):
                if p not in seen:
                    seen.add(p)
                    nxt.append(p)
        frontier = nxt
    return []
