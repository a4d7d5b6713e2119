"""Paper-profile ("bring your weights") backends: MECAT's expert models, loaded from the models directory.

Every module imports its heavy packages lazily, checks its weights (and packages) when the expert is
built, and writes the same record and table as the offline default of its slot (experts/*.py).
"""
