// energy-cuda-host-fences: launches return before their kernels are done;
// the host waits (energy_support_cuda_fence) only before it touches memory
// a kernel may write, calls the support library with pointers, or returns
// to the runtime.
// RUN: energy-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(energy-cuda-host-fences)' | FileCheck %s

module {
  func.func private @energy_support_cuda_launch(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i32, i64) -> i32
  func.func private @energy_support_cuda_fence() -> i32
  func.func private @energy_support_cuda_alloc(i64) -> !llvm.ptr
  func.func private @energy_support_cuda_free(!llvm.ptr)
  func.func private @energy_support_matmul_f32(i64, i64, i64, !llvm.ptr, !llvm.ptr, !llvm.ptr)
  func.func private @energy_support_cuda_matmul_f32(i64, i64, i64, !llvm.ptr, !llvm.ptr, !llvm.ptr)
  func.func private @energy_support_cuda_softmax_contract_f32(!llvm.ptr) -> i32
  func.func private @energy_support_cuda_quadratic_contract_f32(!llvm.ptr) -> i32
  func.func private @scalar_function(f64) -> f64

  // Two kernels one after the other: no wait between them, though the host
  // fills their slots (its stack) and reads the tables (buffers, dims,
  // consts) between them; a wait before the host reads a buffer, and none
  // at the return after it.
  // CHECK-LABEL: func.func @energy_kernel_step(
  // CHECK:         %[[STATUS:.*]] = llvm.alloca {{.*}} {energy.status}
  // CHECK:         call @energy_support_cuda_launch
  // CHECK-NOT:     call @energy_support_cuda_fence
  // CHECK:         llvm.atomicrmw max %[[STATUS]]
  // CHECK-NOT:     call @energy_support_cuda_fence
  // CHECK:         llvm.store
  // CHECK:         llvm.load %arg1
  // CHECK:         call @energy_support_cuda_launch
  // CHECK-NEXT:    %[[CODE:.*]] = call @energy_support_cuda_fence() : () -> i32
  // CHECK-NEXT:    llvm.atomicrmw max %[[STATUS]], %[[CODE]]
  // CHECK-NEXT:    llvm.load %[[X:.*]] : !llvm.ptr -> f32
  // CHECK-NOT:     call @energy_support_cuda_fence
  // CHECK:         return
  func.func @energy_kernel_step(%buffers: !llvm.ptr, %dims: !llvm.ptr, %consts: !llvm.ptr, %step: i64, %result: !llvm.ptr) -> i32 {
    %one = llvm.mlir.constant(1 : i64) : i64
    %n32 = llvm.mlir.constant(1 : i32) : i32
    %status = llvm.alloca %one x i32 {energy.status} : (i64) -> !llvm.ptr
    %slots = llvm.alloca %one x i64 : (i64) -> !llvm.ptr
    %images = llvm.mlir.addressof @images : !llvm.ptr
    %x = llvm.load %buffers : !llvm.ptr -> !llvm.ptr
    %a = call @energy_support_cuda_launch(%images, %images, %images, %slots, %n32, %one) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i32, i64) -> i32
    %joined = llvm.atomicrmw max %status, %a monotonic : !llvm.ptr, i32
    llvm.store %x, %slots : !llvm.ptr, !llvm.ptr
    %n = llvm.load %dims : !llvm.ptr -> i64
    %b = call @energy_support_cuda_launch(%images, %images, %images, %slots, %n32, %n) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i32, i64) -> i32
    %v = llvm.load %x : !llvm.ptr -> f32
    llvm.store %v, %result : f32, !llvm.ptr
    %code = llvm.load %status : !llvm.ptr -> i32
    return %code : i32
  }

  // A block allocated after the last launch is the host's until a kernel
  // gets it; a call without pointers needs no wait, one given pointers does;
  // the return waits for the last launch, its status joining the result.
  // CHECK-LABEL: func.func @energy_kernel_energy(
  // CHECK:         call @energy_support_cuda_launch
  // CHECK:         %[[FRESH:.*]] = call @energy_support_cuda_alloc
  // CHECK-NOT:     call @energy_support_cuda_fence
  // CHECK:         llvm.store %{{.*}}, %[[FRESH]]
  // CHECK:         call @scalar_function
  // CHECK:         call @energy_support_cuda_launch
  // CHECK-NEXT:    call @energy_support_cuda_fence
  // CHECK-NEXT:    llvm.atomicrmw max
  // CHECK-NEXT:    call @energy_support_matmul_f32
  // CHECK:         call @energy_support_cuda_launch
  // CHECK:         %[[LAST:.*]] = call @energy_support_cuda_fence
  // CHECK-NEXT:    %[[JOINED:.*]] = arith.maxsi %{{.*}}, %[[LAST]] : i32
  // CHECK-NEXT:    return %[[JOINED]] : i32
  func.func @energy_kernel_energy(%buffers: !llvm.ptr, %dims: !llvm.ptr, %consts: !llvm.ptr, %step: i64, %result: !llvm.ptr) -> i32 {
    %one = llvm.mlir.constant(1 : i64) : i64
    %n32 = llvm.mlir.constant(1 : i32) : i32
    %zero = llvm.mlir.constant(0.0 : f32) : f32
    %half = llvm.mlir.constant(0.5 : f64) : f64
    %status = llvm.alloca %one x i32 {energy.status} : (i64) -> !llvm.ptr
    %slots = llvm.alloca %one x i64 : (i64) -> !llvm.ptr
    %images = llvm.mlir.addressof @images : !llvm.ptr
    %x = llvm.load %buffers : !llvm.ptr -> !llvm.ptr
    %a = call @energy_support_cuda_launch(%images, %images, %images, %slots, %n32, %one) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i32, i64) -> i32
    %block = call @energy_support_cuda_alloc(%one) : (i64) -> !llvm.ptr
    llvm.store %zero, %block : f32, !llvm.ptr
    %s = call @scalar_function(%half) : (f64) -> f64
    %b = call @energy_support_cuda_launch(%images, %images, %images, %slots, %n32, %one) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i32, i64) -> i32
    call @energy_support_matmul_f32(%one, %one, %one, %x, %block, %x) : (i64, i64, i64, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
    %c = call @energy_support_cuda_launch(%images, %images, %images, %slots, %n32, %one) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i32, i64) -> i32
    call @energy_support_cuda_free(%block) : (!llvm.ptr) -> ()
    %code = llvm.load %status : !llvm.ptr -> i32
    return %code : i32
  }

  // A host loop after a launch waits once, before it; a loop that launches
  // waits inside, where the host reads what its kernel wrote, and the code
  // after it waits again.
  // CHECK-LABEL: func.func @energy_kernel_grad_x(
  // CHECK:         call @energy_support_cuda_launch
  // CHECK-NEXT:    call @energy_support_cuda_fence
  // CHECK-NEXT:    llvm.atomicrmw
  // CHECK-NEXT:    scf.for
  // CHECK-NOT:     call @energy_support_cuda_fence
  // CHECK:         llvm.store
  // CHECK:         scf.for
  // CHECK-NEXT:      call @energy_support_cuda_launch
  // CHECK-NEXT:      call @energy_support_cuda_fence
  // CHECK-NEXT:      llvm.atomicrmw
  // CHECK-NEXT:      llvm.load
  // CHECK:         }
  // CHECK-NEXT:    call @energy_support_cuda_fence
  // CHECK-NEXT:    llvm.atomicrmw
  // CHECK-NEXT:    llvm.store
  func.func @energy_kernel_grad_x(%buffers: !llvm.ptr, %dims: !llvm.ptr, %consts: !llvm.ptr, %step: i64, %result: !llvm.ptr) -> i32 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %one = llvm.mlir.constant(1 : i64) : i64
    %n32 = llvm.mlir.constant(1 : i32) : i32
    %zero = llvm.mlir.constant(0.0 : f32) : f32
    %status = llvm.alloca %one x i32 {energy.status} : (i64) -> !llvm.ptr
    %slots = llvm.alloca %one x i64 : (i64) -> !llvm.ptr
    %images = llvm.mlir.addressof @images : !llvm.ptr
    %x = llvm.load %buffers : !llvm.ptr -> !llvm.ptr
    %a = call @energy_support_cuda_launch(%images, %images, %images, %slots, %n32, %one) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i32, i64) -> i32
    scf.for %i = %c0 to %c4 step %c1 {
      %j = arith.index_cast %i : index to i64
      %p = llvm.getelementptr %x[%j] : (!llvm.ptr, i64) -> !llvm.ptr, f32
      llvm.store %zero, %p : f32, !llvm.ptr
    }
    scf.for %i = %c0 to %c4 step %c1 {
      %b = func.call @energy_support_cuda_launch(%images, %images, %images, %slots, %n32, %one) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i32, i64) -> i32
      %v = llvm.load %x : !llvm.ptr -> f32
    }
    llvm.store %zero, %x : f32, !llvm.ptr
    %code = llvm.load %status : !llvm.ptr -> i32
    return %code : i32
  }

  // A function of the artifact that the others call starts with their
  // kernels maybe running and leaves its own running; its caller waits
  // after it. Its table arguments are tables there too.
  // CHECK-LABEL: func.func private @energy_gradient_0_x(
  // CHECK:         llvm.load %arg0
  // CHECK-NEXT:    call @energy_support_cuda_fence
  // CHECK-NEXT:    llvm.atomicrmw
  // CHECK-NEXT:    llvm.load
  // CHECK:         call @energy_support_cuda_launch
  // CHECK-NOT:     call @energy_support_cuda_fence
  // CHECK:         return
  func.func private @energy_gradient_0_x(%buffers: !llvm.ptr, %dims: !llvm.ptr, %consts: !llvm.ptr, %step: i64, %result: !llvm.ptr) -> i32 {
    %one = llvm.mlir.constant(1 : i64) : i64
    %n32 = llvm.mlir.constant(1 : i32) : i32
    %status = llvm.alloca %one x i32 {energy.status} : (i64) -> !llvm.ptr
    %slots = llvm.alloca %one x i64 : (i64) -> !llvm.ptr
    %images = llvm.mlir.addressof @images : !llvm.ptr
    %x = llvm.load %buffers : !llvm.ptr -> !llvm.ptr
    %v = llvm.load %x : !llvm.ptr -> i64
    %a = call @energy_support_cuda_launch(%images, %images, %images, %slots, %n32, %v) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i32, i64) -> i32
    %code = llvm.load %status : !llvm.ptr -> i32
    return %code : i32
  }
  // CHECK-LABEL: func.func @energy_kernel_grad_y(
  // CHECK:         call @energy_gradient_0_x
  // CHECK-NEXT:    llvm.atomicrmw
  // CHECK-NEXT:    llvm.load
  // CHECK-NEXT:    %[[AFTER:.*]] = call @energy_support_cuda_fence
  // CHECK-NEXT:    arith.maxsi %{{.*}}, %[[AFTER]]
  func.func @energy_kernel_grad_y(%buffers: !llvm.ptr, %dims: !llvm.ptr, %consts: !llvm.ptr, %step: i64, %result: !llvm.ptr) -> i32 {
    %one = llvm.mlir.constant(1 : i64) : i64
    %status = llvm.alloca %one x i32 {energy.status} : (i64) -> !llvm.ptr
    %a = call @energy_gradient_0_x(%buffers, %dims, %consts, %step, %result) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, !llvm.ptr) -> i32
    %m = llvm.atomicrmw max %status, %a monotonic : !llvm.ptr, i32
    %code = llvm.load %status : !llvm.ptr -> i32
    return %code : i32
  }
  // cuBLAS's products, the softmax and the quadratic contractions queue
  // after the kernels as a launch does: no wait before one, a wait before
  // the host reads their results.
  // CHECK-LABEL: func.func @energy_kernel_output_y(
  // CHECK:         call @energy_support_cuda_launch
  // CHECK-NEXT:    call @energy_support_cuda_matmul_f32
  // CHECK-NEXT:    call @energy_support_cuda_softmax_contract_f32
  // CHECK-NEXT:    call @energy_support_cuda_quadratic_contract_f32
  // CHECK-NEXT:    call @energy_support_cuda_fence
  // CHECK-NEXT:    llvm.atomicrmw
  // CHECK-NEXT:    llvm.load
  func.func @energy_kernel_output_y(%buffers: !llvm.ptr, %dims: !llvm.ptr, %consts: !llvm.ptr, %step: i64, %result: !llvm.ptr) -> i32 {
    %one = llvm.mlir.constant(1 : i64) : i64
    %n32 = llvm.mlir.constant(1 : i32) : i32
    %status = llvm.alloca %one x i32 {energy.status} : (i64) -> !llvm.ptr
    %slots = llvm.alloca %one x i64 : (i64) -> !llvm.ptr
    %images = llvm.mlir.addressof @images : !llvm.ptr
    %x = llvm.load %buffers : !llvm.ptr -> !llvm.ptr
    %a = call @energy_support_cuda_launch(%images, %images, %images, %slots, %n32, %one) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i32, i64) -> i32
    call @energy_support_cuda_matmul_f32(%one, %one, %one, %x, %x, %x) : (i64, i64, i64, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
    %c = call @energy_support_cuda_softmax_contract_f32(%slots) : (!llvm.ptr) -> i32
    %q = call @energy_support_cuda_quadratic_contract_f32(%slots) : (!llvm.ptr) -> i32
    %v = llvm.load %x : !llvm.ptr -> f32
    %code = llvm.load %status : !llvm.ptr -> i32
    return %code : i32
  }

  // A function the runtime calls waits before it returns also where
  // another calls it.
  // CHECK-LABEL: func.func @energy_kernel_term_a(
  // CHECK:         call @energy_support_cuda_launch
  // CHECK:         call @energy_support_cuda_fence
  // CHECK-NEXT:    arith.maxsi
  // CHECK-NEXT:    return
  func.func @energy_kernel_term_a(%buffers: !llvm.ptr, %dims: !llvm.ptr, %consts: !llvm.ptr, %step: i64, %result: !llvm.ptr) -> i32 {
    %one = llvm.mlir.constant(1 : i64) : i64
    %n32 = llvm.mlir.constant(1 : i32) : i32
    %slots = llvm.alloca %one x i64 : (i64) -> !llvm.ptr
    %images = llvm.mlir.addressof @images : !llvm.ptr
    %a = call @energy_support_cuda_launch(%images, %images, %images, %slots, %n32, %one) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i32, i64) -> i32
    return %a : i32
  }
  func.func @energy_kernel_terms(%buffers: !llvm.ptr, %dims: !llvm.ptr, %consts: !llvm.ptr, %step: i64, %result: !llvm.ptr) -> i32 {
    %a = call @energy_kernel_term_a(%buffers, %dims, %consts, %step, %result) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, !llvm.ptr) -> i32
    return %a : i32
  }

  // A block allocated before launches that never had its address stays the
  // host's: filling it (a contraction's arguments) needs no wait. One whose
  // address went into a launch's slots, or to a queued call, may be read
  // by that kernel: writing it waits.
  // CHECK-LABEL: func.func @energy_kernel_arguments(
  // CHECK:         %[[ARGS:.*]] = call @energy_support_cuda_alloc
  // CHECK:         %[[SHARED:.*]] = call @energy_support_cuda_alloc
  // CHECK:         llvm.store %[[SHARED]], %[[SLOTS:.*]] : !llvm.ptr, !llvm.ptr
  // CHECK:         call @energy_support_cuda_launch
  // CHECK-NEXT:    call @energy_support_cuda_matmul_f32
  // CHECK-NEXT:    %[[FIELD:.*]] = llvm.getelementptr %[[ARGS]][1]
  // CHECK-NEXT:    llvm.store %{{.*}}, %[[FIELD]]
  // CHECK-NEXT:    call @energy_support_cuda_softmax_contract_f32(%[[ARGS]])
  // CHECK-NEXT:    call @energy_support_cuda_fence
  // CHECK-NEXT:    llvm.atomicrmw
  // CHECK-NEXT:    llvm.store %{{.*}}, %[[SHARED]]
  func.func @energy_kernel_arguments(%buffers: !llvm.ptr, %dims: !llvm.ptr, %consts: !llvm.ptr, %step: i64, %result: !llvm.ptr) -> i32 {
    %one = llvm.mlir.constant(1 : i64) : i64
    %n32 = llvm.mlir.constant(1 : i32) : i32
    %zero = llvm.mlir.constant(0 : i64) : i64
    %status = llvm.alloca %one x i32 {energy.status} : (i64) -> !llvm.ptr
    %slots = llvm.alloca %one x i64 : (i64) -> !llvm.ptr
    %images = llvm.mlir.addressof @images : !llvm.ptr
    %x = llvm.load %buffers : !llvm.ptr -> !llvm.ptr
    %args = call @energy_support_cuda_alloc(%one) : (i64) -> !llvm.ptr
    %shared = call @energy_support_cuda_alloc(%one) : (i64) -> !llvm.ptr
    llvm.store %shared, %slots : !llvm.ptr, !llvm.ptr
    %a = call @energy_support_cuda_launch(%images, %images, %images, %slots, %n32, %one) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i32, i64) -> i32
    call @energy_support_cuda_matmul_f32(%one, %one, %one, %x, %x, %x) : (i64, i64, i64, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
    %field = llvm.getelementptr %args[1] : (!llvm.ptr) -> !llvm.ptr, i64
    llvm.store %one, %field : i64, !llvm.ptr
    %b = call @energy_support_cuda_softmax_contract_f32(%args) : (!llvm.ptr) -> i32
    llvm.store %zero, %shared : i64, !llvm.ptr
    call @energy_support_cuda_free(%args) : (!llvm.ptr) -> ()
    call @energy_support_cuda_free(%shared) : (!llvm.ptr) -> ()
    %code = llvm.load %status : !llvm.ptr -> i32
    return %code : i32
  }
  llvm.mlir.global internal constant @images("\00") : !llvm.array<1 x i8>
}

// -----

// Without launches, the host still waits for the work queued on the
// stream before the runtime's call (the application's, the runtime's
// copies) before it reads a buffer, and only then.
// CHECK-LABEL: func.func @energy_kernel_energy(
// CHECK-NEXT:    llvm.load %arg0
// CHECK-NEXT:    call @energy_support_cuda_fence()
// CHECK-NEXT:    llvm.load
// CHECK-NOT:     energy_support_cuda_fence()
// CHECK:         return
module {
  func.func private @energy_support_cuda_fence() -> i32
  func.func @energy_kernel_energy(%buffers: !llvm.ptr, %dims: !llvm.ptr, %consts: !llvm.ptr, %step: i64, %result: !llvm.ptr) -> i32 {
    %x = llvm.load %buffers : !llvm.ptr -> !llvm.ptr
    %v = llvm.load %x : !llvm.ptr -> i32
    return %v : i32
  }
}

// -----

// A block allocated before a launch that no launch had stays the host's in
// the regions after it: filled in a branch and handed to a contraction
// there (its arguments), it needs no wait; handed to a launch in a loop,
// its fill in the next iteration waits.
// CHECK-LABEL: func.func @energy_kernel_step(
// CHECK:         call @energy_support_cuda_launch
// CHECK:         scf.if
// CHECK-NEXT:      llvm.store
// CHECK-NEXT:      call @energy_support_cuda_softmax_contract_f32
// CHECK:         scf.for
// CHECK-NEXT:      call @energy_support_cuda_fence()
// CHECK-NEXT:      llvm.atomicrmw
// CHECK-NEXT:      llvm.store
// CHECK-NEXT:      call @energy_support_cuda_launch
module {
  func.func private @energy_support_cuda_launch(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i32, i64) -> i32
  func.func private @energy_support_cuda_fence() -> i32
  func.func private @energy_support_cuda_alloc(i64) -> !llvm.ptr
  func.func private @energy_support_cuda_softmax_contract_f32(!llvm.ptr) -> i32
  llvm.mlir.global internal constant @images(0 : i8) : i8
  func.func @energy_kernel_step(%buffers: !llvm.ptr, %dims: !llvm.ptr, %consts: !llvm.ptr, %step: i64, %result: !llvm.ptr) -> i32 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %one = llvm.mlir.constant(1 : i64) : i64
    %eight = llvm.mlir.constant(8 : i64) : i64
    %n32 = llvm.mlir.constant(1 : i32) : i32
    %status = llvm.alloca %one x i32 {energy.status} : (i64) -> !llvm.ptr
    %slots = llvm.alloca %one x i64 : (i64) -> !llvm.ptr
    %images = llvm.mlir.addressof @images : !llvm.ptr
    %record = call @energy_support_cuda_alloc(%eight) : (i64) -> !llvm.ptr
    %later = call @energy_support_cuda_alloc(%eight) : (i64) -> !llvm.ptr
    %a = call @energy_support_cuda_launch(%images, %images, %images, %slots, %n32, %one) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i32, i64) -> i32
    %n = llvm.load %dims : !llvm.ptr -> i64
    %some = arith.cmpi sgt, %n, %one : i64
    scf.if %some {
      llvm.store %one, %record : i64, !llvm.ptr
      %r = func.call @energy_support_cuda_softmax_contract_f32(%record) : (!llvm.ptr) -> i32
    }
    scf.for %i = %c0 to %c4 step %c1 {
      llvm.store %one, %later : i64, !llvm.ptr
      %b = func.call @energy_support_cuda_launch(%images, %images, %images, %later, %n32, %one) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i32, i64) -> i32
    }
    %code = llvm.load %status : !llvm.ptr -> i32
    return %code : i32
  }
}

// -----

// expected-error @below {{energy-cuda-host-fences: the module does not declare energy_support_cuda_fence}}
module {
  func.func @energy_kernel_energy() -> i32 {
    %c0 = arith.constant 0 : i32
    return %c0 : i32
  }
}
