// RUN: energy-opt %s --split-input-file --energy-plan-reassociate-products | FileCheck %s

// Every token's row times W, summed against the tokens' cotangents: the
// small matrices meet first, Wᵀ (Σ_b X[b]ᵀ C[b]), B·N·D·D + D·D·Y work in
// place of 2·B·N·D·Y (dims of no default count as equal).
// CHECK-LABEL: energy.model @tokens
// CHECK:       %[[S:.*]] = batch_matmul %{{.*}} transposed, %{{.*}} summed : !energy.array<B, N, D>, !energy.array<B, N, D> -> !energy.array<D, D>
// CHECK:       %[[R:.*]] = matmul %{{.*}}, %[[S]] : !energy.array<Y, D>, !energy.array<D, D>
// CHECK:       %[[T:.*]] = transpose %[[R]]
// CHECK:       accumulate %[[T]] into @W
energy.model @tokens {
  energy.dim @B
  energy.dim @N
  energy.dim @D
  energy.dim @Y
  energy.tensor @x : input [@B, @N, @D]
  energy.tensor @c : input [@B, @N, @D]
  energy.tensor @W : param [@D, @Y]
  energy.gradient @W {
    %x = energy.read @x : !energy.array<B, N, D>
    %c = energy.read @c : !energy.array<B, N, D>
    %w = energy.read @W : !energy.array<D, Y>
    %p = energy.batch_matmul %x, %w : !energy.array<B, N, D>, !energy.array<D, Y> -> !energy.array<B, N, Y>
    %g = energy.batch_matmul %p transposed, %c summed : !energy.array<B, N, Y>, !energy.array<B, N, D> -> !energy.array<Y, D>
    %t = energy.transpose %g : !energy.array<Y, D>
    energy.accumulate %t into @W : !energy.array<D, Y>
  }
}

// -----

// A batch of B codes through a P × K dictionary: (V Dᵀ)ᵀ A costs 2·B·P·K
// and D (Vᵀ A) B·K·K + P·K·K, more at these sizes: kept.
// CHECK-LABEL: energy.model @dictionary
// CHECK:       %[[P:.*]] = batch_matmul %{{.*}}, %{{.*}} transposed : !energy.array<B, K>, !energy.array<P, K> -> !energy.array<B, P>
// CHECK:       batch_matmul %[[P]] transposed, %{{.*}} summed : !energy.array<B, P>, !energy.array<B, K> -> !energy.array<P, K>
// CHECK-NOT:   matmul
energy.model @dictionary {
  energy.dim @B = 256
  energy.dim @P = 256
  energy.dim @K = 512
  energy.tensor @v : input [@B, @K]
  energy.tensor @a : input [@B, @K]
  energy.tensor @D : param [@P, @K]
  energy.gradient @D {
    %v = energy.read @v : !energy.array<B, K>
    %a = energy.read @a : !energy.array<B, K>
    %d = energy.read @D : !energy.array<P, K>
    %p = energy.batch_matmul %v, %d transposed : !energy.array<B, K>, !energy.array<P, K> -> !energy.array<B, P>
    %g = energy.batch_matmul %p transposed, %a summed : !energy.array<B, P>, !energy.array<B, K> -> !energy.array<P, K>
    energy.accumulate %g into @D : !energy.array<P, K>
  }
}

// -----

// The same product over a large batch of small codes (B = 4096, P = K = 16):
// Σ_b v_b ⊗ a_b first, B·K·K + P·K·K in place of 2·B·P·K.
// CHECK-LABEL: energy.model @large_batch
// CHECK:       %[[S:.*]] = batch_matmul %{{.*}} transposed, %{{.*}} summed : !energy.array<B, K>, !energy.array<B, K> -> !energy.array<K, K>
// CHECK:       matmul %{{.*}}, %[[S]] : !energy.array<P, K>, !energy.array<K, K>
energy.model @large_batch {
  energy.dim @B = 4096
  energy.dim @P = 16
  energy.dim @K = 16
  energy.tensor @v : input [@B, @K]
  energy.tensor @a : input [@B, @K]
  energy.tensor @D : param [@P, @K]
  energy.gradient @D {
    %v = energy.read @v : !energy.array<B, K>
    %a = energy.read @a : !energy.array<B, K>
    %d = energy.read @D : !energy.array<P, K>
    %p = energy.batch_matmul %v, %d transposed : !energy.array<B, K>, !energy.array<P, K> -> !energy.array<B, P>
    %g = energy.batch_matmul %p transposed, %a summed : !energy.array<B, P>, !energy.array<B, K> -> !energy.array<P, K>
    energy.accumulate %g into @D : !energy.array<P, K>
  }
}

// -----

// Equal sizes, where D (Vᵀ A) is no more work than (V Dᵀ)ᵀ A alone: but
// another statement computes V Dᵀ too (the share step computes it once)
// and multiplies it by D, so the rows' product is computed anyway; the
// reassociated form would add 2·N³ + 2·N³ to that and to the other use's
// N³ in place of N³: both kept.
// CHECK-LABEL: energy.model @shared_rows
// CHECK:       %[[P:.*]] = batch_matmul %{{.*}}, %{{.*}} transposed : !energy.array<B, K>, !energy.array<P, K> -> !energy.array<B, P>
// CHECK:       batch_matmul %[[P]] transposed, %{{.*}} summed : !energy.array<B, P>, !energy.array<B, K> -> !energy.array<P, K>
// CHECK:       %[[Q:.*]] = batch_matmul %{{.*}}, %{{.*}} transposed : !energy.array<B, K>, !energy.array<P, K> -> !energy.array<B, P>
// CHECK:       batch_matmul %[[Q]], %{{.*}} : !energy.array<B, P>, !energy.array<P, K> -> !energy.array<B, K>
// CHECK-NOT:   matmul
energy.model @shared_rows {
  energy.dim @B
  energy.dim @P
  energy.dim @K
  energy.tensor @v : input [@B, @K]
  energy.tensor @a : state [@B, @K]
  energy.tensor @D : param [@P, @K]
  energy.gradient @D and [@a] {
    %v = energy.read @v : !energy.array<B, K>
    %a = energy.read @a : !energy.array<B, K>
    %d = energy.read @D : !energy.array<P, K>
    %p = energy.batch_matmul %v, %d transposed : !energy.array<B, K>, !energy.array<P, K> -> !energy.array<B, P>
    %g = energy.batch_matmul %p transposed, %a summed : !energy.array<B, P>, !energy.array<B, K> -> !energy.array<P, K>
    energy.accumulate %g into @D : !energy.array<P, K>
    %v2 = energy.read @v : !energy.array<B, K>
    %d2 = energy.read @D : !energy.array<P, K>
    %q = energy.batch_matmul %v2, %d2 transposed : !energy.array<B, K>, !energy.array<P, K> -> !energy.array<B, P>
    %h = energy.batch_matmul %q, %d2 : !energy.array<B, P>, !energy.array<P, K> -> !energy.array<B, K>
    energy.accumulate %h into @a : !energy.array<B, K>
  }
}

// -----

// The same statements in a program, where a store may come between the two
// reads of D: the products are not taken for one, and each, weighed alone,
// is reassociated (a tie at equal sizes).
// CHECK-LABEL: energy.model @program_rows
// CHECK:       %[[S:.*]] = batch_matmul %{{.*}} transposed, %{{.*}} summed : !energy.array<B, K>, !energy.array<B, K> -> !energy.array<K, K>
// CHECK:       matmul %{{.*}}, %[[S]] : !energy.array<P, K>, !energy.array<K, K>
// CHECK:       store
// CHECK:       %[[M:.*]] = matmul %{{.*}}, %{{.*}} : !energy.array<K, P>, !energy.array<P, K>
// CHECK:       batch_matmul %{{.*}}, %[[M]] : !energy.array<B, K>, !energy.array<K, K> -> !energy.array<B, K>
energy.model @program_rows {
  energy.dim @B
  energy.dim @P
  energy.dim @K
  energy.tensor @v : input [@B, @K]
  energy.tensor @a : state [@B, @K]
  energy.tensor @D : state [@P, @K]
  energy.update_program {
    %v = energy.read @v : !energy.array<B, K>
    %a = energy.read @a : !energy.array<B, K>
    %d = energy.read @D : !energy.array<P, K>
    %p = energy.batch_matmul %v, %d transposed : !energy.array<B, K>, !energy.array<P, K> -> !energy.array<B, P>
    %g = energy.batch_matmul %p transposed, %a summed : !energy.array<B, P>, !energy.array<B, K> -> !energy.array<P, K>
    energy.store %g into @D : !energy.array<P, K>
    %v2 = energy.read @v : !energy.array<B, K>
    %d2 = energy.read @D : !energy.array<P, K>
    %q = energy.batch_matmul %v2, %d2 transposed : !energy.array<B, K>, !energy.array<P, K> -> !energy.array<B, P>
    %h = energy.batch_matmul %q, %d2 : !energy.array<B, P>, !energy.array<P, K> -> !energy.array<B, K>
    energy.store %h into @a : !energy.array<B, K>
  }
}

// -----

// The M-step's weighted sums Rᵀ X, with Rᵀ a table of R[i, k] over k and i:
// the product reads R transposed, Σ_i R[i]ᵀ ⊗ X[i], and the copy is gone.
// CHECK-LABEL: energy.model @responsibilities
// CHECK-NOT:   tabulate
// CHECK:       %[[R:.*]] = read @R : !energy.array<N, K>
// CHECK:       %[[M:.*]] = batch_matmul %[[R]] transposed, %{{.*}} summed : !energy.array<N, K>, !energy.array<N, D> -> !energy.array<K, D>
// CHECK-NEXT:  store %[[M]] into @mu
energy.model @responsibilities {
  energy.dim @N
  energy.dim @K
  energy.dim @D
  energy.tensor @x : input [@N, @D]
  energy.tensor @R : state [@N, @K]
  energy.tensor @mu : state [@K, @D]
  energy.update_program {
    %x = energy.read @x : !energy.array<N, D>
    %t = energy.tabulate (%k : @K) {
      %row = energy.tabulate (%i : @N) {
        %r = energy.read @R[%i, %k] : !energy.array<>
        energy.yield %r : !energy.array<>
      } : !energy.array<N>
      energy.yield %row : !energy.array<N>
    } : !energy.array<K, N>
    %m = energy.batch_matmul %t, %x : !energy.array<K, N>, !energy.array<N, D> -> !energy.array<K, D>
    energy.store %m into @mu : !energy.array<K, D>
  }
}

// -----

// A batch of products with a matrix each, P[b] = A[b] V[b] (weights over
// S slots times the slots' rows, read through a copy of P), summed against
// rows C on either side: the rows meet first, Σ_b (C[b]ᵀ A[b]) V[b] and
// Σ_b V[b]ᵀ (A[b]ᵀ C[b]), 2·B·N·D·S + 2·B·S·D·D work each in place of
// 2·B·N·S·D + 2·B·N·D·D at N = 256, S = 8, D = 64 (and A[b]ᵀ C[b] is the
// transpose of C[b]ᵀ A[b], computed before).
// CHECK-LABEL: energy.model @slots
// CHECK-NOT:   tabulate
// CHECK:       %[[L:.*]] = batch_matmul %{{.*}} transposed, %{{.*}} : !energy.array<B, N, D>, !energy.array<B, N, S> -> !energy.array<B, D, S>
// CHECK:       %[[GL:.*]] = batch_matmul %[[L]], %{{.*}} summed : !energy.array<B, D, S>, !energy.array<B, S, D> -> !energy.array<D, D>
// CHECK:       accumulate %[[GL]] into @W
// CHECK:       %[[R:.*]] = transpose %[[L]] : !energy.array<B, D, S>
// CHECK:       %[[GR:.*]] = batch_matmul %{{.*}} transposed, %[[R]] summed : !energy.array<B, S, D>, !energy.array<B, S, D> -> !energy.array<D, D>
// CHECK:       accumulate %[[GR]] into @W
energy.model @slots {
  energy.dim @B = 16
  energy.dim @N = 256
  energy.dim @S = 8
  energy.dim @D = 64
  energy.tensor @a : input [@B, @N, @S]
  energy.tensor @v : input [@B, @S, @D]
  energy.tensor @c : input [@B, @N, @D]
  energy.tensor @W : param [@D, @D]
  energy.gradient @W {
    %a = energy.read @a : !energy.array<B, N, S>
    %v = energy.read @v : !energy.array<B, S, D>
    %c = energy.read @c : !energy.array<B, N, D>
    %p = energy.batch_matmul %a, %v : !energy.array<B, N, S>, !energy.array<B, S, D> -> !energy.array<B, N, D>
    %copy = energy.tabulate (%b : @B, %j : @N) {
      %row = energy.extract %p[%b, %j] : !energy.array<B, N, D> -> !energy.array<D>
      energy.yield %row : !energy.array<D>
    } : !energy.array<B, N, D>
    %gl = energy.batch_matmul %c transposed, %copy summed : !energy.array<B, N, D>, !energy.array<B, N, D> -> !energy.array<D, D>
    energy.accumulate %gl into @W : !energy.array<D, D>
    %q = energy.batch_matmul %a, %v : !energy.array<B, N, S>, !energy.array<B, S, D> -> !energy.array<B, N, D>
    %gr = energy.batch_matmul %q transposed, %c summed : !energy.array<B, N, D>, !energy.array<B, N, D> -> !energy.array<D, D>
    energy.accumulate %gr into @W : !energy.array<D, D>
  }
}
