"""What the package's tests share: where the checkout is and a small model
with a loss (gradient descent on a mean, a squared-error loss)."""

import os

SOURCE_DIR = os.environ.get(
    "ENERGY_SOURCE_DIR",
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
EXAMPLES = os.path.join(SOURCE_DIR, "examples")

FIT = """
model fit {
  dim N, D;
  input x : [N, D], t : [D];
  param W : [D, D];
  state mu : [D];
  energy e = sum(i: N) 0.5 * sqnorm(mu - W @ x[i]);
  loss l = sqnorm(mu - t);
  dynamics { mu: gd(lr = 0.1); steps 3; }
}
"""

# A batch of attention energies descended by momentum, with a squared-error
# loss: what tests/e2e/training trains.
ATTENTION_TRAIN = os.path.join(SOURCE_DIR, "tests", "e2e", "training",
                               "attention_train.energy")
