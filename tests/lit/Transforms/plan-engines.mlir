// RUN: energy-opt %s -split-input-file --pass-pipeline='builtin.module(energy.model(energy-plan-engines{target=cuda bf16-products=true}))' | FileCheck %s
// RUN: energy-opt %s -split-input-file --pass-pipeline='builtin.module(energy.model(energy-plan-engines{target=cuda}))' | FileCheck %s --check-prefix=CUDA
// RUN: energy-opt %s -split-input-file --pass-pipeline='builtin.module(energy.model(energy-plan-engines))' | FileCheck %s --check-prefix=CPU
// RUN: energy-opt %s -split-input-file --pass-pipeline='builtin.module(energy.model(energy-plan-engines{device-loops=true}))' | FileCheck %s --check-prefix=DEVICE
// RUN: not energy-opt %s -split-input-file --pass-pipeline='builtin.module(energy.model(energy-plan-engines{target=tpu}))' 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: energy-plan-engines: target 'tpu'; expected cpu or cuda

// Every bilinear contraction runs on the support library's kernel: the
// CPU's, the GPU's, and with bf16 products the tensor-core one or cuDNN's
// fused attention where it computes the contraction.

// On CUDA, and on a CPU when asked, the model's loops are to run without
// host calls (energy.device_loops); the engines stay the target's.
// DEVICE-LABEL: energy.model @row_side attributes {energy.device_loops} {
// DEVICE:       } {engine = "cpu"}

// Row sums of a table, unmasked: cuDNN's fused attention computes them.
// CHECK-LABEL: energy.model @row_side
// CHECK:       } {engine = "cudnn"} : !energy.array<N>, !energy.array<N, D>
// CUDA-LABEL:  energy.model @row_side attributes {energy.device_loops} {
// CUDA:        } {engine = "cuda"} : !energy.array<N>, !energy.array<N, D>
// CPU-LABEL:   energy.model @row_side {
// CPU:         } {engine = "cpu"} : !energy.array<N>, !energy.array<N, D>
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
// CHECK:       {engine = "cuda-tensor-cores"}
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

// Column sums are not the forward attention's, but the row side is: with
// bf16 products the contraction becomes the row side on cuDNN, then the
// column sums given its normaliser on the tensor cores. Without them, one
// contraction on the GPU's kernel.
// CHECK-LABEL: energy.model @column_side
// CHECK:       %[[ROWS:.*]]:2 = softmax_contract
// CHECK-NOT:   col_values
// CHECK:       row_values {
// CHECK:       } {engine = "cudnn"} : !energy.array<N>, !energy.array<N, D>
// CHECK:       = softmax_contract bilinear rows ({{.*}}) cols ({{.*}}) lse(%[[ROWS]]#0 : !energy.array<N>) score {
// CHECK-NOT:   row_values
// CHECK:       col_values {
// CHECK:       } {engine = "cuda-tensor-cores"} : !energy.array<N, D>
// CHECK-NOT:   softmax_contract
// CUDA-LABEL:  energy.model @column_side
// CUDA-COUNT-1: softmax_contract
// CUDA:        } {engine = "cuda"} : !energy.array<N>, !energy.array<N, D>, !energy.array<N, D>
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

// Both sides under a mask cuDNN does not have (column < row): one
// contraction on the tensor cores.
// CHECK-LABEL: energy.model @column_side_strict
// CHECK-COUNT-1: softmax_contract
// CHECK:       } {engine = "cuda-tensor-cores"} : !energy.array<N>, !energy.array<N, D>, !energy.array<N, D>
energy.model @column_side_strict {
  dim @N
  dim @D
  tensor @x : state [@N, @D]
  tensor @y : state [@N, @D]
  gradient @x {
    %q = read @x : !energy.array<N, D>
    %k = read @y : !energy.array<N, D>
    %a:3 = softmax_contract bilinear rows (%c : @N) cols (%p : @N) where {
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
    } col_values {
      %1 = extract %q[%c] : !energy.array<N, D> -> !energy.array<D>
      yield %1 : !energy.array<D>
    } : !energy.array<N>, !energy.array<N, D>, !energy.array<N, D>
    accumulate %a#1 into @x : !energy.array<N, D>
    accumulate %a#2 into @x : !energy.array<N, D>
  }
}

// -----

// Split, the row side's and the column side's outputs are read where the
// whole contraction's were.
// CHECK-LABEL: energy.model @column_side_read
// CHECK:       %[[ROWS:.*]]:2 = softmax_contract
// CHECK:       {engine = "cudnn"}
// CHECK:       %[[COLS:.*]] = softmax_contract {{.*}} lse(%[[ROWS]]#0
// CHECK:       {engine = "cuda-tensor-cores"}
// CHECK:       accumulate %[[ROWS]]#1 into @x
// CHECK:       accumulate %[[COLS]] into @x
energy.model @column_side_read {
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
    accumulate %a#1 into @x : !energy.array<N, D>
    accumulate %a#2 into @x : !energy.array<N, D>
  }
}

// -----

// Nothing summed: a kernel all the same.
// CHECK-LABEL: energy.model @normaliser_only
// CHECK:       {engine = "cuda-tensor-cores"}
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

// -----

// A quadratic contraction: the GPU's mixture kernel; on a CPU, generated
// loops (one vectorised pass over a mixture's few columns).
// CHECK-LABEL: energy.model @mixture
// CHECK:       {engine = "cuda"}
// CUDA-LABEL:  energy.model @mixture
// CUDA:        {engine = "cuda"}
// CPU-LABEL:   energy.model @mixture
// CPU:         {engine = "loops"}
energy.model @mixture {
  dim @N
  dim @K
  dim @D
  tensor @x : input [@N, @D]
  tensor @mu : state [@K, @D]
  tensor @prec : state [@K, @D, @D]
  term @fit {
    %one = constant 1.000000e+00
    %X = read @x : !energy.array<N, D>
    %M = read @mu : !energy.array<K, D>
    %P = read @prec : !energy.array<K, D, D>
    %r:3 = softmax_contract quadratic rows (%i : @N) cols (%k : @K) score {
      %p = extract %P[%k] : !energy.array<K, D, D> -> !energy.array<D, D>
      %a = extract %X[%i] : !energy.array<N, D> -> !energy.array<D>
      %m = extract %M[%k] : !energy.array<K, D> -> !energy.array<D>
      %d = sub %a, %m : !energy.array<D>, !energy.array<D>
      %q = quad %d, %p : !energy.array<D>, !energy.array<D, D>
      %s = neg %q : !energy.array<>
      yield %s : !energy.array<>
    } col_values {
      %a = extract %X[%i] : !energy.array<N, D> -> !energy.array<D>
      yield %one, %a : !energy.array<>, !energy.array<D>
    } : !energy.array<N>, !energy.array<K>, !energy.array<K, D>
    %t = reduce_elements sum %r#0 : !energy.array<N>
    yield %t : !energy.array<>
  }
}

// -----

// A generic contraction (a score no kernel takes): generated loops on
// every target.
// CHECK-LABEL: energy.model @generic
// CHECK:       {engine = "loops"}
// CUDA-LABEL:  energy.model @generic
// CUDA:        {engine = "loops"}
// CPU-LABEL:   energy.model @generic
// CPU:         {engine = "loops"}
energy.model @generic {
  dim @N
  dim @D
  tensor @x : state [@N, @D]
  tensor @y : state [@N, @D]
  gradient @x {
    %q = read @x : !energy.array<N, D>
    %k = read @y : !energy.array<N, D>
    %a:2 = softmax_contract generic rows (%c : @N) cols (%p : @N) score {
      %1 = extract %q[%c] : !energy.array<N, D> -> !energy.array<D>
      %2 = extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      %3 = dot %1, %2 : !energy.array<D>
      %4 = tanh %3 : !energy.array<>
      yield %4 : !energy.array<>
    } row_values {
      %1 = extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      yield %1 : !energy.array<D>
    } : !energy.array<N>, !energy.array<N, D>
  }
}

// -----

// A bilinear contraction whose column values are weighed by a pair term
// (q[c]·a[p], as a second derivative's are): a CPU's kernel takes it; the
// GPU kernels do not (they would hand it to the host's threads), so on CUDA
// generated loops run it, on the GPU.
// CHECK-LABEL: energy.model @pair_term
// CHECK:       {engine = "loops"}
// CUDA-LABEL:  energy.model @pair_term
// CUDA:        {engine = "loops"}
// CPU-LABEL:   energy.model @pair_term
// CPU:         {engine = "cpu"}
energy.model @pair_term {
  dim @N
  dim @D
  tensor @x : state [@N, @D]
  tensor @y : state [@N, @D]
  tensor @a : state [@N, @D]
  gradient @x {
    %q = read @x : !energy.array<N, D>
    %k = read @y : !energy.array<N, D>
    %v = read @a : !energy.array<N, D>
    %b:2 = softmax_contract bilinear rows (%c : @N) cols (%p : @N) score {
      %1 = extract %q[%c] : !energy.array<N, D> -> !energy.array<D>
      %2 = extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      %3 = dot %1, %2 : !energy.array<D>
      yield %3 : !energy.array<>
    } col_values {
      %1 = extract %q[%c] : !energy.array<N, D> -> !energy.array<D>
      %2 = extract %v[%p] : !energy.array<N, D> -> !energy.array<D>
      %3 = dot %1, %2 : !energy.array<D>
      %4 = mul %3, %1 : !energy.array<>, !energy.array<D>
      yield %4 : !energy.array<D>
    } : !energy.array<N>, !energy.array<N, D>
    accumulate %b#1 into @x : !energy.array<N, D>
  }
}

// -----

// A score that is a sum of bilinear forms runs on the CPU's kernel (their
// tables' rows side by side), on a GPU in generated loops.
// CHECK-LABEL: energy.model @two_products
// CHECK:       } {engine = "loops"}
// CUDA-LABEL:  energy.model @two_products
// CUDA:        } {engine = "loops"}
// CPU-LABEL:   energy.model @two_products
// CPU:         } {engine = "cpu"}
energy.model @two_products {
  dim @N
  dim @D
  tensor @x : state [@N, @D]
  tensor @y : state [@N, @D]
  tensor @u : state [@N, @D]
  tensor @v : state [@N, @D]
  gradient @x {
    %q = read @x : !energy.array<N, D>
    %k = read @y : !energy.array<N, D>
    %s = read @u : !energy.array<N, D>
    %t = read @v : !energy.array<N, D>
    %a:2 = softmax_contract bilinear rows (%c : @N) cols (%p : @N) score {
      %1 = extract %q[%c] : !energy.array<N, D> -> !energy.array<D>
      %2 = extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      %3 = dot %1, %2 : !energy.array<D>
      %4 = extract %s[%c] : !energy.array<N, D> -> !energy.array<D>
      %5 = extract %t[%p] : !energy.array<N, D> -> !energy.array<D>
      %6 = dot %4, %5 : !energy.array<D>
      %7 = add %3, %6 : !energy.array<>, !energy.array<>
      yield %7 : !energy.array<>
    } row_values {
      %1 = extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      yield %1 : !energy.array<D>
    } : !energy.array<N>, !energy.array<N, D>
  }
}
