"""A run's life: its folder and what ``ckpt_path`` resumes, checkpoints, the training RNG stream, the guards
(non-finite steps, signals), failure reporting, fault injection for the tests, a sweep's jobs side by side."""
