"""Peers of the benchmarks that run outside the main environment (AMICI)."""
