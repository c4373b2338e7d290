"""Control flow as ops: loops, conditionals, checkpointing and implicit differentiation."""
