"""orbax checkpoints: the train state's manager (`manager`: save, screen, resume, best/),
orbax reads that leave nothing behind when one fails (`reads`), and the one module that
knows orbax's on-disk layout (`layout`: find a run's checkpoint, restore its parameters),
used by the trainer, the warm start, the runs read back and the rescore job.
"""
