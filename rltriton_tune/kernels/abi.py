KERNEL_ABI = 1
"""Bumped whenever a kernel's meaning or parameters change: profiles of another ABI are not used."""
