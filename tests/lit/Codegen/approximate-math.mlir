// RUN: energy-opt %s --energy-approximate-math | FileCheck %s

// Single-precision exp and tanh become polynomials (no math.exp or
// math.tanh left); double precision keeps libm's.
// CHECK-LABEL: func.func @single
// CHECK-NOT:   math.exp
// CHECK-NOT:   math.tanh
// CHECK:       return
func.func @single(%x: f32) -> f32 {
  %e = math.exp %x : f32
  %t = math.tanh %e : f32
  return %t : f32
}

// CHECK-LABEL: func.func @double
// CHECK:       math.exp %{{.*}} : f64
func.func @double(%x: f64) -> f64 {
  %e = math.exp %x : f64
  return %e : f64
}

// Double-precision log1p (which convert-math-to-llvm would make log(1 + x))
// as x · log(u) / (u − 1), u = 1 + x, without fast-math flags; x where u
// is 1, log(u) where u is infinite. Vectors alike.
// CHECK-LABEL: func.func @double_log1p
// CHECK-NOT:   math.log1p
// CHECK:       %[[U:.*]] = arith.addf %[[X:.*]], %[[ONE:.*]] : f64
// CHECK-NEXT:  %[[LOG:.*]] = math.log %[[U]] : f64
// CHECK-NEXT:  %[[D:.*]] = arith.subf %[[U]], %[[ONE]] : f64
// CHECK-NEXT:  %[[R:.*]] = arith.divf %[[LOG]], %[[D]] : f64
// CHECK-NEXT:  %[[S:.*]] = arith.mulf %[[X]], %[[R]] : f64
// CHECK:       %[[INF:.*]] = arith.cmpf oeq, %[[U]], %{{.*}} : f64
// CHECK-NEXT:  %[[EXACT:.*]] = arith.cmpf oeq, %[[U]], %[[ONE]] : f64
// CHECK-NEXT:  %[[TAIL:.*]] = arith.select %[[INF]], %[[LOG]], %[[S]] : f64
// CHECK-NEXT:  %[[Y:.*]] = arith.select %[[EXACT]], %[[X]], %[[TAIL]] : f64
// CHECK:       math.log %{{.*}} : vector<8xf64>
// CHECK-NOT:   math.log1p
// CHECK:       return
func.func @double_log1p(%x: f64, %v: vector<8xf64>) -> (f64, vector<8xf64>) {
  %y = math.log1p %x : f64
  %w = math.log1p %v : vector<8xf64>
  return %y, %w : f64, vector<8xf64>
}
