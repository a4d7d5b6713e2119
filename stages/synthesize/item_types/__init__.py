"""The built-in item types, one package each (captions, QA pairs, entailment hypotheses, instruction triples),
and any other module or package here: importing this package registers them all. A kind's package holds all its
prompts-to-items code: `__init__.py` registers it (`register(ItemType(...))`: its record, writer, request plan,
checks and audit), `write.py` writes its items (asking the model, or by rule where the configuration says so) and
`rules.py` is its rule writer. Adding an item type is one module or package here, its prompts and its tests."""

from __future__ import annotations

import importlib
import pkgutil

BUILT_IN = ("captions", "qa", "entailment", "instructions")  # their order is the item tables' order

for _name in (*BUILT_IN, *sorted({m.name for m in pkgutil.iter_modules(__path__)} - set(BUILT_IN))):
    importlib.import_module(f"{__name__}.{_name}")
