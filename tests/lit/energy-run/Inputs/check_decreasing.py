"""Checks an energy-run --json result: the expected number of steps, and an
energy trace that decreases at every step."""
import json
import sys

result = json.load(open(sys.argv[1]))
trace = result["trace"]
steps = int(sys.argv[2])
assert result["steps"] == steps == len(trace), result
rises = [(k, a, b) for k, (a, b) in enumerate(zip(trace, trace[1:])) if b >= a]
assert not rises, f"energy rose at steps {rises}"
