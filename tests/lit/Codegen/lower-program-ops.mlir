// RUN: energy-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(energy-emit-kernels)' | FileCheck %s
// RUN: energy-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(energy-emit-kernels{element-type=f64})' | FileCheck %s --check-prefix=F64

// The program patterns of ProgramOps.cpp: store, accumulate, grad, foreach,
// repeat, once, reads of tensors, lets and consts, and the index and
// predicate ops (step, size, cmp, cloned arith).

// A step program: a const read from the consts argument (f64, narrowed to
// the kernel's type), a grad that calls the gradient function into a zeroed
// buffer and folds its status into the kernel's, and a store whose
// element-wise value (x − lr·g, fused) is computed lanes at a time into the
// tensor's buffer.
// CHECK-LABEL: energy.model @store_grad
// CHECK-LABEL: func.func private @energy_gradient_0_x(
// The accumulation of a value of its own (a read) adds it into the target
// argument, lanes at a time.
// CHECK:         %[[TARGET:[0-9]+]] = llvm.getelementptr %arg5[%{{[0-9]+}}] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK:         scf.for
// CHECK:           %[[SRC:[0-9]+]] = llvm.load %{{[0-9]+}} {alignment = 4 : i64} : !llvm.ptr -> vector<16xf32>
// CHECK:           %[[OLD:[0-9]+]] = llvm.load %{{[0-9]+}} {alignment = 4 : i64} : !llvm.ptr -> vector<16xf32>
// CHECK:           %[[SUM:[0-9]+]] = arith.addf %[[OLD]], %[[SRC]] fastmath<reassoc,contract> : vector<16xf32>
// CHECK:           %[[AT:[0-9]+]] = llvm.getelementptr %[[TARGET]][%{{[0-9]+}}]
// CHECK-NEXT:      llvm.store %[[SUM]], %[[AT]] {alignment = 4 : i64} : vector<16xf32>, !llvm.ptr
// CHECK:         } {energy.elementwise}
// CHECK-LABEL: func.func @energy_kernel_step(
// CHECK:         %[[XP:[0-9]+]] = llvm.getelementptr %arg0[0] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK-NEXT:    %[[X:[0-9]+]] = llvm.load %[[XP]] : !llvm.ptr -> !llvm.ptr
// CHECK:         %[[LRP:[0-9]+]] = llvm.getelementptr %arg2[0] : (!llvm.ptr) -> !llvm.ptr, f64
// CHECK-NEXT:    %[[LR64:[0-9]+]] = llvm.load %[[LRP]] : !llvm.ptr -> f64
// CHECK-NEXT:    %[[LR:[0-9]+]] = arith.truncf %[[LR64]] : f64 to f32
// CHECK:         %[[CODE:[0-9]+]] = call @energy_gradient_0_x(%arg0, %arg1, %arg2, %arg3, %arg4, %[[G:[0-9]+]])
// CHECK-NEXT:    llvm.atomicrmw max %1, %[[CODE]] monotonic : !llvm.ptr, i32
// CHECK:         scf.for
// CHECK:           %[[OLD:[0-9]+]] = llvm.load %{{[0-9]+}} {alignment = 4 : i64} : !llvm.ptr -> vector<16xf32>
// CHECK-NEXT:      %[[LRV:[0-9]+]] = vector.broadcast %[[LR]] : f32 to vector<16xf32>
// CHECK-NEXT:      arith.index_cast
// CHECK-NEXT:      llvm.getelementptr %[[G]][
// CHECK-NEXT:      %[[GV:[0-9]+]] = llvm.load
// CHECK-NEXT:      %[[STEP:[0-9]+]] = arith.mulf %[[LRV]], %[[GV]] fastmath<reassoc,contract> : vector<16xf32>
// CHECK-NEXT:      %[[NEW:[0-9]+]] = arith.subf %[[OLD]], %[[STEP]] fastmath<reassoc,contract> : vector<16xf32>
// CHECK-NEXT:      arith.index_cast
// CHECK-NEXT:      %[[DST:[0-9]+]] = llvm.getelementptr %[[X]][
// CHECK-NEXT:      llvm.store %[[NEW]], %[[DST]] {alignment = 4 : i64} : vector<16xf32>, !llvm.ptr
// CHECK:         return
// In f64 the const is used as it is read.
// F64-LABEL:   energy.model @store_grad
// F64-LABEL:   func.func @energy_kernel_step(
// F64:           %[[LRP:[0-9]+]] = llvm.getelementptr %arg2[0] : (!llvm.ptr) -> !llvm.ptr, f64
// F64-NEXT:      %[[LR:[0-9]+]] = llvm.load %[[LRP]] : !llvm.ptr -> f64
// F64-NOT:       arith.truncf
// F64:           vector.broadcast %[[LR]] : f64 to vector<8xf64>
// F64:           return
energy.model @store_grad {
  dim @N
  tensor @x : state [@N]
  const @lr = 5.000000e-01
  term @e {
    %0 = read @x : !energy.array<N>
    %1 = reduce_elements sqnorm %0 : !energy.array<N>
    yield %1 : !energy.array<>
  }
  gradient @x {
    %0 = read @x : !energy.array<N>
    accumulate %0 into @x : !energy.array<N>
  }
  update_program {
    %0 = read @lr : !energy.array<>
    %1 = read @x : !energy.array<N>
    %2 = grad @x : !energy.array<N>
    %3 = mul %0, %2 : !energy.array<>, !energy.array<N>
    %4 = sub %1, %3 : !energy.array<N>, !energy.array<N>
    store %4 into @x : !energy.array<N>
  }
}

// -----

// In a program, a read of a tensor that a later store overwrites while the
// read is still used is copied before the store (@x); a read that the
// stores do not overwrite in time is read in place (@y).
// CHECK-LABEL: energy.model @read_copy
// CHECK-LABEL: func.func @energy_kernel_step(
// CHECK:         %[[X0:[0-9]+]] = llvm.getelementptr %arg0[0] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK-NEXT:    %[[X:[0-9]+]] = llvm.load %[[X0]] : !llvm.ptr -> !llvm.ptr
// CHECK:         %[[COPY:[0-9]+]] = call @energy_support_scratch_alloc(
// CHECK:         scf.for
// CHECK:           llvm.getelementptr %[[COPY]][
// CHECK-NEXT:      llvm.store {{.*}} : vector<16xf32>, !llvm.ptr
// Then the store of @y's value into @x, and the sum reads the copy.
// CHECK:         scf.for
// CHECK:           llvm.getelementptr %[[X]][
// CHECK:         scf.for
// CHECK:           llvm.getelementptr %[[COPY]][
// CHECK:           arith.addf
// CHECK:         return
energy.model @read_copy {
  dim @N
  tensor @x : state [@N]
  tensor @y : state [@N]
  term @e {
    %0 = read @x : !energy.array<N>
    %1 = reduce_elements sqnorm %0 : !energy.array<N>
    yield %1 : !energy.array<>
  }
  update_program {
    %0 = read @x : !energy.array<N>
    %1 = read @y : !energy.array<N>
    store %1 into @x : !energy.array<N>
    %2 = add %0, %1 : !energy.array<N>, !energy.array<N>
    store %2 into @y : !energy.array<N>
  }
}

// -----

// foreach: `parallel` marks the loop for the thread pool; a predicate
// becomes an scf.if around the body; an accumulation at indices adds into
// the target's slice.
// CHECK-LABEL: energy.model @loops
// CHECK-LABEL: func.func private @energy_gradient_0_x(
// CHECK:         scf.for %[[I:arg[0-9]+]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:           arith.addi %{{.*}}, %[[I]] : index
// CHECK:           llvm.getelementptr %arg5[
// CHECK:           arith.addf {{.*}} : vector<16xf32>
// CHECK:         } {energy.parallel}
// CHECK:         scf.for %[[T:arg[0-9]+]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-NEXT:      %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT:      %[[OK:[0-9]+]] = arith.cmpi sgt, %[[T]], %[[C0]] : index
// CHECK-NEXT:      scf.if %[[OK]] {
// CHECK:             arith.addf {{.*}} : vector<16xf32>
// CHECK:           } else {
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// CHECK-NOT:     energy.parallel
// CHECK:         return
energy.model @loops {
  dim @N
  dim @D
  tensor @x : state [@N, @D]
  tensor @y : input [@N, @D]
  term @e {
    %0 = read @x : !energy.array<N, D>
    %1 = reduce_elements sum %0 : !energy.array<N, D>
    yield %1 : !energy.array<>
  }
  gradient @x {
    foreach parallel (%i : @N) {
      %0 = read @y[%i] : !energy.array<D>
      accumulate %0 into @x[%i] : !energy.array<D>
    }
    foreach (%t : @N - 1) where {
      %c0 = arith.constant 0 : index
      %ok = arith.cmpi sgt, %t, %c0 : index
      yield %ok : i1
    } {
      %0 = read @y[%t + 1] : !energy.array<D>
      accumulate %0 into @x[%t] : !energy.array<D>
    }
  }
}

// -----

// repeat: an scf.while that runs while the body has not said it is done
// and fewer than `max` rounds ran; running out of rounds stores
// ENERGY_KERNEL_NO_CONVERGENCE (1) in the status. The stopping test is a
// cmp (arith.cmpf olt). r, a scalar the body stores into at its top level,
// goes from round to round as a value: loaded once before the loop, stored
// in each round, not read back.
// CHECK-LABEL: energy.model @adaptive
// CHECK-LABEL: func.func @energy_kernel_step(
// CHECK:         %[[R0:[0-9]+]] = llvm.load %{{[0-9]+}} : !llvm.ptr -> f32
// CHECK:         %[[MAX:.*]] = arith.constant 7 : index
// CHECK:         %[[R:[0-9]+]]:3 = scf.while (%[[ROUND:arg[0-9]+]] = %{{.*}}, %[[DONE:arg[0-9]+]] = %false, %[[RIN:arg[0-9]+]] = %[[R0]]) : (index, i1, f32) -> (index, i1, f32) {
// CHECK:           %[[NOTDONE:[0-9]+]] = arith.xori %[[DONE]], %true : i1
// CHECK-NEXT:      %[[LEFT:[0-9]+]] = arith.cmpi slt, %[[ROUND]], %[[MAX]] : index
// CHECK-NEXT:      %[[MORE:[0-9]+]] = arith.andi %[[NOTDONE]], %[[LEFT]] : i1
// CHECK-NEXT:      scf.condition(%[[MORE]]) %[[ROUND]], %[[DONE]], %[[RIN]] : index, i1, f32
// CHECK-NEXT:    } do {
// CHECK-NEXT:    ^bb0(%{{.*}}: index, %{{.*}}: i1, %[[RNOW:arg[0-9]+]]: f32):
// CHECK-NOT:       llvm.load
// CHECK:           %[[HALF:[0-9]+]] = arith.mulf %[[RNOW]], %{{.*}} : f32
// CHECK:           llvm.store %[[HALF]], %{{[0-9]+}} : f32, !llvm.ptr
// CHECK:           %[[STOP:[0-9]+]] = arith.cmpf olt, %[[HALF]], %{{.*}} : f32
// CHECK:           %[[NEXT:[0-9]+]] = arith.addi %{{.*}}, %{{.*}} : index
// CHECK-NEXT:      scf.yield %[[NEXT]], %[[STOP]], %[[HALF]] : index, i1, f32
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[PREV:[0-9]+]] = llvm.load %1 : !llvm.ptr -> i32
// CHECK-NEXT:    %[[NC:.*]] = arith.constant 1 : i32
// CHECK-NEXT:    %[[CODE:[0-9]+]] = arith.select %[[R]]#1, %[[PREV]], %[[NC]] : i32
// CHECK-NEXT:    llvm.store %[[CODE]], %1 : i32, !llvm.ptr
energy.model @adaptive {
  dim @N
  tensor @x : state [@N]
  tensor @r : state []
  term @e {
    %0 = read @x : !energy.array<N>
    %1 = reduce_elements sqnorm %0 : !energy.array<N>
    yield %1 : !energy.array<>
  }
  update_program {
    repeat max 7 {
      %0 = read @r : !energy.array<>
      %h = constant 5.000000e-01
      %1 = mul %0, %h : !energy.array<>, !energy.array<>
      store %1 into @r : !energy.array<>
      %tol = constant 1.000000e-03
      %done = cmp lt, %1, %tol : !energy.array<>
      yield %done : i1
    }
  }
}

// -----

// once: the cached row is used where its flag is 1; otherwise the body
// computes the value and, where the flag is 0, copies it into the cache and
// sets the flag to 1. Per step, the row is the step's where the step is in
// range.
// CHECK-LABEL: energy.model @cached
// CHECK-LABEL: func.func @energy_kernel_energy(
// CHECK:         %[[CACHE0:[0-9]+]] = llvm.getelementptr %arg0[2] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK-NEXT:    %[[CACHE:[0-9]+]] = llvm.load %[[CACHE0]] : !llvm.ptr -> !llvm.ptr
// CHECK:         %[[FLAG0:[0-9]+]] = llvm.getelementptr %arg0[3] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK:         %[[ROW:[0-9]+]] = llvm.getelementptr %[[CACHE]][%{{[0-9]+}}] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK:         %[[F:[0-9]+]] = llvm.load %{{[0-9]+}} : !llvm.ptr -> f32
// CHECK-NEXT:    %[[ONE:[a-z0-9_]+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:    %[[IS1:[0-9]+]] = arith.cmpf oeq, %[[F]], %[[ONE]] : f32
// CHECK-NEXT:    %[[KEPT:[0-9]+]] = arith.andi %true, %[[IS1]] : i1
// CHECK-NEXT:    %[[ZERO:[a-z0-9_]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    %[[IS0:[0-9]+]] = arith.cmpf oeq, %[[F]], %[[ZERO]] : f32
// CHECK-NEXT:    %[[TOKEEP:[0-9]+]] = arith.andi %true, %[[IS0]] : i1
// CHECK-NEXT:    %{{[0-9]+}} = scf.if %[[KEPT]] -> (!llvm.ptr) {
// CHECK-NEXT:      scf.yield %[[ROW]] : !llvm.ptr
// CHECK-NEXT:    } else {
// The body (a transpose, the support library's) into scratch.
// CHECK:           call @energy_support_transpose_f32(
// CHECK:           scf.if %[[TOKEEP]] {
// CHECK:             llvm.store %{{[0-9]+}}, %{{[0-9]+}} {alignment = 4 : i64} : vector<16xf32>, !llvm.ptr
// CHECK:             %[[SET:[a-z0-9_]+]] = arith.constant 1.000000e+00 : f32
// CHECK:             llvm.store %[[SET]], %{{[0-9]+}} : f32, !llvm.ptr
// CHECK-NEXT:      }
// CHECK-NEXT:      scf.yield %{{[0-9]+}} : !llvm.ptr
// CHECK-NEXT:    }
// Per step: the row is the step's, when 0 <= step < S.
// CHECK:         %[[STEP:[0-9]+]] = arith.index_cast %arg3 : i64 to index
// CHECK:         %[[GE:[0-9]+]] = arith.cmpi sge, %[[STEP]], %{{.*}} : index
// CHECK-NEXT:    %[[LT:[0-9]+]] = arith.cmpi slt, %[[STEP]], %{{[0-9]+}} : index
// CHECK-NEXT:    %[[HASROW:[0-9]+]] = arith.andi %[[GE]], %[[LT]] : i1
// CHECK:         arith.select %[[HASROW]], %[[STEP]], %{{.*}} : index
// CHECK:         arith.cmpf oeq
// CHECK-NEXT:    arith.andi %[[HASROW]], %{{[0-9]+}} : i1
// CHECK:         scf.if %{{[0-9]+}} -> (!llvm.ptr) {
// CHECK:         return
energy.model @cached {
  dim @D
  dim @S = 3
  tensor @A : input [@D, @D]
  tensor @y : state [@D]
  tensor @cache.0 : state [@D, @D] = zeros {cache_flag = @cache.0.valid}
  tensor @cache.0.valid : state [] = zeros {flag_of = @cache.0}
  tensor @cache.1 : state [@S, @D, @D] = zeros {cache_flag = @cache.1.valid}
  tensor @cache.1.valid : state [@S] = zeros {flag_of = @cache.1}
  term @e {
    %0 = read @y : !energy.array<D>
    %1 = once @cache.0 valid @cache.0.valid {
      %3 = read @A : !energy.array<D, D>
      %4 = transpose %3 : !energy.array<D, D>
      yield %4 : !energy.array<D, D>
    } : !energy.array<D, D>
    %5 = once per_step @cache.1 valid @cache.1.valid {
      %3 = read @A : !energy.array<D, D>
      %4 = transpose %3 : !energy.array<D, D>
      yield %4 : !energy.array<D, D>
    } : !energy.array<D, D>
    %6 = add %1, %5 : !energy.array<D, D>, !energy.array<D, D>
    %2 = quad %0, %6 : !energy.array<D>, !energy.array<D, D>
    yield %2 : !energy.array<>
  }
}

// -----

// Index ops: step is the step argument, size a dim expression; a read at
// them loads one element, marked energy.unchanged (no program stores into
// the tensor, so a GPU kernel may load it itself). A let read inside a reduction is computed once,
// ahead of the reduction's loop, by a loop of its own marked parallel.
// cmp ge is arith.cmpf oge.
// CHECK-LABEL: energy.model @indices
// CHECK-LABEL: func.func @energy_kernel_energy(
// CHECK:         %[[N:[0-9]+]] = arith.index_cast %{{[0-9]+}} : i64 to index
// CHECK-NEXT:    %[[CM1:.*]] = arith.constant -1 : index
// CHECK-NEXT:    %[[LAST:[0-9]+]] = arith.addi %[[N]], %[[CM1]] : index
// CHECK:         %[[LET:[0-9]+]] = call @energy_support_scratch_alloc(
// CHECK:         %[[STEP:[0-9]+]] = arith.index_cast %arg3 : i64 to index
// CHECK:         arith.addi %{{[0-9]+}}, %[[LAST]] : index
// CHECK:         arith.addi %{{[0-9]+}}, %[[STEP]] : index
// CHECK:         %[[XE:[0-9]+]] = llvm.load %{{[0-9]+}} {energy.unchanged} : !llvm.ptr -> f32
// CHECK:         scf.for
// CHECK:           vector.reduction <add>
// CHECK:           llvm.getelementptr %[[LET]][
// CHECK:         } {energy.parallel}
// CHECK:         %[[SUM:[0-9]+]]:2 = scf.for
// CHECK:           llvm.getelementptr %[[LET]][
// CHECK:         }
// CHECK:         %[[TOTAL:[0-9]+]] = arith.select
// CHECK-NEXT:    %[[GE:[0-9]+]] = arith.cmpf oge, %[[XE]], %[[TOTAL]] : f32
// CHECK-NEXT:    arith.select %[[GE]], %[[XE]], %[[TOTAL]] : f32
energy.model @indices {
  dim @N
  dim @D
  tensor @x : state [@N, @D]
  let @q [%i : @N] : !energy.array<> {
    %0 = read @x[%i] : !energy.array<D>
    %1 = reduce_elements sum %0 : !energy.array<D>
    yield %1 : !energy.array<>
  }
  term @e {
    %s = step : index
    %n = size @N - 1 : index
    %0 = read @x[%n, %s] : !energy.array<>
    %1 = reduce sum (%t : @N) {
      %2 = read @q[%t] : !energy.array<>
      yield %2 : !energy.array<>
    } : !energy.array<>
    %3 = cmp ge, %0, %1 : !energy.array<>
    %4 = select %3, %0, %1 : !energy.array<>
    yield %4 : !energy.array<>
  }
}

// -----

// A grad whose gradient program was never derived is an error.
energy.model @underived {
  dim @N
  tensor @x : state [@N]
  term @e {
    %0 = read @x : !energy.array<N>
    %1 = reduce_elements sqnorm %0 : !energy.array<N>
    yield %1 : !energy.array<>
  }
  update_program {
    %0 = read @x : !energy.array<N>
    // expected-error @below {{'energy.grad' op gradient of @x is not derived; run energy-derive-gradients first}}
    %1 = grad @x : !energy.array<N>
    %2 = sub %0, %1 : !energy.array<N>, !energy.array<N>
    store %2 into @x : !energy.array<N>
  }
}
