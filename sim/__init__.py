"""Simulator side of hwtp: the cocotb harness and the toolchain glue (installed as ``hwtp.sim``)."""
