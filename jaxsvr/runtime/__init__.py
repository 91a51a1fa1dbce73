"""What a process runs on: the device mesh and shardings (`parallel`), joining
`jax.distributed` (`distributed`), matmul precision (`precision`), process-wide settings
of the evaluation command (`process_tuning`), the run folder and its atomic writer
(`workdir`), one-line errors and exit code 2 for the commands (`cli`).
"""
