// RUN: energy-opt %s -split-input-file --energy-caller-cotangents -verify-diagnostics

// A model with no state or output has nothing for a caller to
// differentiate.

// expected-error @below {{model stateless has no state tensor or output whose final value a caller could differentiate}}
energy.model @stateless {
  dim @D
  tensor @W : param [@D]
  term @e {
    %0 = read @W : !energy.array<D>
    %1 = reduce_elements sqnorm %0 : !energy.array<D>
    yield %1 : !energy.array<>
  }
}

// -----

// The caller's cotangent of @mu is @mu.incoming: a tensor of that name
// already there is an error, not a second meaning.

energy.model @taken {
  dim @D
  // expected-error @below {{'mu.incoming' is taken: the caller's cotangent of @mu needs that name}}
  tensor @mu : state [@D]
  tensor @mu.incoming : param [@D]
  term @e {
    %0 = read @mu : !energy.array<D>
    %1 = read @mu.incoming : !energy.array<D>
    %2 = sub %0, %1 : !energy.array<D>, !energy.array<D>
    %3 = reduce_elements sqnorm %2 : !energy.array<D>
    yield %3 : !energy.array<>
  }
}
