"""Designs and their RTL: loading a design (``design.yaml`` or a file and ``--top``), the pyslang
front end, and the trust check on what the simulator compiles."""
