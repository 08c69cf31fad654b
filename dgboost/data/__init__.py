"""The data layer: input adapters and validation (``inputs``), cut points (``sketch``) and
the compressed bin matrix (``ellpack``)."""
