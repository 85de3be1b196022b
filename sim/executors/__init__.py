"""Where evaluations run: ``local`` (simulator processes on this machine) or ``ray`` (warm
simulator workers in Ray actors across a cluster), behind one interface (:mod:`.base`)."""
