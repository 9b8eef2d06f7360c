"""The ``LongTermStore`` port, its values, the argument checks every adapter applies, the on-disk
layout of Memory Spaces and the ranking rule of relevance recall."""
