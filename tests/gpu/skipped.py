#!/usr/bin/env python3
"""A [gpu] test that cannot run in this build: prints why and exits 77 (CTest's "Skipped").

  python3 tests/gpu/skipped.py NAME REASON
"""
import sys

print(f"SKIPPED: {sys.argv[1]}: {sys.argv[2]}")
sys.exit(77)
