"""Per-kernel energy of a program: the activity timeline, energy windows and the attribution fit."""
