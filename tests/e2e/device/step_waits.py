"""How often the host waits for the GPU inside each kernel call of a CUDA
artifact's training step: runs `energy-exec ARTIFACT --device cuda --eval
loss-grad ARGUMENTS...` with ENERGY_CUDA_WAITS=1 (the runtime reports each
call's start and end, the support library each wait) and prints, as JSON,
each kernel's calls and the most waits one of them made. A call's last wait
is the one before it returns; the steps named by --once (default: the step
and the backward step) must wait only then, once: exit 1 otherwise.

    step_waits.py [--once SYMBOL,...] ENERGY_EXEC ARTIFACT ARGUMENTS...

Runs against the GPU (bench/gpu_bundle.sh) or the fake driver of the
runtime's tests (python/tests/test_cuda_stream.py)."""

import json
import os
import re
import subprocess
import sys

CALL = re.compile(r"energy-cuda: call (\w+) (begins|ends)$")
WAIT = "energy-cuda: the host waits for the GPU"


def count_waits(stderr):
    """{symbol: [waits of each call]} from ENERGY_CUDA_WAITS's lines."""
    calls, current, waits = {}, None, 0
    for line in stderr.splitlines():
        found = CALL.search(line)
        if found and found.group(2) == "begins":
            current, waits = found.group(1), 0
        elif found and current:
            calls.setdefault(current, []).append(waits)
            current = None
        elif line.startswith(WAIT) and current:
            waits += 1
    return calls


def main(argv):
    once = ["energy_kernel_step", "energy_kernel_backward_step"]
    if argv[:1] == ["--once"]:
        once, argv = argv[1].split(","), argv[2:]
    if len(argv) < 2:
        sys.exit(__doc__)
    command = [argv[0], argv[1], "--device", "cuda", "--eval", "loss-grad",
               "--json"] + argv[2:]
    result = subprocess.run(command, capture_output=True, text=True,
                            env=dict(os.environ, ENERGY_CUDA_WAITS="1"),
                            timeout=600, check=False)
    if result.returncode != 0:
        sys.exit("%s\n%s" % (" ".join(command), result.stderr[-2000:]))
    calls = count_waits(result.stderr)
    summary = {symbol: {"calls": len(counts), "most_waits": max(counts)}
               for symbol, counts in sorted(calls.items())}
    print(json.dumps(summary, indent=1))
    wrong = [symbol for symbol in once
             if symbol not in summary or summary[symbol]["most_waits"] != 1]
    if wrong:
        sys.exit("waits inside a call (or no call) of: " + ", ".join(wrong))


if __name__ == "__main__":
    main(sys.argv[1:])
