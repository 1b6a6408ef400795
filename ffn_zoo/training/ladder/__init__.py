"""Loss-vs-budget ladders: the plan (budgets -> rungs) and the run (one constant-lr trunk, a WSD cooldown branch
per budget)."""
