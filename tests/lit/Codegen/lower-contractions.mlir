// RUN: energy-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(energy-emit-kernels)' | FileCheck %s
// RUN: energy-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(energy-emit-kernels{element-type=f64})' | FileCheck %s --check-prefix=F64

// The patterns of Contractions.cpp and GeneratedContractions.cpp: a table is
// a comprehension into scratch; a softmax contraction goes to its engine:
// "cpu" fills energy_softmax_contract_args (36 slots) and calls the support
// library's kernel in the kernel's precision, its code mapped onto the
// kernel's status; "loops" is generated code (panels of 128 columns, an
// online softmax, the support library's vector exp) with no kernel call; a
// quadratic contraction calls the GPU's mixture kernel (12 slots).

// engine "cpu": the score's scale (beta, read as a const) is slot 5 as f64,
// the row and column tables slots 3 and 4, the lse result slot 9 (null when
// nothing reads it); the
// kernel's code becomes the status (2 out of memory -> 2, 3 device -> 4,
// any other failure -> 3 invalid argument, 0 stays 0).
// The gradient reads no normaliser: its slot 9 is null, and nothing
// writes one.
// CHECK-LABEL: energy.model @retrieval_cpu
// CHECK-LABEL: func.func private @energy_gradient_0_x(
// CHECK:         %[[NULL:[0-9]+]] = llvm.mlir.zero : !llvm.ptr
// CHECK:         %[[G9:[0-9]+]] = llvm.getelementptr %{{[0-9]+}}[9] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:    llvm.store %[[NULL]], %[[G9]] : !llvm.ptr, !llvm.ptr
// CHECK:         call @energy_support_softmax_contract_f32(
// CHECK-NOT:     call @energy_support_softmax_contract_f64(
// CHECK:         return
// CHECK-LABEL: func.func @energy_kernel_energy(
// CHECK:         %[[XB:[0-9]+]] = llvm.getelementptr %arg0[0] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK-NEXT:    %[[XP:[0-9]+]] = llvm.load %[[XB]] : !llvm.ptr -> !llvm.ptr
// CHECK:         %[[MB:[0-9]+]] = llvm.getelementptr %arg0[1] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK-NEXT:    %[[MP:[0-9]+]] = llvm.load %[[MB]] : !llvm.ptr -> !llvm.ptr
// CHECK:         %[[LSE:[0-9]+]] = call @energy_support_scratch_alloc(
// CHECK:         %[[SLOTS:[a-z0-9_]+]] = arith.constant 36 : index
// CHECK-NEXT:    %[[N:[0-9]+]] = arith.index_cast %[[SLOTS]] : index to i64
// CHECK:         %[[ARGS:[0-9]+]] = call @energy_support_scratch_alloc(
// CHECK:         %[[BETA:[0-9]+]] = arith.truncf %{{[0-9]+}} : f64 to f32
// CHECK:         %[[X:[0-9]+]] = llvm.getelementptr %[[XP]][
// CHECK:         %[[M:[0-9]+]] = llvm.getelementptr %[[MP]][
// CHECK:         %[[SCALE:[0-9]+]] = arith.extf %[[BETA]] : f32 to f64
// CHECK-NEXT:    %[[S5:[0-9]+]] = llvm.getelementptr %[[ARGS]][5] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:    llvm.store %[[SCALE]], %[[S5]] : f64, !llvm.ptr
// CHECK:         %[[S3:[0-9]+]] = llvm.getelementptr %[[ARGS]][3] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:    llvm.store %[[X]], %[[S3]] : !llvm.ptr, !llvm.ptr
// CHECK-NEXT:    %[[S4:[0-9]+]] = llvm.getelementptr %[[ARGS]][4] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:    llvm.store %[[M]], %[[S4]] : !llvm.ptr, !llvm.ptr
// CHECK-NEXT:    %[[S9:[0-9]+]] = llvm.getelementptr %[[ARGS]][9] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:    llvm.store %[[LSE]], %[[S9]] : !llvm.ptr, !llvm.ptr
// CHECK:         %[[CODE:[0-9]+]] = call @energy_support_softmax_contract_f32(%[[ARGS]]) : (!llvm.ptr) -> i32
// CHECK-NEXT:    %[[C2:[a-z0-9_]+]] = arith.constant 2 : i32
// CHECK-NEXT:    %[[OOM:[0-9]+]] = arith.cmpi eq, %[[CODE]], %[[C2]] : i32
// CHECK-NEXT:    %[[K2:[a-z0-9_]+]] = arith.constant 2 : i32
// CHECK-NEXT:    %[[C3:[a-z0-9_]+]] = arith.constant 3 : i32
// CHECK-NEXT:    %[[DEV:[0-9]+]] = arith.cmpi eq, %[[CODE]], %[[C3]] : i32
// CHECK-NEXT:    %[[K4:[a-z0-9_]+]] = arith.constant 4 : i32
// CHECK-NEXT:    %[[K3:[a-z0-9_]+]] = arith.constant 3 : i32
// CHECK-NEXT:    %[[F1:[0-9]+]] = arith.select %[[DEV]], %[[K4]], %[[K3]] : i32
// CHECK-NEXT:    %[[F2:[0-9]+]] = arith.select %[[OOM]], %[[K2]], %[[F1]] : i32
// CHECK-NEXT:    %[[C0:[a-z0-9_]+]] = arith.constant 0 : i32
// CHECK-NEXT:    %[[OK:[0-9]+]] = arith.cmpi eq, %[[CODE]], %[[C0]] : i32
// CHECK-NEXT:    %[[STATUS:[0-9]+]] = arith.select %[[OK]], %[[CODE]], %[[F2]] : i32
// CHECK-NEXT:    llvm.atomicrmw max %1, %[[STATUS]] monotonic : !llvm.ptr, i32
// The sum of the lse reads the result the kernel wrote.
// CHECK:         llvm.getelementptr %[[LSE]][
// CHECK:         return
// F64-LABEL:   energy.model @retrieval_cpu
// F64-LABEL:   func.func private @energy_gradient_0_x(
// F64:           call @energy_support_softmax_contract_f64(
// F64-LABEL:   func.func @energy_kernel_energy(
// F64-NOT:       arith.extf
// F64:           call @energy_support_softmax_contract_f64(
// F64-NOT:       call @energy_support_softmax_contract_f32(
// F64:           return
energy.model @retrieval_cpu {
  dim @N
  dim @K
  dim @D
  tensor @x : state [@N, @D]
  tensor @m : input [@K, @D]
  const @beta = 1.000000e+00
  term @e {
    %0 = read @beta : !energy.array<>
    %1 = read @x : !energy.array<N, D>
    %2 = read @m : !energy.array<K, D>
    %3 = softmax_contract bilinear rows (%i : @N) cols (%mu : @K) score {
      %6 = extract %1[%i] : !energy.array<N, D> -> !energy.array<D>
      %7 = extract %2[%mu] : !energy.array<K, D> -> !energy.array<D>
      %8 = dot %6, %7 : !energy.array<D>
      %9 = mul %0, %8 : !energy.array<>, !energy.array<>
      yield %9 : !energy.array<>
    } {engine = "cpu"} : !energy.array<N>
    %4 = reduce_elements sum %3 : !energy.array<N>
    %5 = neg %4 : !energy.array<>
    yield %5 : !energy.array<>
  }
  gradient @x {
    %0 = read @beta : !energy.array<>
    %1 = read @x : !energy.array<N, D>
    %2 = read @m : !energy.array<K, D>
    %3:2 = softmax_contract bilinear rows (%i : @N) cols (%mu : @K) score {
      %5 = extract %1[%i] : !energy.array<N, D> -> !energy.array<D>
      %6 = extract %2[%mu] : !energy.array<K, D> -> !energy.array<D>
      %7 = dot %5, %6 : !energy.array<D>
      %8 = mul %0, %7 : !energy.array<>, !energy.array<>
      yield %8 : !energy.array<>
    } row_values {
      %5 = extract %2[%mu] : !energy.array<K, D> -> !energy.array<D>
      yield %5 : !energy.array<D>
    } {engine = "cpu"} : !energy.array<N>, !energy.array<N, D>
    %4 = neg %3#1 : !energy.array<N, D>
    accumulate %4 into @x : !energy.array<N, D>
  }
}

// -----

// engine "loops": the same contraction as generated code, with no kernel
// call. Per row (a loop marked parallel), panels of 128 columns: the
// scores (the dot product, times beta) into a panel, then their maximum in
// vectors (no value carried from pair to pair), the running maximum moved
// once per panel (the sums rescaled by
// exp(old - new)), exp by the support library's vector function, the row
// values added with their weights; then lse = max + log(sum) and the
// weighted sums divided by the sum.
// CHECK-LABEL: energy.model @retrieval_loops
// CHECK-LABEL: func.func private @energy_gradient_0_x(
// CHECK-NOT:     call @energy_support_softmax_contract
// CHECK:         %[[NEGINF:[a-z0-9_]+]] = arith.constant 0xFF800000 : f32
// CHECK:         scf.for %[[ROW:arg[0-9]+]] =
// CHECK:           %[[PANEL:[a-z0-9_]+]] = arith.constant 128 : index
// CHECK:           %[[RUNNING:[0-9]+]]:2 = scf.for %{{.*}} step %[[PANEL]] iter_args(%[[BIG:arg[0-9]+]] = %[[NEGINF]], %[[TOTAL:arg[0-9]+]] = %{{.*}}) -> (f32, f32) {
// CHECK:             scf.for %{{[a-z0-9_]+}} = %{{[a-z0-9_]+}} to %{{[0-9]+}} step %{{[a-z0-9_]+}} {{\{$}}
// CHECK:               vector.reduction <add>
// CHECK:               arith.mulf %{{[0-9]+}}, %{{[0-9]+}} fastmath<reassoc,contract> : f32
// CHECK:               llvm.store
// CHECK-NEXT:        }
// CHECK:             scf.for {{.*}} iter_args({{.*}}) -> (vector<16xf32>) {
// CHECK:               arith.cmpf ogt, %{{.*}} : vector<16xf32>
// CHECK:             %[[PMAX:[0-9]+]] = scf.for {{.*}} -> (f32) {
// CHECK:             %[[NEW:[0-9]+]] = arith.maxnumf %[[BIG]], %[[PMAX]] : f32
// CHECK:             %[[SHIFT:[0-9]+]] = arith.subf %[[BIG]], %[[NEW]] fastmath<reassoc,contract> : f32
// CHECK-NEXT:        %[[RESCALE:[0-9]+]] = math.exp %[[SHIFT]] : f32
// CHECK:             func.call @energy_support_softmax_weights_f32(
// CHECK:             arith.mulf %{{[0-9]+}}, %{{[0-9]+}} fastmath<reassoc,contract> : vector<16xf32>
// CHECK:             %[[SCALED:[0-9]+]] = arith.mulf %[[TOTAL]], %{{[0-9]+}} fastmath<reassoc,contract> : f32
// CHECK-NEXT:        %[[SUM:[0-9]+]] = arith.addf %[[SCALED]], %{{[0-9]+}} fastmath<reassoc,contract> : f32
// CHECK-NEXT:        scf.yield %[[NEW]], %[[SUM]] : f32, f32
// CHECK-NEXT:      }
// CHECK:           %[[LOG:[0-9]+]] = math.log %[[RUNNING]]#1 : f32
// CHECK-NEXT:      arith.addf %[[RUNNING]]#0, %[[LOG]] fastmath<reassoc,contract> : f32
// CHECK:           scf.for
// CHECK:             arith.divf %{{[0-9]+}}, %[[RUNNING]]#1 fastmath<reassoc,contract> : f32
// CHECK:         } {energy.parallel}
// CHECK-NOT:     call @energy_support_softmax_contract
// CHECK:         return
// CHECK-LABEL: func.func @energy_kernel_energy(
// CHECK-NOT:     call @energy_support_softmax_contract
// CHECK:         func.call @energy_support_softmax_weights_f32(
// CHECK-NOT:     call @energy_support_softmax_contract
// CHECK:         return
// F64-LABEL:   energy.model @retrieval_loops
// F64-LABEL:   func.func private @energy_gradient_0_x(
// F64-NOT:       call @energy_support_softmax_contract
// F64:           func.call @energy_support_softmax_weights_f64(
// F64-NOT:       call @energy_support_softmax_contract
// F64:           return
energy.model @retrieval_loops {
  dim @N
  dim @K
  dim @D
  tensor @x : state [@N, @D]
  tensor @m : input [@K, @D]
  const @beta = 1.000000e+00
  term @e {
    %0 = read @beta : !energy.array<>
    %1 = read @x : !energy.array<N, D>
    %2 = read @m : !energy.array<K, D>
    %3 = softmax_contract bilinear rows (%i : @N) cols (%mu : @K) score {
      %6 = extract %1[%i] : !energy.array<N, D> -> !energy.array<D>
      %7 = extract %2[%mu] : !energy.array<K, D> -> !energy.array<D>
      %8 = dot %6, %7 : !energy.array<D>
      %9 = mul %0, %8 : !energy.array<>, !energy.array<>
      yield %9 : !energy.array<>
    } {engine = "loops"} : !energy.array<N>
    %4 = reduce_elements sum %3 : !energy.array<N>
    %5 = neg %4 : !energy.array<>
    yield %5 : !energy.array<>
  }
  gradient @x {
    %0 = read @beta : !energy.array<>
    %1 = read @x : !energy.array<N, D>
    %2 = read @m : !energy.array<K, D>
    %3:2 = softmax_contract bilinear rows (%i : @N) cols (%mu : @K) score {
      %5 = extract %1[%i] : !energy.array<N, D> -> !energy.array<D>
      %6 = extract %2[%mu] : !energy.array<K, D> -> !energy.array<D>
      %7 = dot %5, %6 : !energy.array<D>
      %8 = mul %0, %7 : !energy.array<>, !energy.array<>
      yield %8 : !energy.array<>
    } row_values {
      %5 = extract %2[%mu] : !energy.array<K, D> -> !energy.array<D>
      yield %5 : !energy.array<D>
    } {engine = "loops"} : !energy.array<N>, !energy.array<N, D>
    %4 = neg %3#1 : !energy.array<N, D>
    accumulate %4 into @x : !energy.array<N, D>
  }
}

// -----

// tabulate: a comprehension over (h, i) into scratch, both loops marked
// parallel at statement level, each position's row computed at its offset
// (the element-wise product's lanes stored there, no scratch of its own).
// CHECK-LABEL: energy.model @table
// CHECK-LABEL: func.func @energy_kernel_energy(
// CHECK:         %[[TABLE:[0-9]+]] = call @energy_support_scratch_alloc(
// CHECK-NOT:     call @energy_support_scratch_alloc(
// CHECK:         scf.for %[[H:arg[0-9]+]] =
// CHECK-NEXT:      %{{.*}} = arith.constant 0 : index
// CHECK-NEXT:      %{{.*}} = arith.constant 1 : index
// CHECK-NEXT:      scf.for %[[I:arg[0-9]+]] =
// CHECK:             %[[ROW:[0-9]+]] = llvm.getelementptr %[[TABLE]][
// CHECK:             scf.for
// CHECK:               %[[P:[0-9]+]] = arith.mulf %{{[0-9]+}}, %{{[0-9]+}} fastmath<reassoc,contract> : vector<16xf32>
// CHECK-NEXT:          arith.index_cast
// CHECK-NEXT:          %[[AT:[0-9]+]] = llvm.getelementptr %[[ROW]][
// CHECK-NEXT:          llvm.store %[[P]], %[[AT]]
// CHECK:           } {energy.parallel}
// CHECK-NEXT:    } {energy.parallel}
// CHECK:         vector.reduction <add>
// CHECK:         return
energy.model @table {
  dim @H
  dim @N
  dim @D
  tensor @x : state [@N, @D]
  tensor @w : input [@H, @D]
  term @e {
    %x = read @x : !energy.array<N, D>
    %w = read @w : !energy.array<H, D>
    %t = tabulate (%h : @H, %i : @N) {
      %xi = extract %x[%i] : !energy.array<N, D> -> !energy.array<D>
      %wh = extract %w[%h] : !energy.array<H, D> -> !energy.array<D>
      %p = mul %xi, %wh : !energy.array<D>, !energy.array<D>
      yield %p : !energy.array<D>
    } : !energy.array<H, N, D>
    %s = reduce_elements sum %t : !energy.array<H, N, D>
    yield %s : !energy.array<>
  }
}

// -----

// A quadratic contraction (engine "cuda"): 12 slots for the GPU's mixture
// kernel, the column output's moment (a point: ENERGY_MOMENT_POINT = 1),
// the call in the kernel's precision, its code mapped onto the status.
// CHECK-LABEL: energy.model @mixture
// CHECK-LABEL: func.func @energy_kernel_energy(
// CHECK:         %[[SLOTS:[a-z0-9_]+]] = arith.constant 12 : index
// CHECK:         %[[ARGS:[0-9]+]] = call @energy_support_scratch_alloc(
// CHECK:         %[[POINT:[a-z0-9_]+]] = arith.constant 1 : i64
// CHECK-NEXT:    llvm.getelementptr %{{[0-9]+}}[0] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:    llvm.store %[[POINT]], %{{[0-9]+}} : i64, !llvm.ptr
// CHECK:         %[[CODE:[0-9]+]] = call @energy_support_cuda_quadratic_contract_f32(%[[ARGS]]) : (!llvm.ptr) -> i32
// CHECK:         %[[STATUS:[0-9]+]] = arith.select %{{[0-9]+}}, %[[CODE]], %{{[0-9]+}} : i32
// CHECK-NEXT:    llvm.atomicrmw max %1, %[[STATUS]] monotonic : !llvm.ptr, i32
// CHECK-NOT:     call @energy_support_softmax_contract
// CHECK:         return
// F64-LABEL:   energy.model @mixture
// F64-LABEL:   func.func @energy_kernel_energy(
// F64:           call @energy_support_cuda_quadratic_contract_f64(
// F64-NOT:       call @energy_support_cuda_quadratic_contract_f32(
// F64:           return
energy.model @mixture {
  dim @N
  dim @K
  dim @D
  tensor @x : input [@N, @D]
  tensor @mu : state [@K, @D]
  tensor @prec : state [@K, @D, @D]
  tensor @w : state [@K]
  term @fit {
    %half = constant 5.000000e-01
    %X = read @x : !energy.array<N, D>
    %M = read @mu : !energy.array<K, D>
    %P = read @prec : !energy.array<K, D, D>
    %W = read @w : !energy.array<K>
    %r:2 = softmax_contract quadratic rows (%i : @N) cols (%k : @K) score {
      %p = extract %P[%k] : !energy.array<K, D, D> -> !energy.array<D, D>
      %b = extract %W[%k] : !energy.array<K> -> !energy.array<>
      %a = extract %X[%i] : !energy.array<N, D> -> !energy.array<D>
      %m = extract %M[%k] : !energy.array<K, D> -> !energy.array<D>
      %d = sub %a, %m : !energy.array<D>, !energy.array<D>
      %q = quad %d, %p : !energy.array<D>, !energy.array<D, D>
      %h = mul %q, %half : !energy.array<>, !energy.array<>
      %s = sub %b, %h : !energy.array<>, !energy.array<>
      yield %s : !energy.array<>
    } col_values {
      %a = extract %X[%i] : !energy.array<N, D> -> !energy.array<D>
      yield %a : !energy.array<D>
    } {engine = "cuda"} : !energy.array<N>, !energy.array<K, D>
    %t = reduce_elements sum %r#0 : !energy.array<N>
    %u = reduce_elements sum %r#1 : !energy.array<K, D>
    %v = add %t, %u : !energy.array<>, !energy.array<>
    yield %v : !energy.array<>
  }
}

// -----

// "loops", a column value that is an outer product (an M-step's second
// moments, Σ_i p_ik (x_i − μ_k) y_iᵀ): no D × E array per pair; in both
// passes, each lane block of p_ik · y_i once, then the rows r of the
// column's accumulator, each adding d[r] times it. Nine scratch arrays in
// all, where the outer product built first took two more (one a pass).
// CHECK-LABEL: energy.model @second_moments
// CHECK-LABEL: func.func @energy_kernel_energy(
// CHECK-COUNT-9: call @energy_support_scratch_alloc(
// CHECK-NOT:     call @energy_support_scratch_alloc(
// CHECK:         %[[W:[0-9]+]] = vector.broadcast %{{[0-9]+}} : f32 to vector<16xf32>
// CHECK-NEXT:    arith.index_cast
// CHECK-NEXT:    llvm.getelementptr
// CHECK-NEXT:    %[[Y:[0-9]+]] = llvm.load %{{[0-9]+}} {alignment = 4 : i64} : !llvm.ptr -> vector<16xf32>
// CHECK-NEXT:    %[[WY:[0-9]+]] = arith.mulf %[[W]], %[[Y]] fastmath<reassoc,contract> : vector<16xf32>
// CHECK:         scf.for %[[R:arg[0-9]+]] =
// CHECK:         %[[ACC:[0-9]+]] = llvm.load %{{[0-9]+}} {alignment = 4 : i64} : !llvm.ptr -> vector<16xf32>
// CHECK-NEXT:    %[[AT:[0-9]+]] = arith.index_cast %[[R]] : index to i64
// CHECK-NEXT:    llvm.getelementptr %{{[0-9]+}}[%[[AT]]]
// CHECK-NEXT:    %[[D:[0-9]+]] = llvm.load %{{[0-9]+}} : !llvm.ptr -> f32
// CHECK-NEXT:    %[[DV:[0-9]+]] = vector.broadcast %[[D]] : f32 to vector<16xf32>
// CHECK-NEXT:    %[[TERM:[0-9]+]] = arith.mulf %[[DV]], %[[WY]] fastmath<reassoc,contract> : vector<16xf32>
// CHECK-NEXT:    %[[SUM:[0-9]+]] = arith.addf %[[ACC]], %[[TERM]] fastmath<reassoc,contract> : vector<16xf32>
// CHECK:         llvm.store %[[SUM]], %{{[0-9]+}} {alignment = 4 : i64} : vector<16xf32>, !llvm.ptr
// CHECK:         return
energy.model @second_moments {
  dim @N
  dim @K
  dim @D
  dim @E
  tensor @x : input [@N, @D]
  tensor @y : input [@N, @E]
  tensor @mu : state [@K, @D]
  term @fit {
    %X = read @x : !energy.array<N, D>
    %Y = read @y : !energy.array<N, E>
    %M = read @mu : !energy.array<K, D>
    %r:2 = softmax_contract generic rows (%i : @N) cols (%k : @K) score {
      %a = extract %X[%i] : !energy.array<N, D> -> !energy.array<D>
      %m = extract %M[%k] : !energy.array<K, D> -> !energy.array<D>
      %s = dot %a, %m : !energy.array<D>
      yield %s : !energy.array<>
    } col_values {
      %a = extract %X[%i] : !energy.array<N, D> -> !energy.array<D>
      %m = extract %M[%k] : !energy.array<K, D> -> !energy.array<D>
      %d = sub %a, %m : !energy.array<D>, !energy.array<D>
      %c = extract %Y[%i] : !energy.array<N, E> -> !energy.array<E>
      %o = outer %d, %c : !energy.array<D>, !energy.array<E>
      yield %o : !energy.array<D, E>
    } {engine = "loops"} : !energy.array<N>, !energy.array<K, D, E>
    %t = reduce_elements sum %r#0 : !energy.array<N>
    %u = reduce_elements sum %r#1 : !energy.array<K, D, E>
    %v = add %t, %u : !energy.array<>, !energy.array<>
    yield %v : !energy.array<>
  }
}

// -----

// A contraction marked bilinear whose score is not a dot product (times a
// scale) cannot go to the bilinear kernel: an error, not a wrong call.
energy.model @not_bilinear {
  dim @N
  dim @K
  dim @D
  tensor @x : state [@N, @D]
  tensor @m : input [@K, @D]
  term @e {
    %1 = read @x : !energy.array<N, D>
    %2 = read @m : !energy.array<K, D>
    // expected-error @below {{'energy.softmax_contract' op is marked bilinear but its score is not a dot product (times a scale)}}
    %3 = softmax_contract bilinear rows (%i : @N) cols (%mu : @K) score {
      %6 = extract %1[%i] : !energy.array<N, D> -> !energy.array<D>
      %7 = extract %2[%mu] : !energy.array<K, D> -> !energy.array<D>
      %8 = dot %6, %7 : !energy.array<D>
      %9 = exp %8 : !energy.array<>
      yield %9 : !energy.array<>
    } {engine = "cpu"} : !energy.array<N>
    %4 = reduce_elements sum %3 : !energy.array<N>
    yield %4 : !energy.array<>
  }
}

// -----

// A predicate whose offset is a multiple of a dim (j > i - 2·W, a window's
// width known when the kernel runs) is linear too: the constraint
// -i + j + (2·W - 1) >= 0 goes to the kernel with its offset computed from
// the dim's value.
// CHECK-LABEL: energy.model @window
// CHECK-LABEL: func.func @energy_kernel_energy(
// CHECK:         %[[WSLOT:[0-9]+]] = llvm.getelementptr %arg1[2] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:    %[[WRAW:[0-9]+]] = llvm.load %[[WSLOT]] : !llvm.ptr -> i64
// CHECK-NEXT:    %[[W:[0-9]+]] = arith.index_cast %[[WRAW]] : i64 to index
// CHECK:         %[[ROW:[a-z0-9_-]+]] = arith.constant -1 : index
// CHECK-NEXT:    %[[ROW64:[0-9]+]] = arith.index_cast %[[ROW]] : index to i64
// CHECK-NEXT:    %[[C0:[0-9]+]] = llvm.getelementptr %[[CONSTRAINTS:[0-9]+]][0] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:    llvm.store %[[ROW64]], %[[C0]] : i64, !llvm.ptr
// CHECK:         %[[MINUS1:[a-z0-9_-]+]] = arith.constant -1 : index
// CHECK-NEXT:    %[[TWO:[a-z0-9_]+]] = arith.constant 2 : index
// CHECK-NEXT:    %[[TWOW:[0-9]+]] = arith.muli %[[W]], %[[TWO]] : index
// CHECK-NEXT:    %[[OFFSET:[0-9]+]] = arith.addi %[[MINUS1]], %[[TWOW]] : index
// CHECK-NEXT:    %[[OFFSET64:[0-9]+]] = arith.index_cast %[[OFFSET]] : index to i64
// CHECK-NEXT:    %[[C2:[0-9]+]] = llvm.getelementptr %[[CONSTRAINTS]][2] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:    llvm.store %[[OFFSET64]], %[[C2]] : i64, !llvm.ptr
// CHECK:         call @energy_support_softmax_contract_f32(
energy.model @window {
  dim @N
  dim @D
  dim @W
  tensor @x : state [@N, @D]
  term @e {
    %0 = read @x : !energy.array<N, D>
    %1 = softmax_contract bilinear rows (%i : @N) cols (%j : @N) where {
      %w = size @W : index
      %c2 = arith.constant 2 : index
      %w2 = arith.muli %c2, %w : index
      %lo = arith.subi %i, %w2 : index
      %after = arith.cmpi sgt, %j, %lo : index
      yield %after : i1
    } score {
      %3 = extract %0[%i] : !energy.array<N, D> -> !energy.array<D>
      %4 = extract %0[%j] : !energy.array<N, D> -> !energy.array<D>
      %5 = dot %3, %4 : !energy.array<D>
      yield %5 : !energy.array<>
    } {engine = "cpu"} : !energy.array<N>
    %2 = reduce_elements sum %1 : !energy.array<N>
    yield %2 : !energy.array<>
  }
}
