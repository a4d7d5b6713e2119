"""Shards on disk and the DuckDB catalog that knows them."""

from earmark.storage.catalog import Catalog, ShardMeta, ShardRef
from earmark.storage.shards import ShardFile, read_shard, shard_key, write_shard

__all__ = ["Catalog", "ShardMeta", "ShardRef", "ShardFile", "read_shard", "shard_key", "write_shard"]
