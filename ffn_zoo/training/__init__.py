"""Training pieces ``train.py`` puts in order: configs -> model (build), LightningModule, objectives, optimizers,
checkpoints, faults, instruments, callbacks, loggers, run folders (runs), the banner and metrics.json (summary)."""
