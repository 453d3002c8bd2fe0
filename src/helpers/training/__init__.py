"""Training: the loop with its objectives and DDP (loop), optimiser groups, the optimiser and its schedule, LAMB
(optim), the decoder and encoder run plans, train-or-skip and the torchrun command line (recipes), the compressor's
training (compressor), and repetition fine-tuning of the decoders by sequence-level unlikelihood (unlikelihood)."""
