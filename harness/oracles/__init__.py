"""The oracles: what a program's outcome means, each reached as a runner whose results carry verdicts.

=================  ==============================================================
``crash``          the target's own outcome judged by its expectations (the
                   :data:`harness.run.judge.Judge` protocol, rules in
                   :mod:`harness.targets.expectations`; off the contract the robustness
                   oracle of :mod:`harness.contract`): any runner of
                   :func:`harness.run.runners.make_runner`
``differential``   wrong code: the exec rendering optimized and both modules run
                   (:mod:`harness.oracles.differential_runner`, over the executors
                   of :mod:`harness.execute`)
``divergence``     two builds of one tool, the same programs through both
                   (:mod:`harness.oracles.divergence_runner`; with ``--oracle
                   differential`` both outputs executed,
                   :mod:`harness.oracles.divergence_execution`)
=================  ==============================================================

Every command that judges (run, enumerate --run, fuzz, triage) gets its runner for
one :class:`~harness.oracles.choice.OracleChoice` from
:func:`~harness.oracles.choice.oracle_runner`; their findings are triaged by
:mod:`harness.triage` (crash buckets, :mod:`harness.triage.wrong_code_triage`,
:mod:`harness.triage.divergence_triage`).
"""
