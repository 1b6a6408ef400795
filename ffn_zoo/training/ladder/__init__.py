"""Loss-vs-budget ladders: the plan (budgets -> rungs), the run (one constant-lr trunk, a WSD cooldown branch
per budget) and its storage (finished pieces, the checkpoints kept and the room they take)."""
