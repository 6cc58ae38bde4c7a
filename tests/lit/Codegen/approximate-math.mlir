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
