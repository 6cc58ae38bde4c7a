// RUN: energy-opt %s -split-input-file --pass-pipeline='builtin.module(energy.model(energy-plan-engines{fused-attention=true}))' | FileCheck %s
// RUN: energy-opt %s -split-input-file --pass-pipeline='builtin.module(energy.model(energy-plan-engines))' | FileCheck %s --check-prefix=OFF

// Row sums of a table, unmasked: cuDNN's fused attention computes them.
// CHECK-LABEL: energy.model @row_side
// CHECK:       } {engine = "cudnn"} : !energy.array<N>, !energy.array<N, D>
// OFF-LABEL:   energy.model @row_side
// OFF-NOT:     engine
energy.model @row_side {
  dim @N
  dim @D
  tensor @x : state [@N, @D]
  tensor @y : state [@N, @D]
  gradient @x {
    %q = read @x : !energy.array<N, D>
    %k = read @y : !energy.array<N, D>
    %a:2 = softmax_contract bilinear rows (%c : @N) cols (%p : @N) score {
      %1 = extract %q[%c] : !energy.array<N, D> -> !energy.array<D>
      %2 = extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      %3 = dot %1, %2 : !energy.array<D>
      yield %3 : !energy.array<>
    } row_values {
      %1 = extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      yield %1 : !energy.array<D>
    } : !energy.array<N>, !energy.array<N, D>
  }
}

// -----

// The causal mask (column <= row) is one cuDNN has.
// CHECK-LABEL: energy.model @causal
// CHECK:       } {engine = "cudnn"} : !energy.array<N>, !energy.array<N, D>
energy.model @causal {
  dim @N
  dim @D
  tensor @x : state [@N, @D]
  tensor @y : state [@N, @D]
  gradient @x {
    %q = read @x : !energy.array<N, D>
    %k = read @y : !energy.array<N, D>
    %a:2 = softmax_contract bilinear rows (%c : @N) cols (%p : @N) where {
      %ok = arith.cmpi sle, %p, %c : index
      yield %ok : i1
    } score {
      %1 = extract %q[%c] : !energy.array<N, D> -> !energy.array<D>
      %2 = extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      %3 = dot %1, %2 : !energy.array<D>
      yield %3 : !energy.array<>
    } row_values {
      %1 = extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      yield %1 : !energy.array<D>
    } : !energy.array<N>, !energy.array<N, D>
  }
}

// -----

// A strict mask (column < row) is not.
// CHECK-LABEL: energy.model @strict
// CHECK-NOT:   engine
energy.model @strict {
  dim @N
  dim @D
  tensor @x : state [@N, @D]
  tensor @y : state [@N, @D]
  gradient @x {
    %q = read @x : !energy.array<N, D>
    %k = read @y : !energy.array<N, D>
    %a:2 = softmax_contract bilinear rows (%c : @N) cols (%p : @N) where {
      %ok = arith.cmpi slt, %p, %c : index
      yield %ok : i1
    } score {
      %1 = extract %q[%c] : !energy.array<N, D> -> !energy.array<D>
      %2 = extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      %3 = dot %1, %2 : !energy.array<D>
      yield %3 : !energy.array<>
    } row_values {
      %1 = extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      yield %1 : !energy.array<D>
    } : !energy.array<N>, !energy.array<N, D>
  }
}

// -----

// Column sums are not the forward attention's.
// CHECK-LABEL: energy.model @column_side
// CHECK-NOT:   engine
energy.model @column_side {
  dim @N
  dim @D
  tensor @x : state [@N, @D]
  tensor @y : state [@N, @D]
  gradient @x {
    %q = read @x : !energy.array<N, D>
    %k = read @y : !energy.array<N, D>
    %a:3 = softmax_contract bilinear rows (%c : @N) cols (%p : @N) score {
      %1 = extract %q[%c] : !energy.array<N, D> -> !energy.array<D>
      %2 = extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      %3 = dot %1, %2 : !energy.array<D>
      yield %3 : !energy.array<>
    } row_values {
      %1 = extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      yield %1 : !energy.array<D>
    } col_values {
      %1 = extract %q[%c] : !energy.array<N, D> -> !energy.array<D>
      yield %1 : !energy.array<D>
    } : !energy.array<N>, !energy.array<N, D>, !energy.array<N, D>
  }
}

// -----

// Nothing summed: no engine to give it to.
// CHECK-LABEL: energy.model @normaliser_only
// CHECK-NOT:   engine
energy.model @normaliser_only {
  dim @N
  dim @D
  tensor @x : state [@N, @D]
  tensor @y : state [@N, @D]
  gradient @x {
    %q = read @x : !energy.array<N, D>
    %k = read @y : !energy.array<N, D>
    %a = softmax_contract bilinear rows (%c : @N) cols (%p : @N) score {
      %1 = extract %q[%c] : !energy.array<N, D> -> !energy.array<D>
      %2 = extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      %3 = dot %1, %2 : !energy.array<D>
      yield %3 : !energy.array<>
    } : !energy.array<N>
  }
}
