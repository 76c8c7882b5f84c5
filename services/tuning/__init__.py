"""Process tuning: how a settleq process uses the garbage collector and the allocator, set by
its entry point."""
