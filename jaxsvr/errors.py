"""The one exception type for bad user input.

Readers, validators and CLIs raise `InputError` with a single line that says what is
wrong, where (file, row, column or key) and how to fix it. CLIs turn it into one line on
stderr and exit code 2 (see `jaxsvr.runtime.cli`); library callers can catch it as a ValueError.
"""


class InputError(ValueError):
    """Bad input: a one-line message naming what, where, and how to fix it."""
