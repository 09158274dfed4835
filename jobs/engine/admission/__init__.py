"""The admission cycle: its inputs (``inputs``), the cycle (``cycle``), its writes
(``writes``)."""
