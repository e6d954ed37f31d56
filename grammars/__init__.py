"""The PCFGs loom-fuzz expands (fuzzingbook's format, plain dicts), one file per profile."""
