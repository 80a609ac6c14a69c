"""GPU Memory Lens bootstrap, run by `site` at startup of every Python process that has our folder
on PYTHONPATH (the launcher puts it first).

It must cost next to nothing in processes that never import torch, and must never break the
workload: every failure here becomes one line on stderr and an untracked run.
"""


def _gpumem_start():
    import os
    import sys

    this_dir = os.path.dirname(os.path.abspath(__file__))
    if os.environ.get("GPUMEM_SESSION_DIR"):
        try:
            from gpumem import _bootstrap

            _bootstrap.arm()
        except Exception as exc:  # the workload must run even if our bootstrap is broken
            sys.stderr.write("gpumem: memory tracking is off: bootstrap failed: %r\n" % (exc,))
    # Run the sitecustomize we shadow (a venv's, a distribution's) after arming the torch hook, so a
    # sitecustomize that imports torch still gets the allocator installed in time.
    try:
        from gpumem import _chain

        _chain.run_next_sitecustomize(this_dir)
    except Exception as exc:
        sys.stderr.write("gpumem: error in the chained sitecustomize: %r\n" % (exc,))


_gpumem_start()
del _gpumem_start
