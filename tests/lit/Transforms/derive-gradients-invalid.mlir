// RUN: energy-opt %s -split-input-file -verify-diagnostics --energy-derive-gradients

// The energy reaches the node only through an op with no derivative rule:
// an error at that op, naming the node.
energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.tensor @y : param [@N]
  energy.term @e {
    %x = energy.read @x : !energy.array<N>
    %y = energy.read @y : !energy.array<N>
    // expected-error @below {{'energy.maximum' op has no derivative rule; the energy reaches @x through it}}
    %m = energy.maximum %x, %y : !energy.array<N>, !energy.array<N>
    %s = energy.reduce_elements sum %m : !energy.array<N>
    energy.yield %s : !energy.array<>
  }
  energy.dynamics steps 1 {
    energy.update @x gd(lr = 0.1)
  }
}
