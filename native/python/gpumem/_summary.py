"""memory_summary() with PyTorch 2.11's layout (torch/cuda/memory.py), computed from our stats.

The formatting below follows PyTorch's function line for line so the text is byte-identical for the
same stats dict; tests compare it against a faithful copy of PyTorch's formatter.
"""


def _format_size(sz, pref_sz):
    prefixes = ["B  ", "KiB", "MiB", "GiB", "TiB", "PiB"]
    prefix = prefixes[0]
    for new_prefix in prefixes[1:]:
        if pref_sz < 768 * 1024:
            break
        prefix = new_prefix
        sz //= 1024
        pref_sz /= 1024
    return f"{sz:6d} {prefix}"


def _format_count(cnt, pref_cnt):
    prefixes = [" ", "K", "M"]
    prefix = prefixes[0]
    for new_prefix in prefixes[1:]:
        if pref_cnt < 750 * 1000:
            break
        prefix = new_prefix
        cnt //= 1000
        pref_cnt /= 1000
    return f"{cnt:7d} {prefix} "


_METRICS = [
    ("allocated_bytes", "Allocated memory", _format_size),
    ("active_bytes", "Active memory", _format_size),
    ("requested_bytes", "Requested memory", _format_size),
    ("reserved_bytes", "GPU reserved memory", _format_size),
    ("inactive_split_bytes", "Non-releasable memory", _format_size),
    ("allocation", "Allocations", _format_count),
    ("active", "Active allocs", _format_count),
    ("segment", "GPU reserved segments", _format_count),
    ("inactive_split", "Non-releasable allocs", _format_count),
]
_OVERSIZE = [
    ("oversize_allocations", "Oversize allocations", _format_count),
    ("oversize_segments", "Oversize GPU segments", _format_count),
]


def format_summary(stats, device, abbreviated=False):
    """The summary text for a flat stats dict (memory_stats()) of `device`."""
    lines = []
    lines.append("=" * 75)
    lines.append(" {_:16} PyTorch CUDA memory summary, device ID {device:<17d} ")
    lines.append("-" * 75)
    lines.append("  {_:9} CUDA OOMs: {num_ooms:<12d} | {_:6} cudaMalloc retries: {num_alloc_retries:<8d}  ")
    lines.append("=" * 75)
    lines.append("        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  ")

    for metric_key, metric_name, formatter in _METRICS:
        lines.append("-" * 75)
        submetrics = [("all", metric_name)]
        if not abbreviated:
            submetrics.append(("large_pool", "      from large pool"))
            submetrics.append(("small_pool", "      from small pool"))
        current_prefval = peak_prefval = allocated_prefval = freed_prefval = None
        for submetric_key, submetric_name in submetrics:
            prefix = metric_key + "." + submetric_key + "."
            current = stats[prefix + "current"]
            peak = stats[prefix + "peak"]
            allocated = stats[prefix + "allocated"]
            freed = stats[prefix + "freed"]
            # The "all" row sets the unit for the pool rows below it, as in PyTorch.
            if current_prefval is None:
                current_prefval, peak_prefval, allocated_prefval, freed_prefval = current, peak, allocated, freed
            lines.append(
                f" {submetric_name:<21} | {formatter(current, current_prefval)} | {formatter(peak, peak_prefval)} | "
                f"{formatter(allocated, allocated_prefval)} | {formatter(freed, freed_prefval)} "
            )

    for metric_key, metric_name, formatter in _OVERSIZE:
        lines.append("-" * 75)
        prefix = metric_key + "."
        current = stats[prefix + "current"]
        peak = stats[prefix + "peak"]
        allocated = stats[prefix + "allocated"]
        freed = stats[prefix + "freed"]
        lines.append(
            f" {metric_name:<21} | {formatter(current, current)} | {formatter(peak, peak)} | "
            f"{formatter(allocated, allocated)} | {formatter(freed, freed)} "
        )

    lines.append("=" * 75)
    fmt_dict = {"_": "", "device": device}
    for k, v in stats.items():
        fmt_dict[k.replace(".", "-")] = v
    return "|" + "|\n|".join(lines).format(**fmt_dict) + "|\n"
