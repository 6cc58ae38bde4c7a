// RUN: energy-opt %s -split-input-file -verify-diagnostics

// Dim expressions: `/` is exact division by a positive number, wherever a
// dim expression is written.

energy.model @m {
  energy.dim @D = 64
  // expected-error @below {{dim division by a non-positive number}}
  energy.dim @Dh = @D / 0
}

// -----

energy.model @m {
  energy.dim @D = 64
  // expected-error @below {{dim division by a non-positive number}}
  energy.dim @Dh = @D / -2
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.term @e {
    // expected-error @below {{dim division by a non-positive number}}
    %n = energy.size @N / 0 : index
    %x = energy.read @x[%n] : !energy.array<>
    energy.yield %x : !energy.array<>
  }
}

// -----

energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.term @e {
    // expected-error @below {{dim division by a non-positive number}}
    %t = "energy.tabulate"() <{sizes = [#energy.dim<@N / 0>]}> ({
    ^bb0(%i: index):
      %x = energy.read @x[%i] : !energy.array<>
      energy.yield %x : !energy.array<>
    }) : () -> !energy.array<N>
    %s = energy.reduce_elements sum %t : !energy.array<N>
    energy.yield %s : !energy.array<>
  }
}
