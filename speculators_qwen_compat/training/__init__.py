"""What the package knows about training upstream, apart from the fixes that act on it: the
final-norm conventions of verifiers (norm_convention.py), read by the verifier-norm fix and
``doctor``."""
