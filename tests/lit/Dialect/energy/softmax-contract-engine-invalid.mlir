// RUN: energy-opt %s -split-input-file -verify-diagnostics

energy.model @unknown {
  dim @N
  dim @D
  tensor @x : state [@N, @D]
  tensor @y : state [@N, @D]
  gradient @x {
    %q = read @x : !energy.array<N, D>
    %k = read @y : !energy.array<N, D>
    // expected-error @+1 {{has engine "magic"; the known ones are "loops", "cpu", "cuda", "cuda-tensor-cores", "cudnn"}}
    %a:2 = softmax_contract bilinear rows (%c : @N) cols (%p : @N) score {
      %1 = extract %q[%c] : !energy.array<N, D> -> !energy.array<D>
      %2 = extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      %3 = dot %1, %2 : !energy.array<D>
      yield %3 : !energy.array<>
    } row_values {
      %1 = extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      yield %1 : !energy.array<D>
    } {engine = "magic"} : !energy.array<N>, !energy.array<N, D>
  }
}

// -----

energy.model @column_side {
  dim @N
  dim @D
  tensor @x : state [@N, @D]
  tensor @y : state [@N, @D]
  gradient @x {
    %q = read @x : !energy.array<N, D>
    %k = read @y : !energy.array<N, D>
    // expected-error @+1 {{is given to cuDNN's fused attention, but it has column values}}
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
    } {engine = "cudnn"} : !energy.array<N>, !energy.array<N, D>, !energy.array<N, D>
  }
}

// -----

energy.model @strict {
  dim @N
  dim @D
  tensor @x : state [@N, @D]
  tensor @y : state [@N, @D]
  gradient @x {
    %q = read @x : !energy.array<N, D>
    %k = read @y : !energy.array<N, D>
    // expected-error @+1 {{is given to cuDNN's fused attention, but its predicate is not the causal mask (column <= row)}}
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
    } {engine = "cudnn"} : !energy.array<N>, !energy.array<N, D>
  }
}

// -----

energy.model @generic_on_a_kernel {
  dim @N
  dim @D
  tensor @x : state [@N, @D]
  tensor @y : state [@N, @D]
  gradient @x {
    %q = read @x : !energy.array<N, D>
    %k = read @y : !energy.array<N, D>
    // expected-error @+1 {{has engine "cpu", which takes bilinear contractions, not generic ones}}
    %a:2 = softmax_contract generic rows (%c : @N) cols (%p : @N) score {
      %1 = extract %q[%c] : !energy.array<N, D> -> !energy.array<D>
      %2 = extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      %3 = dot %1, %2 : !energy.array<D>
      %4 = tanh %3 : !energy.array<>
      yield %4 : !energy.array<>
    } row_values {
      %1 = extract %k[%p] : !energy.array<N, D> -> !energy.array<D>
      yield %1 : !energy.array<D>
    } {engine = "cpu"} : !energy.array<N>, !energy.array<N, D>
  }
}
