"""Formal classification of mutants with Yosys: golden vs mutant as a miter.

``miter.py`` renders the sources Yosys reads (the schemata with the selector left as a
wire the script ties to a constant) and the script (one invocation for many mutants);
``yosys.py`` finds and runs Yosys under the process supervisor, one mutant at a time
watched against its time limit; ``trace.py`` reads the verdicts and turns a counterexample
into a stimulus; ``classify.py`` puts them together and replays every counterexample in the
simulator before it becomes a witness.
"""
