// RUN: energy-opt %s -split-input-file --energy-build-updates --energy-supplied-gradients -verify-diagnostics

// Nesterov's step takes the gradient at the look-ahead point, after a
// store: no gradient supplied before the step is that one.

energy.model @lookahead {
  dim @N
  dim @D
  tensor @x : state [@N, @D]
  tensor @W : param [@D, @D]
  term @e {
    %0 = reduce sum (%i : @N) {
      %1 = constant 5.000000e-01
      %2 = read @W : !energy.array<D, D>
      %3 = read @x[%i] : !energy.array<D>
      %4 = matmul %2, %3 : !energy.array<D, D>, !energy.array<D>
      %5 = reduce_elements sqnorm %4 : !energy.array<D>
      %6 = mul %1, %5 : !energy.array<>, !energy.array<>
      yield %6 : !energy.array<>
    } : !energy.array<>
    yield %0 : !energy.array<>
  }
  dynamics steps 2 {
    // expected-error @below {{a sharded run supplies the gradient once per step, at the step's start, of the whole energy; this step takes it after updating a state}}
    update @x nesterov(lr = 1.000000e-01, beta = 9.000000e-01)
  }
}

// -----

// A stopping rule would be decided by each rank on its own rows.

energy.model @stops {
  dim @N
  dim @D
  tensor @x : state [@N, @D]
  tensor @W : param [@D, @D]
  term @e {
    %0 = reduce sum (%i : @N) {
      %1 = constant 5.000000e-01
      %2 = read @W : !energy.array<D, D>
      %3 = read @x[%i] : !energy.array<D>
      %4 = matmul %2, %3 : !energy.array<D, D>, !energy.array<D>
      %5 = reduce_elements sqnorm %4 : !energy.array<D>
      %6 = mul %1, %5 : !energy.array<>, !energy.array<>
      yield %6 : !energy.array<>
    } : !energy.array<>
    yield %0 : !energy.array<>
  }
  // expected-error @below {{a sharded run cannot stop by a rule yet (`until`): every rank would decide on its own rows}}
  dynamics steps 5 {
    update @x gd(lr = 1.000000e-01)
  } until {
    %0 = grad @x : !energy.array<N, D>
    %1 = reduce_elements maxabs %0 : !energy.array<N, D>
    %2 = constant 1.000000e-03
    %3 = cmp lt, %1, %2 : !energy.array<>
    yield %3 : i1
  }
}
