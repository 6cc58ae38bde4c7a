// RUN: energy-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(energy-emit-kernels)' | FileCheck %s
// RUN: energy-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(energy-emit-kernels{element-type=f64})' | FileCheck %s --check-prefix=F64

// The array patterns of ArrayOps.cpp: constant, rounding_unit, to_real, eye, transpose,
// dot, quad, outer, reduce_elements, prefix_sum, sum_last, broadcast, diag,
// diag_part, extract, embed, select, the row-wise normalisations, and the
// support library's logdet and inverse.

// constant is an arith constant of the element type; to_real of an index
// is sitofp; eye compares row and column of each position; a transpose
// outside loops is the support library's (blocks transposed in registers);
// maxabs folds |x| with maxnumf (it is not fused: the add before it has an
// array of its own).
// CHECK-LABEL: energy.model @leaves
// CHECK-LABEL: func.func @energy_kernel_energy(
// CHECK:         %[[EYE:[0-9]+]] = call @energy_support_scratch_alloc(
// CHECK:         %[[T:[0-9]+]] = call @energy_support_scratch_alloc(
// CHECK:         %[[C:[a-z0-9_]+]] = arith.constant 2.500000e-01 : f32
// CHECK:         %[[STEP:[0-9]+]] = arith.index_cast %arg3 : i64 to index
// CHECK-NEXT:    %[[STEP64:[0-9]+]] = arith.index_cast %[[STEP]] : index to i64
// CHECK-NEXT:    %[[R:[0-9]+]] = arith.sitofp %[[STEP64]] : i64 to f32
// CHECK:         scf.for %[[P:arg[0-9]+]] =
// CHECK-NEXT:      %[[ROW:[0-9]+]] = arith.divui %[[P]], %{{[0-9]+}} : index
// CHECK-NEXT:      %[[COL:[0-9]+]] = arith.remui %[[P]], %{{[0-9]+}} : index
// CHECK-NEXT:      %[[DIAG:[0-9]+]] = arith.cmpi eq, %[[ROW]], %[[COL]] : index
// CHECK-NEXT:      %[[ONE:[a-z0-9_]+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:      %[[ZERO:[a-z0-9_]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      %[[E:[0-9]+]] = arith.select %[[DIAG]], %[[ONE]], %[[ZERO]] : f32
// CHECK:           llvm.getelementptr %[[EYE]][
// CHECK:         call @energy_support_transpose_f32(%{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %[[T]]) : (i64, i64, i64, !llvm.ptr, !llvm.ptr) -> ()
// CHECK:         arith.addf %{{[0-9]+}}, %{{[0-9]+}} fastmath<reassoc,contract> : vector<16xf32>
// CHECK:         %[[MAX:[0-9]+]] = scf.for %{{.*}} iter_args(%[[M:arg[0-9]+]] = %{{.*}}) -> (f32) {
// CHECK:           %[[ABS:[0-9]+]] = math.absf %{{[0-9]+}} : f32
// CHECK-NEXT:      %[[NEXT:[0-9]+]] = arith.maxnumf %[[M]], %[[ABS]] : f32
// CHECK:         %[[P1:[0-9]+]] = arith.mulf %[[MAX]], %[[R]] fastmath<reassoc,contract> : f32
// CHECK:         arith.mulf %[[P1]], %[[C]] fastmath<reassoc,contract> : f32
// CHECK:         return
energy.model @leaves {
  dim @D
  tensor @x : state [@D, @D]
  term @e {
    %c = constant 2.500000e-01
    %s = step : index
    %r = to_real %s : !energy.array<>
    %i = eye @D : !energy.array<D, D>
    %x = read @x : !energy.array<D, D>
    %t = transpose %x : !energy.array<D, D>
    %a = add %t, %i : !energy.array<D, D>, !energy.array<D, D>
    %m = reduce_elements maxabs %a : !energy.array<D, D>
    %p = mul %m, %r : !energy.array<>, !energy.array<>
    %q = mul %p, %c : !energy.array<>, !energy.array<>
    yield %q : !energy.array<>
  }
}

// F64-LABEL:   energy.model @leaves
// F64-LABEL:   func.func @energy_kernel_energy(
// F64:           call @energy_support_transpose_f64(
// F64:           return

// -----

// rounding_unit is the machine epsilon of the element type.
// CHECK-LABEL: energy.model @rounding_unit
// CHECK-LABEL: func.func @energy_kernel_energy(
// CHECK:         arith.constant 1.1920929E-7 : f32
// F64-LABEL:   energy.model @rounding_unit
// F64-LABEL:   func.func @energy_kernel_energy(
// F64:           arith.constant 2.2204460492503131E-16 : f64
energy.model @rounding_unit {
  dim @D
  tensor @x : state [@D]
  term @e {
    %eps = rounding_unit
    %x = read @x : !energy.array<D>
    %s = dot %x, %x : !energy.array<D>
    %q = mul %s, %eps : !energy.array<>, !energy.array<>
    yield %q : !energy.array<>
  }
}

// -----

// A transpose inside a loop (a matrix per position) goes tile by tile
// (16 × 16), in the loop: no call of the support library.
// CHECK-LABEL: energy.model @transpose_in_loop
// CHECK-LABEL: func.func @energy_kernel_energy(
// CHECK-NOT:     call @energy_support_transpose_f32(
// CHECK:         %[[TILE:[a-z0-9_]+]] = arith.constant 16 : index
// CHECK:         scf.for %{{.*}} = %{{.*}} to %{{.*}} step %[[TILE]] {
// CHECK:           arith.minui
// CHECK:           scf.for %{{.*}} = %{{.*}} to %{{.*}} step %[[TILE]] {
// CHECK:             arith.minui
// CHECK-NOT:     call @energy_support_transpose_f32(
// CHECK:         return
energy.model @transpose_in_loop {
  dim @B
  dim @D
  tensor @x : state [@B, @D, @D]
  term @e {
    %s = reduce sum (%b : @B) {
      %x = read @x[%b] : !energy.array<D, D>
      %t = transpose %x : !energy.array<D, D>
      %q = mul %t, %x : !energy.array<D, D>, !energy.array<D, D>
      %m = reduce_elements sum %q : !energy.array<D, D>
      yield %m : !energy.array<>
    } : !energy.array<>
    yield %s : !energy.array<>
  }
}

// -----

// dot of two arrays: one vector loop of products into an accumulator;
// quad: for each block of lanes j, rows of M combined in a register over i,
// times v[j]; outer: rows of the result as lanes of the rhs times a
// broadcast lhs element; lse: a running max and a rescaled sum (exp), then
// max + log(sum).
// CHECK-LABEL: energy.model @products
// CHECK-LABEL: func.func @energy_kernel_energy(
// CHECK:         %[[OUTER:[0-9]+]] = call @energy_support_scratch_alloc(
// CHECK:         %[[DOT:[0-9]+]] = scf.for %{{.*}} iter_args(%[[DACC:arg[0-9]+]] = %{{[0-9]+}}) -> (vector<16xf32>) {
// CHECK:           %[[A:[0-9]+]] = llvm.load %{{[0-9]+}} {alignment = 4 : i64} : !llvm.ptr -> vector<16xf32>
// CHECK:           %[[B:[0-9]+]] = llvm.load %{{[0-9]+}} {alignment = 4 : i64} : !llvm.ptr -> vector<16xf32>
// CHECK-NEXT:      %[[AB:[0-9]+]] = arith.mulf %[[A]], %[[B]] fastmath<reassoc,contract> : vector<16xf32>
// CHECK-NEXT:      arith.addf %[[DACC]], %[[AB]] fastmath<reassoc,contract> : vector<16xf32>
// CHECK:         vector.reduction <add>, %[[DOT]]
// CHECK:         scf.for %{{.*}} iter_args(%[[QACC:arg[0-9]+]] = %{{[0-9]+}}) -> (vector<16xf32>) {
// CHECK:           %[[COMB:[0-9]+]] = scf.for %{{.*}} iter_args(%[[CACC:arg[0-9]+]] = %{{[0-9]+}}) -> (vector<16xf32>) {
// CHECK:             %[[VI:[0-9]+]] = llvm.load %{{[0-9]+}} : !llvm.ptr -> f32
// CHECK-NEXT:        %[[VIS:[0-9]+]] = vector.broadcast %[[VI]] : f32 to vector<16xf32>
// CHECK:             %[[MROW:[0-9]+]] = llvm.load %{{[0-9]+}} {alignment = 4 : i64} : !llvm.ptr -> vector<16xf32>
// CHECK-NEXT:        %[[TERM:[0-9]+]] = arith.mulf %[[VIS]], %[[MROW]] fastmath<reassoc,contract> : vector<16xf32>
// CHECK-NEXT:        arith.addf %[[CACC]], %[[TERM]] fastmath<reassoc,contract> : vector<16xf32>
// CHECK:           }
// CHECK:           %[[VJ:[0-9]+]] = llvm.load %{{[0-9]+}} {alignment = 4 : i64} : !llvm.ptr -> vector<16xf32>
// CHECK-NEXT:      %[[QT:[0-9]+]] = arith.mulf %[[COMB]], %[[VJ]] fastmath<reassoc,contract> : vector<16xf32>
// CHECK-NEXT:      arith.addf %[[QACC]], %[[QT]] fastmath<reassoc,contract> : vector<16xf32>
// CHECK:         scf.for %[[I:arg[0-9]+]] = %{{.*}} to %{{.*}} step %{{[a-z0-9_]+}} {
// CHECK-NEXT:      arith.index_cast %[[I]]
// CHECK-NEXT:      llvm.getelementptr
// CHECK-NEXT:      %[[F:[0-9]+]] = llvm.load %{{[0-9]+}} : !llvm.ptr -> f32
// CHECK:           %[[ROWP:[0-9]+]] = llvm.getelementptr %[[OUTER]][
// CHECK:           scf.for
// CHECK:             %[[WJ:[0-9]+]] = llvm.load %{{[0-9]+}} {alignment = 4 : i64} : !llvm.ptr -> vector<16xf32>
// CHECK-NEXT:        %[[FS:[0-9]+]] = vector.broadcast %[[F]] : f32 to vector<16xf32>
// CHECK-NEXT:        %[[O:[0-9]+]] = arith.mulf %[[FS]], %[[WJ]] fastmath<reassoc,contract> : vector<16xf32>
// CHECK-NEXT:        arith.index_cast
// CHECK-NEXT:        %[[OAT:[0-9]+]] = llvm.getelementptr %[[ROWP]][
// CHECK-NEXT:        llvm.store %[[O]], %[[OAT]] {alignment = 4 : i64} : vector<16xf32>, !llvm.ptr
// CHECK:         %[[LSE:[0-9]+]]:2 = scf.for %{{.*}} iter_args(%[[RMAX:arg[0-9]+]] = %{{.*}}, %[[RSUM:arg[0-9]+]] = %{{.*}}) -> (f32, f32) {
// CHECK:           %[[XL:[0-9]+]] = llvm.load %{{[0-9]+}} : !llvm.ptr -> f32
// CHECK:           %[[BIG:[0-9]+]] = arith.maxnumf %[[RMAX]], %[[XL]] : f32
// CHECK:           math.exp
// CHECK:           math.exp
// CHECK:         }
// CHECK-NEXT:    %[[LOG:[0-9]+]] = math.log %[[LSE]]#1 : f32
// CHECK-NEXT:    arith.addf %[[LSE]]#0, %[[LOG]] fastmath<reassoc,contract> : f32
// CHECK:         return
// F64-LABEL:   energy.model @products
// F64-LABEL:   func.func @energy_kernel_energy(
// F64:           scf.for %{{.*}} iter_args(%{{.*}}) -> (vector<8xf64>) {
// F64:           math.log %{{[0-9]+}}#1 : f64
energy.model @products {
  dim @D
  tensor @v : state [@D]
  tensor @w : input [@D]
  tensor @M : input [@D, @D]
  term @e {
    %v = read @v : !energy.array<D>
    %w = read @w : !energy.array<D>
    %M = read @M : !energy.array<D, D>
    %d = dot %v, %w : !energy.array<D>
    %q = quad %v, %M : !energy.array<D>, !energy.array<D, D>
    %o = outer %v, %w : !energy.array<D>, !energy.array<D>
    %s = reduce_elements lse %o : !energy.array<D, D>
    %a = add %d, %q : !energy.array<>, !energy.array<>
    %b = add %a, %s : !energy.array<>, !energy.array<>
    yield %b : !energy.array<>
  }
}

// -----

// prefix_sum (reverse, exclusive): a step along the leading axis, from the
// end, whose first row is 0 and every other the previous result plus the
// operand's next row, lanes at a time; sum_last sums each row's last axis;
// broadcast repeats each element along the new trailing axis; the sum of
// elements is a vector loop.
// CHECK-LABEL: energy.model @running
// CHECK-LABEL: func.func @energy_kernel_energy(
// CHECK:         %[[PS:[0-9]+]] = call @energy_support_scratch_alloc(
// CHECK:         %[[SL:[0-9]+]] = call @energy_support_scratch_alloc(
// CHECK:         %[[BC:[0-9]+]] = call @energy_support_scratch_alloc(
// CHECK:         scf.for %[[STEP:arg[0-9]+]] = %{{.*}} to %[[LEN:[0-9]+]] step
// CHECK-NEXT:      %[[LAST:[0-9]+]] = arith.subi %[[LEN]], %{{.*}} : index
// CHECK-NEXT:      %[[POS:[0-9]+]] = arith.subi %[[LAST]], %[[STEP]] : index
// CHECK-NEXT:      %[[PREV:[0-9]+]] = arith.addi %[[POS]], %{{.*}} : index
// CHECK:           %[[FIRST:[0-9]+]] = arith.cmpi eq, %[[STEP]], %{{.*}} : index
// CHECK:           scf.for
// CHECK:             %[[Z:[0-9]+]] = vector.broadcast %{{.*}} : f32 to vector<16xf32>
// CHECK:             llvm.getelementptr %[[PS]][
// CHECK:             %[[SUM:[0-9]+]] = arith.addf %{{[0-9]+}}, %{{[0-9]+}} fastmath<reassoc,contract> : vector<16xf32>
// CHECK-NEXT:        %[[V:[0-9]+]] = arith.select %[[FIRST]], %[[Z]], %[[SUM]] : vector<16xf32>
// CHECK:             llvm.getelementptr %[[PS]][
// CHECK-NEXT:        llvm.store %[[V]], %{{[0-9]+}} {alignment = 4 : i64} : vector<16xf32>, !llvm.ptr
// CHECK:         scf.for
// CHECK:           scf.for %{{.*}} iter_args(%[[ACC:arg[0-9]+]] = %{{.*}}) -> (f32) {
// CHECK:             llvm.getelementptr %[[PS]][
// CHECK:             arith.addf %[[ACC]], %{{[0-9]+}} fastmath<reassoc,contract> : f32
// CHECK:           llvm.getelementptr %[[SL]][
// CHECK:         scf.for %[[BP:arg[0-9]+]] =
// CHECK-NEXT:      %[[SRC:[0-9]+]] = arith.divui %[[BP]], %{{[0-9]+}} : index
// CHECK-NEXT:      %[[SRC64:[0-9]+]] = arith.index_cast %[[SRC]] : index to i64
// CHECK-NEXT:      llvm.getelementptr %[[SL]][%[[SRC64]]]
// CHECK:           llvm.getelementptr %[[BC]][
// CHECK:         vector.reduction <add>
// CHECK:         return
energy.model @running {
  dim @N
  dim @D
  tensor @x : state [@N, @D]
  term @e {
    %x = read @x : !energy.array<N, D>
    %p = prefix_sum %x reverse exclusive : !energy.array<N, D>
    %s = sum_last %p : !energy.array<N, D>
    %b = broadcast %s : !energy.array<N> to !energy.array<N, D>
    %t = reduce_elements sum %b : !energy.array<N, D>
    yield %t : !energy.array<>
  }
}

// -----

// diag puts v[row] where row = column; logdet and inverse are calls of the
// support library in the kernel's precision (logdet's f64 result narrowed
// for f32); diag_part loads (i, i); extract at an index is a slice; embed
// zeroes the array, then stores the value at its slice; rmsnorm scales each
// row by 1 / sqrt(mean square + 1e-5).
// CHECK-LABEL: energy.model @diagonals
// CHECK-LABEL: func.func @energy_kernel_energy(
// CHECK:         %[[DG:[0-9]+]] = call @energy_support_scratch_alloc(
// CHECK:         %[[INV:[0-9]+]] = call @energy_support_scratch_alloc(
// CHECK:         %[[DP:[0-9]+]] = call @energy_support_scratch_alloc(
// CHECK:         %[[EMB:[0-9]+]] = call @energy_support_scratch_alloc(
// CHECK:         scf.for %[[P:arg[0-9]+]] =
// CHECK-NEXT:      %[[ROW:[0-9]+]] = arith.divui %[[P]], %{{[0-9]+}} : index
// CHECK-NEXT:      %[[COL:[0-9]+]] = arith.remui %[[P]], %{{[0-9]+}} : index
// CHECK-NEXT:      %[[ON:[0-9]+]] = arith.cmpi eq, %[[ROW]], %[[COL]] : index
// CHECK:           %[[VR:[0-9]+]] = llvm.load %{{[0-9]+}} : !llvm.ptr -> f32
// CHECK:           arith.select %[[ON]], %[[VR]], %{{.*}} : f32
// CHECK:           llvm.getelementptr %[[DG]][
// CHECK:         %[[LD:[0-9]+]] = call @energy_support_logdet_f32(%{{[0-9]+}}, %[[DG]]) : (i64, !llvm.ptr) -> f64
// CHECK-NEXT:    %[[LDN:[0-9]+]] = arith.truncf %[[LD]] : f64 to f32
// CHECK:         call @energy_support_inverse_f32(%{{[0-9]+}}, %[[DG]], %[[INV]]) : (i64, !llvm.ptr, !llvm.ptr) -> i32
// CHECK:         scf.for %[[I:arg[0-9]+]] =
// CHECK:           %[[II:[0-9]+]] = arith.addi %{{[0-9]+}}, %[[I]] : index
// CHECK-NEXT:      %[[II64:[0-9]+]] = arith.index_cast %[[II]] : index to i64
// CHECK-NEXT:      llvm.getelementptr %[[INV]][%[[II64]]]
// CHECK:           llvm.getelementptr %[[DP]][
// CHECK:         scf.for %[[J:arg[0-9]+]] =
// CHECK:           llvm.getelementptr %[[DP]][
// CHECK:           %[[XJ:[0-9]+]] = llvm.load %{{[0-9]+}} : !llvm.ptr -> f32
// CHECK:           scf.for
// CHECK:             llvm.store %{{.*}}, %{{[0-9]+}} : f32, !llvm.ptr
// CHECK-NEXT:      }
// CHECK:           llvm.getelementptr %[[EMB]][
// CHECK:           %[[AT:[0-9]+]] = llvm.getelementptr
// CHECK-NEXT:      llvm.store %[[XJ]], %[[AT]] : f32, !llvm.ptr
// CHECK:           scf.for
// CHECK:             %[[MS:[0-9]+]] = arith.divf
// CHECK:             %[[MSE:[0-9]+]] = arith.addf %[[MS]], %{{.*}} fastmath<reassoc,contract> : f32
// CHECK-NEXT:        %[[RMS:[0-9]+]] = math.sqrt %[[MSE]] : f32
// CHECK-NEXT:        arith.divf %{{.*}}, %[[RMS]] fastmath<reassoc,contract> : f32
// CHECK:         arith.addf %[[LDN]], %{{[0-9]+}} fastmath<reassoc,contract> : f32
// CHECK:         return
// F64-LABEL:   energy.model @diagonals
// F64-LABEL:   func.func @energy_kernel_energy(
// F64:           %[[LD:[0-9]+]] = call @energy_support_logdet_f64(%{{[0-9]+}}, %{{[0-9]+}}) : (i64, !llvm.ptr) -> f64
// F64-NOT:       arith.truncf
// F64:           call @energy_support_inverse_f64(
// F64-NOT:       call @energy_support_logdet_f32
// F64-NOT:       call @energy_support_inverse_f32
// F64:           return
energy.model @diagonals {
  dim @D
  tensor @v : state [@D]
  term @e {
    %v = read @v : !energy.array<D>
    %g = diag %v : !energy.array<D>
    %l = logdet %g : !energy.array<D, D>
    %i = inverse %g : !energy.array<D, D>
    %p = diag_part %i : !energy.array<D, D>
    %k = reduce sum (%j : @D) {
      %x = extract %p[%j] : !energy.array<D> -> !energy.array<>
      %z = embed %x into [%j] : !energy.array<> -> !energy.array<D>
      %r = rmsnorm %z : !energy.array<D>
      %s = reduce_elements sum %r : !energy.array<D>
      yield %s : !energy.array<>
    } : !energy.array<>
    %t = add %l, %k : !energy.array<>, !energy.array<>
    yield %t : !energy.array<>
  }
}

// -----

// Rows: every pass over a row runs in vectors of 16 and a scalar remainder.
// softmax takes the row's max by compare and select (one instruction, where
// maxnumf takes three; a NaN it passes over makes its exp and the sum NaN),
// halving the accumulator down to one lane, stores exp(x - max) and scales by
// 1 / its sum; log_softmax subtracts max + log(sum exp(x - max)); layernorm
// centres and scales by 1 / sqrt(variance + 1e-5). select of arrays selects
// the pointer.
// CHECK-LABEL: energy.model @rows
// CHECK-LABEL: func.func @energy_kernel_energy(
// CHECK:         %[[SM:[0-9]+]] = call @energy_support_scratch_alloc(
// CHECK:         %[[LSM:[0-9]+]] = call @energy_support_scratch_alloc(
// CHECK:         %[[LN:[0-9]+]] = call @energy_support_scratch_alloc(
// CHECK:         scf.for
// CHECK:           llvm.getelementptr %[[SM]][
// CHECK:           scf.for %{{.*}} -> (vector<16xf32>) {
// CHECK:             %[[GTV:[0-9]+]] = arith.cmpf ogt, %[[ACC:arg[0-9]+]], %[[XV:[0-9]+]] : vector<16xf32>
// CHECK-NEXT:        arith.select %[[GTV]], %[[ACC]], %[[XV]] : vector<16xi1>, vector<16xf32>
// CHECK:           vector.extract_strided_slice %{{.*}} {offsets = [8], sizes = [8], strides = [1]}
// CHECK:           vector.extract_strided_slice %{{.*}} {offsets = [1], sizes = [1], strides = [1]}
// CHECK:           %[[MAX:[0-9]+]] = scf.for %{{.*}} -> (f32) {
// CHECK:             arith.cmpf ogt
// CHECK:           %[[ZV:[0-9]+]] = scf.for %{{.*}} -> (vector<16xf32>) {
// CHECK:             %[[MAXV:[0-9]+]] = vector.broadcast %[[MAX]] : f32 to vector<16xf32>
// CHECK-NEXT:        %[[SH:[0-9]+]] = arith.subf %{{[0-9]+}}, %[[MAXV]] fastmath<reassoc,contract> : vector<16xf32>
// CHECK-NEXT:        %[[W:[0-9]+]] = math.exp %[[SH]] : vector<16xf32>
// CHECK:             llvm.store %[[W]], %{{[0-9]+}} {alignment = 4 : i64} : vector<16xf32>, !llvm.ptr
// CHECK:           %[[ZH:[0-9]+]] = vector.reduction <add>, %[[ZV]]
// CHECK:           %[[Z:[0-9]+]] = scf.for %{{.*}} iter_args(%{{.*}} = %[[ZH]]) -> (f32) {
// CHECK:             math.exp %{{[0-9]+}} : f32
// CHECK:           %[[RZ:[0-9]+]] = arith.divf %{{.*}}, %[[Z]] fastmath<reassoc,contract> : f32
// CHECK:           %[[RZV:[0-9]+]] = vector.broadcast %[[RZ]] : f32 to vector<16xf32>
// CHECK-NEXT:      arith.mulf %{{[0-9]+}}, %[[RZV]] fastmath<reassoc,contract> : vector<16xf32>
// CHECK:         scf.for
// CHECK:           llvm.getelementptr %[[LSM]][
// CHECK:           %[[LMAX:[0-9]+]] = scf.for %{{.*}} -> (f32) {
// CHECK:           scf.for %{{.*}} -> (vector<16xf32>) {
// CHECK:             math.exp %{{[0-9]+}} : vector<16xf32>
// CHECK:           %[[LZ:[0-9]+]] = scf.for %{{.*}} -> (f32) {
// CHECK:           %[[LOGZ:[0-9]+]] = math.log %[[LZ]] : f32
// CHECK-NEXT:      %[[NORM:[0-9]+]] = arith.addf %[[LMAX]], %[[LOGZ]] fastmath<reassoc,contract> : f32
// CHECK:           scf.for
// CHECK:             %[[NORMV:[0-9]+]] = vector.broadcast %[[NORM]] : f32 to vector<16xf32>
// CHECK-NEXT:        arith.subf %{{[0-9]+}}, %[[NORMV]] fastmath<reassoc,contract> : vector<16xf32>
// CHECK:         scf.for
// CHECK:           llvm.getelementptr %[[LN]][
// CHECK:           %[[MEAN:[0-9]+]] = arith.divf
// CHECK:           scf.for %{{.*}} -> (vector<16xf32>) {
// CHECK:             %[[MEANV:[0-9]+]] = vector.broadcast %[[MEAN]] : f32 to vector<16xf32>
// CHECK-NEXT:        arith.subf %{{[0-9]+}}, %[[MEANV]] fastmath<reassoc,contract> : vector<16xf32>
// CHECK:           math.sqrt
// CHECK:           scf.for
// CHECK:             llvm.store %{{[0-9]+}}, %{{[0-9]+}} {alignment = 4 : i64} : vector<16xf32>, !llvm.ptr
// CHECK:         %[[GT:[0-9]+]] = arith.cmpf ogt, %{{[0-9]+}}, %{{[0-9]+}} : f32
// CHECK-NEXT:    arith.select %[[GT]], %[[LN]], %[[LSM]] : !llvm.ptr
// CHECK:         return
energy.model @rows {
  dim @N
  dim @K
  tensor @x : state [@N, @K]
  term @e {
    %x = read @x : !energy.array<N, K>
    %s = softmax %x : !energy.array<N, K>
    %l = log_softmax %x : !energy.array<N, K>
    %n = layernorm %x : !energy.array<N, K>
    %a = reduce_elements sum %s : !energy.array<N, K>
    %b = reduce_elements sum %l : !energy.array<N, K>
    %p = cmp gt, %a, %b : !energy.array<>
    %c = select %p, %n, %l : !energy.array<N, K>
    %d = reduce_elements sum %c : !energy.array<N, K>
    yield %d : !energy.array<>
  }
}

// -----

// Indices the code generator cannot expand (a modulus of 0) are an error of
// the op that has them.
energy.model @bad_index {
  dim @D
  tensor @v : state [@D]
  term @e {
    %v = read @v : !energy.array<D>
    %k = reduce sum (%j : @D) {
      // expected-error @below {{modulo by non-positive value is not supported}}
      // expected-error @below {{'energy.extract' op has indices the code generator cannot expand}}
      %x = extract %v[%j mod 0] : !energy.array<D> -> !energy.array<>
      yield %x : !energy.array<>
    } : !energy.array<>
    yield %k : !energy.array<>
  }
}
