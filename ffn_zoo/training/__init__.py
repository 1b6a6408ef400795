"""Training pieces ``train.py`` puts in order: configs -> model (build), LightningModule, objectives, optimizers,
checkpoints, the RNG stream (rng), faults (debug: the tests' fault injection), instruments, callbacks, loggers, run
folders and what ``ckpt_path`` resumes (runs), the banner and metrics.json (summary)."""
