"""Scoring plans on mutant-set states: evaluations, outcomes, rewards and reward schemes."""
