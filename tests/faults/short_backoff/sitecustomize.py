"""Imported by Python at start-up in a subprocess whose PYTHONPATH names this folder (``tests.faults.backoff.
subprocess_env``): Inspect's and medfuzz's retry waits set for the test, not real seconds, for the whole process."""

from tests.faults.backoff import install

install()
