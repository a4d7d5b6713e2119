"""The item types earmark writes, each registered once (`register`): its record's table joins the schemas'
tables, its name the item tables `[synthesize] items` may list. The built-in ones are the modules of
`earmark.stages.synthesize.item_types`."""

from __future__ import annotations

from earmark.schemas import ITEM_TABLES, TABLES
from earmark.stages.base import ItemType

ITEM_TYPES: dict[str, ItemType] = {}  # in registration order: the order items are written, checked, published


def register(kind: ItemType) -> ItemType:
    """Add an item type; a table name another record already uses is refused."""
    if kind.table in ITEM_TYPES and ITEM_TYPES[kind.table] is not kind:
        raise ValueError(f"item type {kind.table!r} is registered already")
    if TABLES.get(kind.table, kind.record) is not kind.record:
        raise ValueError(
            f"table {kind.table!r} holds {TABLES[kind.table].__name__} records; name the item type otherwise"
        )
    TABLES[kind.table] = kind.record
    ITEM_TYPES[kind.table] = kind
    if kind.table not in ITEM_TABLES:
        ITEM_TABLES.append(kind.table)
    return kind


def unregister(table: str) -> None:
    """Remove an item type registered at run time (a test's toy one); the built-in ones stay."""
    kind = ITEM_TYPES.pop(table)
    if TABLES.get(table) is kind.record:
        del TABLES[table]
    if table in ITEM_TABLES:
        ITEM_TABLES.remove(table)
