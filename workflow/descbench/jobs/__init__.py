"""The workflow's jobs, one module per stage, each owning its subcommands (``add_commands(sub)``,
returning ``{command: function running it}``; a :class:`descbench.jobs.common.JobCommand` where a
process running the command needs more than the defaults: the thread pools its ``--threads``
sizes, no pandas, a timing file) and the functions they run: file in, file out.

They orchestrate I/O and call the pure functions of :mod:`descbench.keypoints`,
:mod:`descbench.descriptors` and :mod:`descbench.metrics`; :mod:`descbench.cli` builds the
command line from them. :mod:`descbench.jobs.common` holds what several jobs share.
"""
