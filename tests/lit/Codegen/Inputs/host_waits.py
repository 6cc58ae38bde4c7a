"""The host's waits inside each artifact function named on the command line
and the functions it calls (energy_support_cuda_fence not directly before a
return), read from the lowered module on stdin: one line per function,
"NAME: N waits inside"."""

import re
import sys

text = sys.stdin.read().split("\n")
bodies, calls, current = {}, {}, None
for number, line in enumerate(text):
    found = re.search(r"func\.func (?:private )?@(\w+)\(", line)
    if found:
        current = found.group(1)
        bodies[current], calls[current] = 0, set()
        continue
    if current is None:
        continue
    callee = re.search(r"call @(energy_gradient_\w+|energy_kernel_\w+)\(", line)
    if callee:
        calls[current].add(callee.group(1))
    if "call @energy_support_cuda_fence()" in line:
        after = " ".join(text[number + 1:number + 3])
        if "return" not in after:
            bodies[current] += 1


def inside(name, seen):
    if name in seen or name not in bodies:
        return 0
    seen.add(name)
    return bodies[name] + sum(inside(callee, seen) for callee in calls[name])


for name in sys.argv[1:]:
    print("%s: %d waits inside" % (name, inside(name, set())))
