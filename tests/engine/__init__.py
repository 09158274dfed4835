"""The engine against the database: the admission and reclaim cycles, the sync, start
timeouts, priority jumps, triggers, lock order, the quota promise, queue positions, usage
samples, faults, and the seed scenario end to end with a real worker."""
