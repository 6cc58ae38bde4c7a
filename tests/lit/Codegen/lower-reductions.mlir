// RUN: energy-opt %s -split-input-file --pass-pipeline='builtin.module(energy-emit-kernels)' | FileCheck %s
// RUN: energy-opt %s -split-input-file --pass-pipeline='builtin.module(energy-emit-kernels{element-type=f64})' | FileCheck %s --check-prefix=F64
// RUN: energy-opt %S/Inputs/custom-reduce.mlir --mlir-very-unsafe-disable-verifier-on-parsing --pass-pipeline='builtin.module(energy-emit-kernels)' -verify-diagnostics -o /dev/null

// The pattern of Reductions.cpp: reduce over an index domain, in the order
// of its domain, carrying (admitted positions as an index, running value[,
// running sum]) in registers for scalars and scratch for arrays; an empty domain
// gives 0. A sum marked `parallel` outside every loop runs in fixed chunks
// of its first index on a loop marked parallel, partial results added in
// chunk order afterwards.

// A parallel sum: at entry, the number of chunks (at least 64 positions
// each, at most 256 chunks, partials of at most 2^20 elements) and scratch
// for the partials; a loop over chunks marked energy.parallel runs the
// domain's positions [start, end) of its chunk in order and stores its
// partial; then one loop adds the partials in chunk order.
// CHECK-LABEL: energy.model @parallel_sum
// CHECK-LABEL: func.func @energy_kernel_energy(
// CHECK:         %[[EXTENT:[0-9]+]] = arith.maxsi %{{[0-9]+}}, %{{.*}} : index
// CHECK:         %[[C64:.*]] = arith.constant 64 : index
// CHECK-NEXT:    %[[BYSIZE:[0-9]+]] = arith.ceildivsi %[[EXTENT]], %[[C64]] : index
// CHECK-NEXT:    %[[C256:.*]] = arith.constant 256 : index
// CHECK-NEXT:    %{{[0-9]+}} = arith.minsi %[[BYSIZE]], %[[C256]] : index
// CHECK:         %[[CHUNKS:[0-9]+]] = arith.maxsi %{{[0-9]+}}, %{{.*}} : index
// CHECK-NEXT:    %[[PER:[0-9]+]] = arith.ceildivsi %[[EXTENT]], %[[CHUNKS]] : index
// CHECK:         %[[PARTIALS:[0-9]+]] = call @energy_support_scratch_alloc(
// CHECK:         scf.for %[[CHUNK:arg[0-9]+]] = %{{.*}} to %[[CHUNKS]] step %{{.*}} {
// CHECK-NEXT:      %[[S0:[0-9]+]] = arith.muli %[[CHUNK]], %[[PER]] : index
// CHECK-NEXT:      %[[START:[0-9]+]] = arith.minsi %[[S0]], %[[EXTENT]] : index
// CHECK-NEXT:      %[[E0:[0-9]+]] = arith.addi %[[START]], %[[PER]] : index
// CHECK-NEXT:      %[[END:[0-9]+]] = arith.minsi %[[E0]], %[[EXTENT]] : index
// CHECK:           %[[CHUNKSUM:[0-9]+]]:2 = scf.for %{{.*}} = %[[START]] to %[[END]] step %{{.*}} iter_args(%{{.*}}) -> (index, f32) {
// CHECK:             vector.reduction <add>
// CHECK:           }
// CHECK:           llvm.getelementptr %[[PARTIALS]][
// CHECK:           llvm.store
// CHECK-NEXT:    } {energy.parallel}
// CHECK:         %[[TOTAL:[0-9]+]] = scf.for %{{.*}} = %{{.*}} to %[[CHUNKS]] step %{{.*}} iter_args(%[[ACC:arg[0-9]+]] = %{{.*}}) -> (f32) {
// CHECK:           llvm.getelementptr %[[PARTIALS]][
// CHECK:           %[[PART:[0-9]+]] = llvm.load %{{[0-9]+}} : !llvm.ptr -> f32
// CHECK-NEXT:      %[[NEXT:[0-9]+]] = arith.addf %[[ACC]], %[[PART]] fastmath<reassoc,contract> : f32
// CHECK-NEXT:      scf.yield %[[NEXT]] : f32
// CHECK-NEXT:    }
// CHECK:         return
// F64-LABEL:   energy.model @parallel_sum
// F64-LABEL:   func.func @energy_kernel_energy(
// F64:           scf.for %{{.*}} iter_args(%{{.*}}) -> (index, f64) {
// F64:           } {energy.parallel}
// F64:           scf.for %{{.*}} iter_args(%{{.*}}) -> (f64) {
energy.model @parallel_sum {
  dim @N
  dim @D
  tensor @x : state [@N, @D]
  term @e {
    %0 = reduce sum parallel (%i : @N) {
      %1 = read @x[%i] : !energy.array<D>
      %2 = reduce_elements sqnorm %1 : !energy.array<D>
      yield %2 : !energy.array<>
    } : !energy.array<>
    yield %0 : !energy.array<>
  }
}

// -----

// A parallel sum inside a loop (a foreach's body) runs in order: no chunks,
// no loop of its own marked parallel.
// CHECK-LABEL: energy.model @nested_parallel_sum
// CHECK-LABEL: func.func private @energy_gradient_0_x(
// CHECK-NOT:     arith.ceildivsi
// CHECK:         scf.for %[[I:arg[0-9]+]] =
// CHECK:           %[[SUM:[0-9]+]]:2 = scf.for %{{.*}} iter_args(%{{.*}}) -> (index, f32) {
// CHECK-NOT:       energy.parallel
// CHECK:           }
// CHECK:         } {energy.parallel}
// CHECK-NOT:     arith.ceildivsi
// CHECK:         return
energy.model @nested_parallel_sum {
  dim @N
  dim @K
  tensor @x : state [@N]
  tensor @y : input [@N, @K]
  term @e {
    %0 = read @x : !energy.array<N>
    %1 = reduce_elements sqnorm %0 : !energy.array<N>
    yield %1 : !energy.array<>
  }
  gradient @x {
    foreach parallel (%i : @N) {
      %s = reduce sum parallel (%k : @K) {
        %v = read @y[%i, %k] : !energy.array<>
        yield %v : !energy.array<>
      } : !energy.array<>
      accumulate %s into @x[%i] : !energy.array<>
    }
  }
}

// -----

// lse with a predicate and a temperature: the predicate is an scf.if whose
// else keeps the carried values; each value is divided by the temperature;
// a running max and a running sum of exp(v - max), rescaled by
// exp(old max - new max) (0 from -inf); the result is (max + log(sum)) ×
// temperature, or 0 when no position was admitted.
// CHECK-LABEL: energy.model @lse_temp
// CHECK-LABEL: func.func @energy_kernel_energy(
// CHECK:         %[[TAU:[0-9]+]] = arith.truncf %{{[0-9]+}} : f64 to f32
// CHECK:         %[[NEGINF:[a-z0-9_]+]] = arith.constant 0xFF800000 : f32
// CHECK:         %[[R:[0-9]+]]:3 = scf.for %[[I:arg[0-9]+]] = {{.*}} iter_args(%[[COUNT:arg[0-9]+]] = %{{.*}}, %[[RMAX:arg[0-9]+]] = %[[NEGINF]], %[[RSUM:arg[0-9]+]] = %{{.*}}) -> (index, f32, f32) {
// CHECK:           %[[OK:[0-9]+]] = arith.cmpi sgt, %[[I]], %{{.*}} : index
// CHECK-NEXT:      %[[IF:[0-9]+]]:3 = scf.if %[[OK]] -> (index, f32, f32) {
// CHECK:             %[[X:[0-9]+]] = llvm.load %{{[0-9]+}} {energy.unchanged} : !llvm.ptr -> f32
// CHECK-NEXT:        %[[ONE:[a-z0-9_]+]] = arith.constant 1 : index
// CHECK-NEXT:        arith.addi %[[COUNT]], %[[ONE]] : index
// CHECK-NEXT:        %[[XT:[0-9]+]] = arith.divf %[[X]], %[[TAU]] fastmath<reassoc,contract> : f32
// CHECK-NEXT:        %[[BIG:[0-9]+]] = arith.maxnumf %[[RMAX]], %[[XT]] : f32
// CHECK-NEXT:        %[[WASINF:[0-9]+]] = arith.cmpf oeq, %[[RMAX]], %[[NEGINF]] : f32
// CHECK-NEXT:        %[[D:[0-9]+]] = arith.subf %[[RMAX]], %[[BIG]] fastmath<reassoc,contract> : f32
// CHECK-NEXT:        %[[SCALE:[0-9]+]] = math.exp %[[D]] : f32
// CHECK-NEXT:        %[[SCALE0:[0-9]+]] = arith.select %[[WASINF]], %{{.*}}, %[[SCALE]] : f32
// CHECK:             %[[T:[0-9]+]] = math.exp %{{[0-9]+}} : f32
// CHECK:             %[[RS:[0-9]+]] = arith.mulf %[[RSUM]], %[[SCALE0]] fastmath<reassoc,contract> : f32
// CHECK-NEXT:        arith.addf %[[RS]], %{{[0-9]+}} fastmath<reassoc,contract> : f32
// CHECK:           } else {
// CHECK-NEXT:        scf.yield %[[COUNT]], %[[RMAX]], %[[RSUM]] : index, f32, f32
// CHECK-NEXT:      }
// CHECK:         }
// CHECK-NEXT:    %[[NONE:[a-z0-9_]+]] = arith.constant 0 : index
// CHECK-NEXT:    %[[EMPTY:[0-9]+]] = arith.cmpi eq, %[[R]]#0, %[[NONE]] : index
// CHECK-NEXT:    %[[LOG:[0-9]+]] = math.log %[[R]]#2 : f32
// CHECK-NEXT:    %[[L:[0-9]+]] = arith.addf %[[R]]#1, %[[LOG]] fastmath<reassoc,contract> : f32
// CHECK-NEXT:    %[[LT:[0-9]+]] = arith.mulf %[[L]], %[[TAU]] fastmath<reassoc,contract> : f32
// CHECK-NEXT:    arith.select %[[EMPTY]], %{{.*}}, %[[LT]] : f32
// F64-LABEL:   energy.model @lse_temp
// F64-LABEL:   func.func @energy_kernel_energy(
// F64-NOT:       arith.truncf
// F64:           math.exp %{{[0-9]+}} : f64
// F64:           math.log %{{[0-9]+}}#2 : f64
energy.model @lse_temp {
  dim @N
  tensor @x : state [@N]
  const @tau = 2.000000e+00
  term @e {
    %tau = read @tau : !energy.array<>
    %0 = reduce lse (%i : @N) where {
      %c0 = arith.constant 0 : index
      %ok = arith.cmpi sgt, %i, %c0 : index
      yield %ok : i1
    } temp(%tau : !energy.array<>) {
      %1 = read @x[%i] : !energy.array<>
      yield %1 : !energy.array<>
    } : !energy.array<>
    yield %0 : !energy.array<>
  }
}

// -----

// max and mean of scalars: a running maxnumf from -inf; a running sum
// divided by the number of admitted positions.
// CHECK-LABEL: energy.model @max_mean
// CHECK-LABEL: func.func @energy_kernel_energy(
// CHECK:         %[[NEGINF:[a-z0-9_]+]] = arith.constant 0xFF800000 : f32
// CHECK:         %[[MX:[0-9]+]]:2 = scf.for %{{.*}} iter_args(%{{.*}} = %{{.*}}, %[[RMAX:arg[0-9]+]] = %[[NEGINF]]) -> (index, f32) {
// CHECK:           arith.maxnumf %[[RMAX]], %{{[0-9]+}} : f32
// CHECK:         %[[MN:[0-9]+]]:2 = scf.for %{{.*}} iter_args(%{{.*}}) -> (index, f32) {
// CHECK:           arith.addf
// CHECK:         }
// CHECK:         %[[N64:[0-9]+]] = arith.index_cast %[[MN]]#0 : index to i64
// CHECK-NEXT:    %[[NF:[0-9]+]] = arith.sitofp %[[N64]] : i64 to f32
// CHECK-NEXT:    arith.divf %[[MN]]#1, %[[NF]] fastmath<reassoc,contract> : f32
// CHECK:         return
energy.model @max_mean {
  dim @N
  tensor @x : state [@N]
  term @e {
    %0 = reduce max (%i : @N) {
      %1 = read @x[%i] : !energy.array<>
      yield %1 : !energy.array<>
    } : !energy.array<>
    %2 = reduce mean (%i : @N - 1) {
      %1 = read @x[%i + 1] : !energy.array<>
      yield %1 : !energy.array<>
    } : !energy.array<>
    %3 = add %0, %2 : !energy.array<>, !energy.array<>
    yield %3 : !energy.array<>
  }
}

// -----

// Arrays: a parallel sum of rows keeps a partial row per chunk (zeroed,
// then added to element by element), zeroes the total and adds the
// partials into it in chunk order; a max of rows keeps its running row in
// scratch, set to -inf first.
// CHECK-LABEL: energy.model @vector_sums
// CHECK-LABEL: func.func @energy_kernel_energy(
// CHECK:         %[[PARTIALS:[0-9]+]] = call @energy_support_scratch_alloc(
// CHECK:         %[[RUNNING:[0-9]+]] = call @energy_support_scratch_alloc(
// CHECK:         %[[TOTAL:[0-9]+]] = call @energy_support_scratch_alloc(
// CHECK:         %[[MAXROW:[0-9]+]] = call @energy_support_scratch_alloc(
// CHECK:         scf.for %[[CHUNK:arg[0-9]+]] =
// CHECK:           scf.for
// CHECK:             llvm.getelementptr %[[RUNNING]][
// CHECK-NEXT:        llvm.store
// CHECK:           %{{[0-9]+}} = scf.for %{{.*}} iter_args(%{{.*}}) -> (index) {
// CHECK:             scf.for
// CHECK:               llvm.getelementptr %[[RUNNING]][
// CHECK:               arith.addf
// CHECK:           llvm.getelementptr %[[PARTIALS]][
// CHECK:         } {energy.parallel}
// CHECK:         scf.for
// CHECK:           llvm.getelementptr %[[TOTAL]][
// CHECK-NEXT:      llvm.store
// CHECK:         scf.for
// CHECK:           llvm.getelementptr %[[PARTIALS]][
// CHECK:           llvm.getelementptr %[[TOTAL]][
// CHECK:           arith.addf {{.*}} : vector<16xf32>
// CHECK:         %[[NEGINF:[a-z0-9_]+]] = arith.constant 0xFF800000 : f32
// CHECK:         scf.for
// CHECK:           llvm.getelementptr %[[MAXROW]][
// CHECK-NEXT:      llvm.store %[[NEGINF]]
// CHECK:         scf.for
// CHECK:           scf.for
// CHECK:             arith.maxnumf
// CHECK:             llvm.getelementptr %[[MAXROW]][
// CHECK:         return
energy.model @vector_sums {
  dim @N
  dim @D
  tensor @x : state [@N, @D]
  term @e {
    %0 = reduce sum parallel (%i : @N) {
      %1 = read @x[%i] : !energy.array<D>
      yield %1 : !energy.array<D>
    } : !energy.array<D>
    %2 = reduce max (%i : @N) {
      %1 = read @x[%i] : !energy.array<D>
      yield %1 : !energy.array<D>
    } : !energy.array<D>
    %3 = dot %0, %2 : !energy.array<D>
    yield %3 : !energy.array<>
  }
}
