"""``hwtp ci``: mutation-test an existing cocotb testbench and gate CI on its score.

- :mod:`hwtp.ci.mutation`: the run (golden, then every mutant against the schemata build) and
  its report record, :class:`~hwtp.ci.mutation.CiReport`;
- :mod:`hwtp.ci.config`: the ci keys of ``hwtp.yaml`` (read by :mod:`hwtp.config`);
- :mod:`hwtp.ci.runs`: one run of the user's cocotb tests in a simulator process;
- :mod:`hwtp.ci.starter`: ``hwtp ci init``, a commented starter ``hwtp.yaml``;
- :mod:`hwtp.ci.reports`: terminal, JUnit, Markdown, lcov and JSON reports;
- :mod:`hwtp.ci.exporttests`: ``hwtp export-tests``, plans as standalone cocotb tests.
"""
