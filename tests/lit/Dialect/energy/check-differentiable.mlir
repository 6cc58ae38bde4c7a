// RUN: energy-opt %s -split-input-file -verify-diagnostics --energy-check-differentiable

// An energy that depends on an op without a derivative rule is reported at
// that op, naming the term.
energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.tensor @y : state [@N]
  energy.term @e {
    %x = energy.read @x : !energy.array<N>
    %y = energy.read @y : !energy.array<N>
    // expected-error @below {{'energy.maximum' op has no derivative rule; energy term @e depends on it}}
    %m = energy.maximum %x, %y : !energy.array<N>, !energy.array<N>
    %s = energy.reduce_elements sum %m : !energy.array<N>
    energy.yield %s : !energy.array<>
  }
}

// -----

// A reduction kind without a rule is reported even though the op has an
// interface: `maxabs` over elements.
energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.term @e {
    %x = energy.read @x : !energy.array<N>
    // expected-error @below {{'energy.reduce_elements' op has no derivative rule; energy term @e depends on it}}
    %a = energy.reduce_elements maxabs %x : !energy.array<N>
    energy.yield %a : !energy.array<>
  }
}

// -----

// Predicates are index arithmetic, not part of the energy: no rule needed.
energy.model @m {
  energy.dim @N
  energy.tensor @x : state [@N]
  energy.term @e {
    %s = energy.reduce lse (%i : @N) where {
      %c1 = arith.constant 1 : index
      %ok = arith.cmpi sge, %i, %c1 : index
      energy.yield %ok : i1
    } {
      %xi = energy.read @x[%i] : !energy.array<>
      energy.yield %xi : !energy.array<>
    } : !energy.array<>
    energy.yield %s : !energy.array<>
  }
}
