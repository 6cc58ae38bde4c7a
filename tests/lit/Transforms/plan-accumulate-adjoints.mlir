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
