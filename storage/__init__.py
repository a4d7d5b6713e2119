"""Shards on disk and the DuckLake catalog that knows them."""

from earmark.storage.catalog import Catalog, LegacyCatalogError, ShardMeta, ShardRef, open_catalog
from earmark.storage.shards import ShardFile, read_shard, shard_key, write_shard

__all__ = [
    "Catalog",
    "LegacyCatalogError",
    "open_catalog",
    "ShardMeta",
    "ShardRef",
    "ShardFile",
    "read_shard",
    "shard_key",
    "write_shard",
]
