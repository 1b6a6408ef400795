"""What a run reports: progress and throughput, activation statistics, loggers and their HParams, TensorBoard
views, the start-up banner and metrics.json."""
