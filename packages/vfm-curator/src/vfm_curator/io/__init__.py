"""Video I/O, inputs, outputs, resume state and the report."""
