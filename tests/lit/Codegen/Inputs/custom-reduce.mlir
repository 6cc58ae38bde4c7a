// A plugin's aggregation (reduce custom) that reached code generation
// without energy-plan-kernels turning it into energy.aggregate of a table.
// No plugin is loaded here, so the verifier, which checks the name against
// the loaded plugins, is bypassed on parsing (lower-reductions.mlir).
energy.model @custom {
  dim @N
  tensor @x : state [@N]
  term @e {
    // expected-error @below {{'energy.reduce' op of a plugin aggregation reaches code generation; energy-plan-kernels turns it into energy.aggregate of a table}}
    %0 = reduce custom (%i : @N) {
      %1 = read @x[%i] : !energy.array<>
      yield %1 : !energy.array<>
    } {aggregation = "sparsemax"} : !energy.array<>
    yield %0 : !energy.array<>
  }
}
