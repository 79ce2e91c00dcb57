"""The control actors: the registry actor, leases, the directory, fan-out, the store, buckets."""
