"""A long-lived process and Python's garbage collector."""

import gc


def freeze_loaded_objects() -> None:
    """Keep every object alive now out of the collector's full passes: once a process has
    loaded Django and the project (modules, models, URL patterns, settings), those objects
    live until it exits, yet each full collection walks all of them again.

    Full collections come after enough new objects outlive the younger generations, as a
    batch of a thousand jobs makes them; walking the loaded process then costs a web
    worker about as much as the batch itself, once every few batches (docs/benchmarks.md,
    "The submission throughput's loss"). Frozen objects are never collected, which is what
    would happen to them anyway; what is garbage now is collected first.
    """
    gc.collect()
    gc.freeze()
