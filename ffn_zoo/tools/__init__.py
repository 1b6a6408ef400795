"""User tools, each a console script and a ``python -m`` module: benchmark (``ffn-zoo-bench``), benchmark_data
(``ffn-zoo-bench-data``), bench_act_stats (``ffn-zoo-bench-act-stats``), tune (``ffn-zoo-tune``: each variant at its
own learning rate)."""
