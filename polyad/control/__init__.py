"""Control flow as ops: loops, conditionals and checkpointing (custom derivatives and implicit solves are
in ``polyad.custom``)."""
