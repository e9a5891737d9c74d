"""The engine: preflight, the campaign loop and its failure policy, preparing a cell,
measuring a run."""
