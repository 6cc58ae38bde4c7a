// RUN: energy-opt %s --pass-pipeline='builtin.module(energy.model(energy-plan-accumulate-adjoints))' | FileCheck %s

// A backward step's `store (read @A + gradient) into @A` becomes the grad
// op adding the gradient into @A (`into`): the sum and the store are gone,
// and the read where nothing else uses it (@W.adjoint); @x.adjoint's read
// stays for its use ahead of the grad op (the cotangent).
// CHECK-LABEL: energy.model @steps
// CHECK:       } step {
// CHECK-NEXT:    %[[XA:.*]] = read @x.adjoint
// CHECK-NEXT:    store %[[XA]] into @x.cotangent
// CHECK-NEXT:    grad @x and [@W] of @t {into = [@x.adjoint, @W.adjoint]}
// CHECK-NEXT:  } finish {
energy.model @steps {
  dim @N
  tensor @x : state [@N] = zeros
  tensor @W : param [@N]
  tensor @x.adjoint : state [@N] = zeros {adjoint_of = @x}
  tensor @W.adjoint : state [@N] = zeros {adjoint_of = @W}
  tensor @x.cotangent : state [@N] = zeros {cotangent_of = @x}
  term @t auxiliary {
    %0 = read @x : !energy.array<N>
    %1 = read @W : !energy.array<N>
    %2 = dot %0, %1 : !energy.array<N>
    yield %2 : !energy.array<>
  }
  backward_program seed {
  } step {
    %0 = read @x.adjoint : !energy.array<N>
    store %0 into @x.cotangent : !energy.array<N>
    %1:2 = grad @x and [@W] of @t : !energy.array<N>, !energy.array<N>
    %2 = read @W.adjoint : !energy.array<N>
    %3 = add %2, %1#1 : !energy.array<N>, !energy.array<N>
    %4 = add %1#0, %0 : !energy.array<N>, !energy.array<N>
    store %4 into @x.adjoint : !energy.array<N>
    store %3 into @W.adjoint : !energy.array<N>
  } finish {
  }
  gradient @x and [@W] of @t {
    %0 = read @x : !energy.array<N>
    %1 = read @W : !energy.array<N>
    accumulate %1 into @x : !energy.array<N>
    accumulate %0 into @W : !energy.array<N>
  }
}

// Left as they are: a gradient whose kernel reads the adjoint it would add
// into, one whose sum something else reads, one with a store into the
// adjoint between the grad op and the update, and one whose adjoint's read
// is used after the grad op as well.
// CHECK-LABEL: energy.model @kept
// CHECK:       } step {
// CHECK-NOT:     into =
// CHECK:       } finish {
energy.model @kept {
  dim @N
  tensor @x : state [@N] = zeros
  tensor @W : param [@N]
  tensor @V : param [@N]
  tensor @U : param [@N]
  tensor @W.adjoint : state [@N] = zeros {adjoint_of = @W}
  tensor @V.adjoint : state [@N] = zeros {adjoint_of = @V}
  tensor @U.adjoint : state [@N] = zeros {adjoint_of = @U}
  tensor @log : state [@N] = zeros
  tensor @x.adjoint : state [@N] = zeros {adjoint_of = @x}
  term @t auxiliary {
    %0 = read @W : !energy.array<N>
    %1 = read @V : !energy.array<N>
    %2 = dot %0, %1 : !energy.array<N>
    yield %2 : !energy.array<>
  }
  term @u auxiliary {
    %0 = read @U : !energy.array<N>
    %1 = read @x : !energy.array<N>
    %2 = dot %0, %1 : !energy.array<N>
    yield %2 : !energy.array<>
  }
  backward_program seed {
  } step {
    %0:2 = grad @W and [@V] of @t : !energy.array<N>, !energy.array<N>
    %1 = read @W.adjoint : !energy.array<N>
    %2 = add %1, %0#0 : !energy.array<N>, !energy.array<N>
    store %2 into @W.adjoint : !energy.array<N>
    %3 = read @V.adjoint : !energy.array<N>
    %4 = add %3, %0#1 : !energy.array<N>, !energy.array<N>
    store %4 into @log : !energy.array<N>
    store %4 into @V.adjoint : !energy.array<N>
    %5 = grad @U of @u : !energy.array<N>
    %6 = read @U.adjoint : !energy.array<N>
    %7 = read @x : !energy.array<N>
    store %7 into @U.adjoint : !energy.array<N>
    %8 = add %6, %5 : !energy.array<N>, !energy.array<N>
    store %8 into @U.adjoint : !energy.array<N>
    %9 = read @x.adjoint : !energy.array<N>
    %10 = grad @x of @u : !energy.array<N>
    %11 = add %10, %9 : !energy.array<N>, !energy.array<N>
    store %9 into @log : !energy.array<N>
    store %11 into @x.adjoint : !energy.array<N>
  } finish {
  }
  gradient @W and [@V] of @t {
    %0 = read @V : !energy.array<N>
    %1 = read @W.adjoint : !energy.array<N>
    %2 = add %0, %1 : !energy.array<N>, !energy.array<N>
    accumulate %2 into @W : !energy.array<N>
  }
  gradient @U of @u {
    %0 = read @x : !energy.array<N>
    accumulate %0 into @U : !energy.array<N>
  }
  gradient @x of @u {
    %0 = read @U : !energy.array<N>
    accumulate %0 into @x : !energy.array<N>
  }
}

// A step that evaluates the gradient twice (Heun's two stages) adds both
// into the adjoint: in a chain of adds, or in the loop that fusion made of
// them (the adjoint and both gradients read at the loop's positions).
// Each grad op adds into its adjoint in place; no sum, loop or store is left.
// CHECK-LABEL: energy.model @two_stages
// CHECK:       } step {
// CHECK-NEXT:    grad @x and [@W, @V] of @t {into = [unit, @W.adjoint, @V.adjoint]}
// CHECK-NEXT:    store
// CHECK-NEXT:    grad @x and [@W, @V] of @t {into = [unit, @W.adjoint, @V.adjoint]}
// CHECK-NOT:     tabulate
// CHECK-NOT:     add
// CHECK-NOT:     store
// CHECK:       } finish {
energy.model @two_stages {
  dim @N
  tensor @x : state [@N, @N] = zeros
  tensor @W : param [@N, @N]
  tensor @V : param [@N]
  tensor @W.adjoint : state [@N, @N] = zeros {adjoint_of = @W}
  tensor @V.adjoint : state [@N] = zeros {adjoint_of = @V}
  tensor @x.cotangent : state [@N, @N] = zeros {cotangent_of = @x}
  term @t auxiliary {
    %0 = read @x : !energy.array<N, N>
    %1 = read @W : !energy.array<N, N>
    %2 = mul %0, %1 : !energy.array<N, N>, !energy.array<N, N>
    %3 = reduce_elements sum %2 : !energy.array<N, N>
    %4 = read @V : !energy.array<N>
    %5 = reduce_elements sum %4 : !energy.array<N>
    %6 = add %3, %5 : !energy.array<>, !energy.array<>
    yield %6 : !energy.array<>
  }
  backward_program seed {
  } step {
    %0:3 = grad @x and [@W, @V] of @t : !energy.array<N, N>, !energy.array<N, N>, !energy.array<N>
    %1 = read @W.adjoint : !energy.array<N, N>
    %2 = read @V.adjoint : !energy.array<N>
    %3 = add %2, %0#2 : !energy.array<N>, !energy.array<N>
    store %0#0 into @x.cotangent : !energy.array<N, N>
    %4:3 = grad @x and [@W, @V] of @t : !energy.array<N, N>, !energy.array<N, N>, !energy.array<N>
    %5 = tabulate (%n : @N) {
      %7 = extract %1[%n] : !energy.array<N, N> -> !energy.array<N>
      %8 = extract %0#1[%n] : !energy.array<N, N> -> !energy.array<N>
      %9 = add %7, %8 : !energy.array<N>, !energy.array<N>
      %10 = extract %4#1[%n] : !energy.array<N, N> -> !energy.array<N>
      %11 = add %9, %10 : !energy.array<N>, !energy.array<N>
      yield %11 : !energy.array<N>
    } : !energy.array<N, N>
    %6 = add %3, %4#2 : !energy.array<N>, !energy.array<N>
    store %5 into @W.adjoint : !energy.array<N, N>
    store %6 into @V.adjoint : !energy.array<N>
  } finish {
  }
  gradient @x and [@W, @V] of @t {
    %0 = read @x : !energy.array<N, N>
    %1 = read @W : !energy.array<N, N>
    accumulate %1 into @x : !energy.array<N, N>
    accumulate %0 into @W : !energy.array<N, N>
  }
}

// Left as they are: a fused loop that scales a gradient (not a sum of the
// adjoint and gradients), and a sum that adds the adjoint twice.
// CHECK-LABEL: energy.model @not_sums
// CHECK:       } step {
// CHECK-NOT:     into =
// CHECK:       } finish {
energy.model @not_sums {
  dim @N
  tensor @x : state [@N, @N] = zeros
  tensor @W : param [@N, @N]
  tensor @V : param [@N]
  tensor @W.adjoint : state [@N, @N] = zeros {adjoint_of = @W}
  tensor @V.adjoint : state [@N] = zeros {adjoint_of = @V}
  term @t auxiliary {
    %0 = read @x : !energy.array<N, N>
    %1 = read @W : !energy.array<N, N>
    %2 = mul %0, %1 : !energy.array<N, N>, !energy.array<N, N>
    %3 = reduce_elements sum %2 : !energy.array<N, N>
    %4 = read @V : !energy.array<N>
    %5 = reduce_elements sum %4 : !energy.array<N>
    %6 = add %3, %5 : !energy.array<>, !energy.array<>
    yield %6 : !energy.array<>
  }
  backward_program seed {
  } step {
    %0:2 = grad @W and [@V] of @t : !energy.array<N, N>, !energy.array<N>
    %1 = read @W.adjoint : !energy.array<N, N>
    %2 = tabulate (%n : @N) {
      %7 = extract %1[%n] : !energy.array<N, N> -> !energy.array<N>
      %8 = extract %0#0[%n] : !energy.array<N, N> -> !energy.array<N>
      %9 = mul %7, %8 : !energy.array<N>, !energy.array<N>
      yield %9 : !energy.array<N>
    } : !energy.array<N, N>
    store %2 into @W.adjoint : !energy.array<N, N>
    %3 = read @V.adjoint : !energy.array<N>
    %4 = add %3, %3 : !energy.array<N>, !energy.array<N>
    %5 = add %4, %0#1 : !energy.array<N>, !energy.array<N>
    store %5 into @V.adjoint : !energy.array<N>
  } finish {
  }
  gradient @W and [@V] of @t {
    %0 = read @x : !energy.array<N, N>
    accumulate %0 into @W : !energy.array<N, N>
  }
}
