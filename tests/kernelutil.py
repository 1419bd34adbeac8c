"""Shared by the property tests of the fast kernels (``tests/test_golden_*_kernel.py``): the
Hypothesis settings, with a number of examples per ``--effort`` level."""

from hypothesis import HealthCheck, settings

#: examples per property and effort level
EXAMPLES = {"quick": 30, "standard": 120, "full": 3000}


def examples(effort: str) -> settings:
    """Derandomized settings (the same examples on every run), no example database, no
    deadline, :data:`EXAMPLES` ``[effort]`` examples."""
    return settings(max_examples=EXAMPLES[effort], deadline=None, derandomize=True,
                    database=None, suppress_health_check=[HealthCheck.too_slow,
                                                          HealthCheck.data_too_large])
