"""The command line: the ``hwtp`` group and one module per command."""
