"""pycoral.adapters: ``common``, ``classify``, ``detect``."""
