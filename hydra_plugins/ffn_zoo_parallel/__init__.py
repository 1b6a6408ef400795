"""ffn-zoo's Hydra launcher plugin (``hydra/launcher=parallel``). Hydra loads launchers only from the
``hydra_plugins`` namespace; the work is in ffn_zoo/training/lifecycle/parallel.py."""
