"""Training: the loop with its objectives and DDP (loop), optimiser groups and schedules (optim), the decoder and
encoder run plans, train-or-skip and the torchrun command line (recipes)."""
