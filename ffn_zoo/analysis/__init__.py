"""Reading results: ``compare`` (a sweep's run folders -> tables, intervals, plots) and ``report`` (parameters,
FLOPs and time per variant). Never imports Lightning: reading a sweep does not pay for the training stack."""
