//===- EnergyExprOps.td - Expression ops of the energy dialect -*- tablegen -*-===//
//
// The ops of expressions over arrays: leaves, element-wise math with its
// derivative rules, vector and matrix math, reductions and plugins' code.
// Included by EnergyOps.td, in its order.
//
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// Leaves of expressions
//===----------------------------------------------------------------------===//

def Energy_ConstantOp : Energy_Op<"constant", [Pure, ConstantLike]> {
  let summary = "A scalar real constant";
  let arguments = (ins F64Attr:$value);
  let results = (outs Energy_Scalar:$result);
  let assemblyFormat = "$value attr-dict";
  let builders = [OpBuilder<(ins "double":$value)>];
  let hasFolder = 1;
}

def Energy_RoundingUnitOp : Energy_Op<"rounding_unit", [Pure]> {
  let summary = "The machine epsilon of the type the program computes in";
  let description = [{
    2^-52 where the program computes in f64 (the interpreter, f64 kernels),
    2^-23 in f32 kernels (bf16 products included): lowering resolves it.
    For tolerances that follow the precision, such as conjugate gradients'
    test for a direction without curvature.

    ```mlir
    %eps = energy.rounding_unit
    ```
  }];
  let results = (outs Energy_Scalar:$result);
  let assemblyFormat = "attr-dict";
}

def Energy_ReadOp : Energy_Op<"read", [AlwaysSpeculatable,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    DeclareOpInterfaceMethods<DerivativeOpInterface>]> {
  let summary = "Reads a tensor, let or const at affine indices";
  let description = [{
    Indexing slices leading axes: with `@W : [@H, @Dh, @D]`, `@W[%h]` is an
    `!energy.array<Dh, D>`. Indices are affine in index values (domain
    indices, `energy.step`, `energy.size`).

    ```mlir
    %x1 = energy.read @x[%t + 1] : !energy.array<D>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$source, AffineMapAttr:$map,
                       Variadic<Index>:$indices);
  let results = (outs Energy_AnyArray:$result);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
}

def Energy_ExtractOp : Energy_Op<"extract", [Pure,
    DeclareOpInterfaceMethods<DerivativeOpInterface>]> {
  let summary = "Slices the leading axes of a value at affine indices";
  let description = [{
    Indexing of a computed value, as `energy.read` indexes a tensor:
    `log_softmax(w)[k]` is

    ```mlir
    %l = energy.log_softmax %w : !energy.array<K>
    %lk = energy.extract %l[%k] : !energy.array<K> -> !energy.array<>
    ```
  }];
  let arguments = (ins Energy_AnyArray:$source, AffineMapAttr:$map,
                       Variadic<Index>:$indices);
  let results = (outs Energy_AnyArray:$result);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
}

def Energy_EmbedOp : Energy_Op<"embed", [Pure,
    DeclareOpInterfaceMethods<DerivativeOpInterface>]> {
  let summary = "An array of zeros holding a value at affine indices";
  let description = [{
    The adjoint of `energy.extract`: the result has zeros everywhere except
    the slice at the indices, which holds the operand.

    ```mlir
    %g = energy.embed %v into [%k] : !energy.array<> -> !energy.array<K>
    ```
  }];
  let arguments = (ins Energy_AnyArray:$value, AffineMapAttr:$map,
                       Variadic<Index>:$indices);
  let results = (outs Energy_AnyArray:$result);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
}

def Energy_StepOp : Energy_Op<"step", [Pure]> {
  let summary = "The current dynamics step, counted from 0";
  let results = (outs Index:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

def Energy_SizeOp : Energy_Op<"size", [Pure,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "The value of a dim (or dim expression) as an index";
  let arguments = (ins Energy_DimExprAttr:$size);
  let results = (outs Index:$result);
  let assemblyFormat = "custom<DimExpr>($size) attr-dict `:` type($result)";
}

def Energy_ToRealOp : Energy_Op<"to_real", [Pure,
    DeclareOpInterfaceMethods<DerivativeOpInterface>]> {
  let summary = "An index value as a real scalar";
  let arguments = (ins Index:$index);
  let results = (outs Energy_Scalar:$result);
  let assemblyFormat = "$index attr-dict `:` type($result)";
}

def Energy_EyeOp : Energy_Op<"eye", [Pure,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    DeclareOpInterfaceMethods<DerivativeOpInterface>]> {
  let summary = "The identity matrix of a dim";
  let arguments = (ins FlatSymbolRefAttr:$dim);
  let results = (outs Energy_AnyArray:$result);
  let assemblyFormat = "$dim attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise math
//===----------------------------------------------------------------------===//

// Derivative rules: the table of the element-wise ops' reverse-mode rules
// (as Enzyme-MLIR keeps its derivatives). Each rule is the body of a
// function returning an operand's adjoint, built with ExprBuilder `e`
// (ExprBuilder.h) from the result's adjoint `g` and the op's values; a null
// Value: no derivative flows. The other ops' rules are DerivativeRules.cpp.

class Energy_BinaryElementwiseOp<string mnemonic, string text,
                                 list<Trait> traits = [],
                                 code derivativeRules = "">
    : Energy_Op<mnemonic, [Pure, InferTypeOpAdaptor,
          DeclareOpInterfaceMethods<ElementwiseOpInterface>] # traits> {
  let summary = text # ", elementwise, with scalar broadcasting";
  let arguments = (ins Energy_AnyArray:$lhs, Energy_AnyArray:$rhs);
  let results = (outs Energy_AnyArray:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)";
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *, std::optional<::mlir::Location> location,
        Adaptor adaptor, ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      return inferBroadcastType(location, adaptor.getLhs().getType(),
                                adaptor.getRhs().getType(), types);
    }
  }] # derivativeRules;
}

// The rules of a binary op in terms of `g`, the operands `a` and `b` and the
// result `y`; the rhs's may use `da`, the lhs's adjoint before a broadcast
// scalar lhs's is summed (of the result's shape, as DivOp's rule needs). A scalar operand
// broadcast into an array result gets the sum of the adjoint's elements.
class Energy_BinaryDerivative<code lhsAdjoint, code rhsAdjoint> {
  code rules = [{
    ::llvm::LogicalResult $cppClass::buildAdjoints(
        ::mlir::OpBuilder &builder, ::mlir::ValueRange adjoints,
        ::llvm::SmallVectorImpl<::mlir::Value> &operandAdjoints) {
      ExprBuilder e(builder, getLoc());
      [[maybe_unused]] Value g = adjoints[0], a = getLhs(), b = getRhs(),
                             y = getResult();
      Value da = [&]() -> Value {}] # lhsAdjoint # [{}();
      Value lhsAdjoint = e.unbroadcast(da, a.getType());
      Value rhsAdjoint = e.unbroadcast([&]() -> Value {}] # rhsAdjoint # [{}(),
                                       b.getType());
      operandAdjoints.assign({lhsAdjoint, rhsAdjoint});
      return ::mlir::success();
    }
  }];
}

class Energy_DifferentiableBinaryOp<string mnemonic, string text,
                                    list<Trait> traits, code lhsAdjoint,
                                    code rhsAdjoint>
    : Energy_BinaryElementwiseOp<mnemonic, text,
          [DeclareOpInterfaceMethods<DerivativeOpInterface>] # traits,
          Energy_BinaryDerivative<lhsAdjoint, rhsAdjoint>.rules>;

def Energy_AddOp : Energy_DifferentiableBinaryOp<"add", "Addition",
    [Commutative], [{ return g; }], [{ return g; }]> {
  let hasFolder = 1;
}
def Energy_SubOp : Energy_DifferentiableBinaryOp<"sub", "Subtraction", [],
    [{ return g; }], [{ return e.neg(g); }]> {
  let hasFolder = 1;
}
def Energy_MulOp : Energy_DifferentiableBinaryOp<"mul", "Multiplication",
    [Commutative], [{ return e.mul(g, b); }], [{ return e.mul(g, a); }]> {
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}
// d(a / b) = da / b - (a / b) db / b
def Energy_DivOp : Energy_DifferentiableBinaryOp<"div", "Real division", [],
    [{ return e.div(g, b); }], [{ return e.neg(e.mul(da, y)); }]>;
// No derivative rule: used by stopping rules, which are not differentiated.
def Energy_MaximumOp : Energy_BinaryElementwiseOp<"maximum", "Maximum",
    [Commutative]>;

class Energy_UnaryElementwiseOp<string mnemonic, string text,
                                list<Trait> traits = []>
    : Energy_Op<mnemonic, [Pure, SameOperandsAndResultType] # traits> {
  let summary = text;
  let arguments = (ins Energy_AnyArray:$operand);
  let results = (outs Energy_AnyArray:$result);
  let assemblyFormat = "$operand attr-dict `:` type($result)";
}

class Energy_DifferentiableUnaryOp<string mnemonic, string text>
    : Energy_UnaryElementwiseOp<mnemonic, text,
          [DeclareOpInterfaceMethods<DerivativeOpInterface>]>;

// A function applied to each element (what it computes: its
// ElementwiseOpInterface methods, ElementwiseOps.cpp) and its derivative
// rule: the operand's adjoint in terms of `g`, the operand `x` and the
// result `y`.
class Energy_ElementwiseFunctionOp<string mnemonic, string text,
                                   code adjoint,
                                   list<string> overridden = []>
    : Energy_UnaryElementwiseOp<mnemonic, text,
          [DeclareOpInterfaceMethods<DerivativeOpInterface>,
           DeclareOpInterfaceMethods<ElementwiseOpInterface, overridden>]> {
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::buildAdjoints(
        ::mlir::OpBuilder &builder, ::mlir::ValueRange adjoints,
        ::llvm::SmallVectorImpl<::mlir::Value> &operandAdjoints) {
      ExprBuilder e(builder, getLoc());
      [[maybe_unused]] Value g = adjoints[0], x = getOperand(),
                             y = getResult();
      operandAdjoints.assign({[&]() -> Value {}] # adjoint # [{}()});
      return ::mlir::success();
    }
  }];
}

def Energy_NegOp : Energy_ElementwiseFunctionOp<"neg", "Negation",
    [{ return e.neg(g); }]> {
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}
def Energy_ExpOp : Energy_ElementwiseFunctionOp<"exp",
    "Elementwise exponential", [{ return e.mul(g, y); }]>;
def Energy_LogOp : Energy_ElementwiseFunctionOp<"log",
    "Elementwise natural logarithm", [{ return e.div(g, x); }]>;
// d tanh(x) = (1 - tanh(x)²) dx
def Energy_TanhOp : Energy_ElementwiseFunctionOp<"tanh",
    "Elementwise hyperbolic tangent",
    [{ return e.mul(g, e.sub(e.constant(1.0), e.mul(y, y))); }]>;
// d σ(x) = σ(x) (1 - σ(x)) dx
def Energy_SigmoidOp : Energy_ElementwiseFunctionOp<"sigmoid",
    "Elementwise logistic sigmoid",
    [{ return e.mul(g, e.mul(y, e.sub(e.constant(1.0), y))); }]>;
// d (x σ(x)) = σ(x) (1 + x (1 - σ(x))) dx
def Energy_SiluOp : Energy_ElementwiseFunctionOp<"silu",
    "Elementwise SiLU, x · sigmoid(x)", [{
      Value s = e.unary<SigmoidOp>(x);
      Value one = e.constant(1.0);
      return e.mul(g, e.mul(s, e.add(one, e.mul(x, e.sub(one, s)))));
    }]>;
// d softplus(x) = σ(x) dx
def Energy_SoftplusOp : Energy_ElementwiseFunctionOp<"softplus",
    "Elementwise log(1 + exp(x)), computed stably",
    [{ return e.mul(g, e.unary<SigmoidOp>(x)); }]>;
// d (x Φ(x)) = (Φ(x) + x φ(x)) dx, Φ(x) = (1 + erf(x / √2)) / 2,
// φ(x) = exp(-x² / 2) / √(2π)
def Energy_GeluOp : Energy_ElementwiseFunctionOp<"gelu",
    "Elementwise exact GELU, x · Φ(x)", [{
      Value cdf = e.mul(e.constant(0.5),
                        e.add(e.constant(1.0),
                              e.unary<ErfOp>(e.mul(x, e.constant(M_SQRT1_2)))));
      Value pdf = e.mul(e.constant(1.0 / std::sqrt(2.0 * M_PI)),
                        e.unary<ExpOp>(e.mul(e.constant(-0.5), e.mul(x, x))));
      return e.mul(g, e.add(cdf, e.mul(x, pdf)));
    }]>;
// d erf(x) = (2 / √π) exp(-x²) dx
def Energy_ErfOp : Energy_ElementwiseFunctionOp<"erf",
    "Elementwise error function", [{
      Value density = e.unary<ExpOp>(e.neg(e.mul(x, x)));
      return e.mul(g, e.mul(e.constant(2.0 / std::sqrt(M_PI)), density));
    }]>;
// d max(x, 0) = H(x) dx
def Energy_ReluOp : Energy_ElementwiseFunctionOp<"relu",
    "Elementwise max(x, 0)",
    [{ return e.mul(g, e.unary<HeavisideOp>(x)); }]>;
// The step and the sign have derivative 0 almost everywhere.
def Energy_HeavisideOp : Energy_ElementwiseFunctionOp<"heaviside",
    "Elementwise step: 1 where x > 0, else 0", [{ return Value(); }]>;
def Energy_SignOp : Energy_ElementwiseFunctionOp<"sign",
    "Elementwise sign: -1, 0 or 1", [{ return Value(); }]>;
// d √x = dx / (2 √x)
def Energy_SqrtOp : Energy_ElementwiseFunctionOp<"sqrt",
    "Elementwise square root",
    [{ return e.div(e.mul(g, e.constant(0.5)), y); }]>;
def Energy_AbsOp : Energy_ElementwiseFunctionOp<"abs",
    "Elementwise absolute value",
    [{ return e.mul(g, e.unary<SignOp>(x)); }]>;
// d ∫_{-∞}^{x} SiLU = SiLU(x) dx
def Energy_SiluIntOp : Energy_ElementwiseFunctionOp<"silu_int",
    "Elementwise integral of SiLU from -∞: x · softplus(x) + Li₂(-eˣ)",
    [{ return e.mul(g, e.unary<SiluOp>(x)); }]>;
// d sin(x) = cos(x) dx
def Energy_SinOp : Energy_ElementwiseFunctionOp<"sin", "Elementwise sine",
    [{ return e.mul(g, e.unary<CosOp>(x)); }]>;
// d cos(x) = -sin(x) dx
def Energy_CosOp : Energy_ElementwiseFunctionOp<"cos", "Elementwise cosine",
    [{ return e.neg(e.mul(g, e.unary<SinOp>(x))); }]>;
// d elu(x) = dx where x > 0, eˣ dx = (1 + elu(x)) dx elsewhere
def Energy_EluOp : Energy_ElementwiseFunctionOp<"elu",
    "Elementwise ELU (α = 1): x where x > 0, eˣ - 1 elsewhere", [{
      Value below = e.unary<HeavisideOp>(e.neg(x));
      return e.mul(g, e.add(e.constant(1.0), e.mul(below, y)));
    }]>;
def Energy_SoftmaxOp : Energy_DifferentiableUnaryOp<"softmax", "Softmax along the last axis">;
def Energy_LogSoftmaxOp : Energy_DifferentiableUnaryOp<"log_softmax", "Log-softmax along the last axis">;
def Energy_RmsNormOp : Energy_DifferentiableUnaryOp<"rmsnorm", "RMS normalisation along the last axis (ε = 1e-5)">;
def Energy_LayerNormOp : Energy_DifferentiableUnaryOp<"layernorm", "Layer normalisation along the last axis (ε = 1e-5, biased variance)">;
def Energy_InverseOp : Energy_DifferentiableUnaryOp<"inverse", "Inverse of a square matrix"> {
  let hasVerifier = 1;
}

def Energy_PowOp : Energy_Op<"pow", [Pure, SameOperandsAndResultType,
    DeclareOpInterfaceMethods<DerivativeOpInterface>,
    DeclareOpInterfaceMethods<ElementwiseOpInterface>]> {
  let summary = "Elementwise integer power";
  let arguments = (ins Energy_AnyArray:$operand, SI64Attr:$exponent);
  let results = (outs Energy_AnyArray:$result);
  let assemblyFormat = "$operand `,` $exponent attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Vector and matrix math
//===----------------------------------------------------------------------===//

def Energy_MatmulOp : Energy_Op<"matmul", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<DerivativeOpInterface>]> {
  let summary = "Matrix-vector or matrix-matrix product";
  let description = [{
    `[m, n] @ [n]` gives `[m]`; `[m, n] @ [n, k]` gives `[m, k]`.
  }];
  let arguments = (ins Energy_AnyArray:$lhs, Energy_AnyArray:$rhs);
  let results = (outs Energy_AnyArray:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)";
}

def Energy_TransposeOp : Energy_Op<"transpose", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<DerivativeOpInterface>]> {
  let summary = "Swaps the last two axes";
  let arguments = (ins Energy_AnyArray:$operand);
  let results = (outs Energy_AnyArray:$result);
  let assemblyFormat = "$operand attr-dict `:` type($operand)";
  let hasFolder = 1;
}

def Energy_DotOp : Energy_Op<"dot", [Pure, Commutative, 
    AllTypesMatch<["lhs", "rhs"]>,
    DeclareOpInterfaceMethods<DerivativeOpInterface>]> {
  let summary = "Inner product of two vectors of equal length";
  let arguments = (ins Energy_AnyArray:$lhs, Energy_AnyArray:$rhs);
  let results = (outs Energy_Scalar:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs)";
  let hasVerifier = 1;
}

def Energy_QuadOp : Energy_Op<"quad", [Pure,
    DeclareOpInterfaceMethods<DerivativeOpInterface>]> {
  let summary = "Quadratic form vᵀ M v";
  let arguments = (ins Energy_AnyArray:$vector, Energy_AnyArray:$matrix);
  let results = (outs Energy_Scalar:$result);
  let assemblyFormat = "$vector `,` $matrix attr-dict `:` type($vector) `,` type($matrix)";
  let hasVerifier = 1;
}

def Energy_OuterOp : Energy_Op<"outer", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<DerivativeOpInterface>]> {
  let summary = "Outer product of two vectors";
  let arguments = (ins Energy_AnyArray:$lhs, Energy_AnyArray:$rhs);
  let results = (outs Energy_AnyArray:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)";
}

def Energy_ReduceElementsOp : Energy_Op<"reduce_elements", [Pure,
    DeclareOpInterfaceMethods<DerivativeOpInterface,
                              ["hasDerivativeRule"]>]> {
  let summary = "Reduces all elements of an array to a scalar";
  let description = [{
    `sum`, `mean`, `maxabs`, `lse`, `sqnorm` or `norm` over every element.
    `maxabs` has no derivative rule (it serves stopping rules).

    ```mlir
    %n = energy.reduce_elements sqnorm %v : !energy.array<D>
    ```
  }];
  let arguments = (ins Energy_ElementsKindAttr:$kind, Energy_AnyArray:$operand);
  let results = (outs Energy_Scalar:$result);
  let assemblyFormat = "``$kind $operand attr-dict `:` type($operand)";
  let hasCanonicalizer = 1;
}

def Energy_SumLastOp : Energy_Op<"sum_last", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<DerivativeOpInterface>]> {
  let summary = "Sums over the last axis";
  let arguments = (ins Energy_AnyArray:$operand);
  let results = (outs Energy_AnyArray:$result);
  let assemblyFormat = "$operand attr-dict `:` type($operand)";
  let hasFolder = 1;
}

def Energy_BroadcastOp : Energy_Op<"broadcast", [Pure,
    DeclareOpInterfaceMethods<DerivativeOpInterface>]> {
  let summary = "Broadcasts an array along new trailing axes";
  let description = [{
    The operand's shape must be a prefix of the result's: a scalar becomes a
    constant array, a `[N]` vector becomes `[N, D]` with equal rows' entries.
  }];
  let arguments = (ins Energy_AnyArray:$operand);
  let results = (outs Energy_AnyArray:$result);
  let assemblyFormat = "$operand attr-dict `:` type($operand) `to` type($result)";
  let hasVerifier = 1;
}

def Energy_DiagOp : Energy_Op<"diag", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<DerivativeOpInterface>]> {
  let summary = "Square diagonal matrix of a vector";
  let arguments = (ins Energy_AnyArray:$operand);
  let results = (outs Energy_AnyArray:$result);
  let assemblyFormat = "$operand attr-dict `:` type($operand)";
}

def Energy_DiagPartOp : Energy_Op<"diag_part", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<DerivativeOpInterface>]> {
  let summary = "Diagonal of a square matrix as a vector";
  let arguments = (ins Energy_AnyArray:$operand);
  let results = (outs Energy_AnyArray:$result);
  let assemblyFormat = "$operand attr-dict `:` type($operand)";
}

def Energy_LogDetOp : Energy_Op<"logdet", [Pure,
    DeclareOpInterfaceMethods<DerivativeOpInterface>]> {
  let summary = "Log-determinant of a symmetric positive definite matrix";
  let arguments = (ins Energy_AnyArray:$operand);
  let results = (outs Energy_Scalar:$result);
  let assemblyFormat = "$operand attr-dict `:` type($operand)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Reductions over index domains
//===----------------------------------------------------------------------===//

def Energy_ReduceOp : Energy_Op<"reduce", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    DeclareOpInterfaceMethods<DerivativeOpInterface,
                              ["buildBodyAdjoint", "hasDerivativeRule"]>,
    RecursiveMemoryEffects,
    DeclareOpInterfaceMethods<LoopLikeOpInterface>, DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmBlockArgumentNames"]>]> {
  let summary = "Sum, mean, max, log-sum-exp or a plugin's aggregation of a body over an index domain";
  let description = [{
    The body is evaluated at every position of the domain (the product of
    the index ranges `0 ≤ i < size`) that the optional predicate admits, and
    the yielded values are reduced elementwise. `lse` takes an optional
    temperature T: T · log Σ exp(e / T). A reduction over an empty domain is
    0. The predicate and the body take the domain's indices as arguments.
    `parallel` (set by `energy-plan-kernels` on sums) says that the sum may
    be split into fixed chunks of its first index, summed on several threads
    and added in chunk order.

    ```mlir
    %e = energy.reduce lse (%p : @N) where {
      %ok = arith.cmpi sle, %p, %c : index
      energy.yield %ok : i1
    } temp(%tau : !energy.array<>) {
      ...
      energy.yield %s : !energy.array<>
    } : !energy.array<>
    ```
  }];
  let arguments = (ins Energy_ReduceKindAttr:$kind,
                       TypedArrayAttrBase<Energy_DimExprAttr, "sizes">:$sizes,
                       Optional<Energy_Scalar>:$temperature,
                       UnitAttr:$parallel,
                       OptionalAttr<StrAttr>:$aggregation);
  let results = (outs Energy_AnyArray:$result);
  let builders = [
    OpBuilder<(ins "::mlir::Type":$result, "ReduceKind":$kind,
                   "::mlir::ArrayAttr":$sizes, "::mlir::Value":$temperature), [{
      build($_builder, $_state, result, kind, sizes, temperature,
            /*parallel=*/false, ::mlir::StringAttr());
    }]>];
  let regions = (region AnyRegion:$predicate, SizedRegion<1>:$body);
  let hasCustomAssemblyFormat = 1;
  let hasCanonicalizer = 1;
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    bool hasPredicate() { return !getPredicate().empty(); }
    /// The value yielded by the body.
    ::mlir::Value getBodyValue();
    /// A table of the body's values at every position of the domain (whose
    /// sizes are dims), built at `builder`: what a plugin's aggregation
    /// reads.
    ::mlir::Value buildValueTable(::mlir::OpBuilder &builder);
    static ::llvm::StringRef getDefaultDialect() { return "energy"; }
  }];
}

//===----------------------------------------------------------------------===//
// Plugins' functions and aggregations (run-time code, FunctionTable.h)
//===----------------------------------------------------------------------===//

def Energy_ApplyOp : Energy_Op<"apply", [Pure, SameOperandsAndResultType,
    DeclareOpInterfaceMethods<DerivativeOpInterface, ["hasDerivativeRule"]>]> {
  let summary = "A plugin's element-wise function, or its derivative of some order";
  let description = [{
    `order` 0 is the function, 1 its first derivative, 2 its second; each is
    run-time code of the plugin that registered `function`.

    ```mlir
    %y = energy.apply "student_log"[1] %x : !energy.array<N>
    ```
  }];
  let arguments = (ins StrAttr:$function, I64Attr:$order,
                       Energy_AnyArray:$operand);
  let results = (outs Energy_AnyArray:$result);
  let assemblyFormat = "$function `[` $order `]` $operand attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Energy_SimilarityOp : Energy_Op<"similarity", [Pure,
    AllTypesMatch<["lhs", "rhs"]>,
    DeclareOpInterfaceMethods<DerivativeOpInterface>]> {
  let summary = "A plugin's similarity of two vectors of equal length";
  let arguments = (ins StrAttr:$function, Energy_AnyArray:$lhs,
                       Energy_AnyArray:$rhs);
  let results = (outs Energy_Scalar:$result);
  let assemblyFormat = "$function $lhs `,` $rhs attr-dict `:` type($lhs)";
  let hasVerifier = 1;
}

def Energy_SimilarityGradientOp : Energy_Op<"similarity_gradient", [Pure,
    AllTypesMatch<["lhs", "rhs", "result"]>]> {
  let summary = "The gradient of a plugin's similarity in one of its vectors";
  let description = [{
    d s(lhs, rhs) / d lhs when `argument` is 0, d s / d rhs when it is 1.
    It has no derivative rule: second-order dynamics refuse plugin
    similarities.
  }];
  let arguments = (ins StrAttr:$function, I64Attr:$argument,
                       Energy_AnyArray:$lhs, Energy_AnyArray:$rhs);
  let results = (outs Energy_AnyArray:$result);
  let assemblyFormat = "$function `[` $argument `]` $lhs `,` $rhs attr-dict `:` type($lhs)";
  let hasVerifier = 1;
}

def Energy_AggregateOp : Energy_Op<"aggregate", [Pure]> {
  let summary = "A plugin's aggregation of every element of an array";
  let description = [{
    What `energy-plan-kernels` turns a `custom` reduction into: the body's
    values tabulated over the domain, then the plugin's aggregation of them.
  }];
  let arguments = (ins StrAttr:$aggregation, Energy_AnyArray:$operand);
  let results = (outs Energy_Scalar:$result);
  let assemblyFormat = "$aggregation $operand attr-dict `:` type($operand)";
  let hasVerifier = 1;
}

def Energy_AggregateWeightsOp : Energy_Op<"aggregate_weights", [Pure,
    SameOperandsAndResultType]> {
  let summary = "The gradient weights of a plugin's aggregation";
  let description = [{
    dA/dz for the aggregation A of every element z of the operand (the
    sparsemax probabilities of a sparsemax energy). No derivative rule.
  }];
  let arguments = (ins StrAttr:$aggregation, Energy_AnyArray:$operand);
  let results = (outs Energy_AnyArray:$result);
  let assemblyFormat = "$aggregation $operand attr-dict `:` type($result)";
  let hasVerifier = 1;
}
