"""Block library of cosim, built only on the public ``cosim.Block`` API."""
