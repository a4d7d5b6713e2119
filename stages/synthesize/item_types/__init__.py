"""The built-in item types, one module each (captions, QA pairs, entailment hypotheses, instruction triples),
and any other module of this package: importing the package registers them all. Adding an item type is one
module here (its `register(ItemType(...))`, with its writer, request plan and checks), its prompts and its
tests."""

from __future__ import annotations

import importlib
import pkgutil

BUILT_IN = ("captions", "qa", "entailment", "instructions")  # their order is the item tables' order

for _name in (*BUILT_IN, *sorted({m.name for m in pkgutil.iter_modules(__path__)} - set(BUILT_IN))):
    importlib.import_module(f"{__name__}.{_name}")
