"""The mutation engine (installed as ``hwtp.mutators``)."""
