"""The pieces ``ffn_zoo/train.py`` puts in order, by concern:

    recipe/     what is trained and how: configs -> model, LightningModule, objectives, optimizers, precision, strategies
    ladder/     loss-vs-budget ladders: the plan and the trunk-and-branches run
    lifecycle/  a run's life: folders and resume points, checkpoints, RNG stream, guards, failures, sweep jobs
    reporting/  what a run reports: progress, activation statistics, loggers, TensorBoard views, banner, metrics.json
"""
