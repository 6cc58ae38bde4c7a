"""An independent implementation of SplitMix64 (Steele, Lea and Flood 2014),
used to derive the expected values in RandomTest.cpp. Run it to print them."""
MASK = (1 << 64) - 1


def splitmix64(state):
    while True:
        state = (state + 0x9E3779B97F4A7C15) & MASK
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        yield z ^ (z >> 31)


if __name__ == "__main__":
    stream = splitmix64(1234567)
    print([next(stream) for _ in range(5)])
    stream = splitmix64(0)
    print([next(stream) for _ in range(3)])
