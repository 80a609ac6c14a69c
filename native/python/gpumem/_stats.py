"""PyTorch 2.11's memory_stats() schema (122 keys, verified on an H200) and its two shapes."""
import collections

_CORE = (
    "allocation", "segment", "active", "inactive_split", "allocated_bytes", "reserved_bytes",
    "active_bytes", "inactive_split_bytes", "requested_bytes",
)
_POOLS = ("all", "large_pool", "small_pool")
_METRICS = ("current", "peak", "allocated", "freed")
_SCALARS = ("num_alloc_retries", "num_ooms", "num_sync_all_streams", "num_device_alloc", "num_device_free", "max_split_size")

KEYS_2_11 = tuple(
    sorted(
        ["%s.%s.%s" % (c, p, m) for c in _CORE for p in _POOLS for m in _METRICS]
        + ["%s.%s" % (o, m) for o in ("oversize_allocations", "oversize_segments") for m in _METRICS]
        + list(_SCALARS)
    )
)
assert len(KEYS_2_11) == 122


def flat_stats(raw):
    """PyTorch's memory_stats() from the allocator's counters: exactly the 2.11 keys, sorted like
    PyTorch's (`result.sort()` over (key, value) pairs), as an OrderedDict.

    Note [Stats schema]: keys the allocator does not report read 0 and keys it reports beyond 2.11
    are dropped, so code written against PyTorch's dict sees the same shape it always does.
    """
    return collections.OrderedDict((k, int(raw.get(k, 0))) for k in KEYS_2_11)


def nested_stats(flat):
    """memory_stats_as_nested_dict(): the inverse of PyTorch's dotted flattening."""
    out = {}
    for key, value in flat.items():
        node = out
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return out
