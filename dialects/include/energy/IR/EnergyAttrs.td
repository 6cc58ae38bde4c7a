//===- EnergyAttrs.td - Attributes of the energy dialect -----*- tablegen -*-===//
//
// Enumerations (tensor roles, initialisers, reduction kinds, comparisons) and
// the symbolic dim expression attribute used for derived dims and domains.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_ATTRS_TD
#define ENERGY_ATTRS_TD

include "energy/IR/EnergyDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Energy_RoleInput : I32EnumAttrCase<"input", 0>;
def Energy_RoleParam : I32EnumAttrCase<"param", 1>;
def Energy_RoleState : I32EnumAttrCase<"state", 2>;
def Energy_Role : I32EnumAttr<"Role", "role of a tensor in the model",
    [Energy_RoleInput, Energy_RoleParam, Energy_RoleState]> {
  let cppNamespace = "::mlir::energy";
  let genSpecializedAttr = 0;
}
def Energy_RoleAttr : EnumAttr<Energy_Dialect, Energy_Role, "role">;

def Energy_InitZeros : I32EnumAttrCase<"zeros", 0>;
def Energy_InitOnes : I32EnumAttrCase<"ones", 1>;
def Energy_InitEye : I32EnumAttrCase<"eye", 2>;
def Energy_InitNormal : I32EnumAttrCase<"normal", 3>;
def Energy_InitUniform : I32EnumAttrCase<"uniform", 4>;
def Energy_InitCopy : I32EnumAttrCase<"copy", 5>;
def Energy_InitKind : I32EnumAttr<"InitKind", "initialiser of a tensor",
    [Energy_InitZeros, Energy_InitOnes, Energy_InitEye, Energy_InitNormal,
     Energy_InitUniform, Energy_InitCopy]> {
  let cppNamespace = "::mlir::energy";
  let genSpecializedAttr = 0;
}
def Energy_InitKindAttr : EnumAttr<Energy_Dialect, Energy_InitKind, "init">;

def Energy_ReduceSum : I32EnumAttrCase<"sum", 0>;
def Energy_ReduceMean : I32EnumAttrCase<"mean", 1>;
def Energy_ReduceMax : I32EnumAttrCase<"max", 2>;
def Energy_ReduceLse : I32EnumAttrCase<"lse", 3>;
def Energy_ReduceCustom : I32EnumAttrCase<"custom", 4>;
def Energy_ReduceKind : I32EnumAttr<"ReduceKind",
    "reduction over an index domain",
    [Energy_ReduceSum, Energy_ReduceMean, Energy_ReduceMax, Energy_ReduceLse,
     Energy_ReduceCustom]> {
  let cppNamespace = "::mlir::energy";
  let genSpecializedAttr = 0;
}
def Energy_ReduceKindAttr : EnumAttr<Energy_Dialect, Energy_ReduceKind, "reduce_kind">;

def Energy_ElementsSum : I32EnumAttrCase<"sum", 0>;
def Energy_ElementsMean : I32EnumAttrCase<"mean", 1>;
def Energy_ElementsMaxAbs : I32EnumAttrCase<"maxabs", 2>;
def Energy_ElementsLse : I32EnumAttrCase<"lse", 3>;
def Energy_ElementsSqNorm : I32EnumAttrCase<"sqnorm", 4>;
def Energy_ElementsNorm : I32EnumAttrCase<"norm", 5>;
def Energy_ElementsKind : I32EnumAttr<"ElementsKind",
    "reduction over all elements of an array",
    [Energy_ElementsSum, Energy_ElementsMean, Energy_ElementsMaxAbs,
     Energy_ElementsLse, Energy_ElementsSqNorm, Energy_ElementsNorm]> {
  let cppNamespace = "::mlir::energy";
  let genSpecializedAttr = 0;
}
def Energy_ElementsKindAttr : EnumAttr<Energy_Dialect, Energy_ElementsKind, "elements_kind">;

def Energy_CmpLt : I32EnumAttrCase<"lt", 0>;
def Energy_CmpLe : I32EnumAttrCase<"le", 1>;
def Energy_CmpGt : I32EnumAttrCase<"gt", 2>;
def Energy_CmpGe : I32EnumAttrCase<"ge", 3>;
def Energy_CmpEq : I32EnumAttrCase<"eq", 4>;
def Energy_CmpNe : I32EnumAttrCase<"ne", 5>;
def Energy_CmpPredicate : I32EnumAttr<"CmpPredicate", "comparison of two scalars",
    [Energy_CmpLt, Energy_CmpLe, Energy_CmpGt, Energy_CmpGe, Energy_CmpEq,
     Energy_CmpNe]> {
  let cppNamespace = "::mlir::energy";
  let genSpecializedAttr = 0;
}
def Energy_CmpPredicateAttr : EnumAttr<Energy_Dialect, Energy_CmpPredicate, "cmp">;

def Energy_OrderSimultaneous : I32EnumAttrCase<"simultaneous", 0>;
def Energy_OrderSequential : I32EnumAttrCase<"sequential", 1>;
def Energy_Order : I32EnumAttr<"Order", "grouping of gradient rules in a step",
    [Energy_OrderSimultaneous, Energy_OrderSequential]> {
  let cppNamespace = "::mlir::energy";
  let genSpecializedAttr = 0;
}
def Energy_OrderAttr : EnumAttr<Energy_Dialect, Energy_Order, "order">;

def Energy_ContractGeneric : I32EnumAttrCase<"generic", 0>;
def Energy_ContractBilinear : I32EnumAttrCase<"bilinear", 1>;
def Energy_ContractQuadratic : I32EnumAttrCase<"quadratic", 2>;
def Energy_ContractForm : I32EnumAttr<"ContractForm",
    "how a softmax contraction's score is computed",
    [Energy_ContractGeneric, Energy_ContractBilinear,
     Energy_ContractQuadratic]> {
  let cppNamespace = "::mlir::energy";
  let genSpecializedAttr = 0;
}
def Energy_ContractFormAttr : EnumAttr<Energy_Dialect, Energy_ContractForm, "contract_form">;

def Energy_DimExprAttr : AttrDef<Energy_Dialect, "DimExpr"> {
  let mnemonic = "dim";
  let summary = "An integer expression over the model's dims";
  let description = [{
    An affine (or semi-affine: products and exact division of dims) expression
    whose symbol `sᵢ` stands for the dim named `names[i]`. Written
    `#energy.dim<@T - 1>`, `#energy.dim<@D / @H>`, `#energy.dim<12>`;
    `/` is exact division, checked when dims are bound.
  }];
  let parameters = (ins "::mlir::AffineExpr":$expr,
                        ArrayRefParameter<"::mlir::StringAttr", "dim names">:$names);
  let hasCustomAssemblyFormat = 1;
  let extraClassDeclaration = [{
    /// A dim expression that is just the dim `name`.
    static DimExprAttr getDim(::mlir::MLIRContext *context, ::llvm::StringRef name);
    /// A constant dim expression.
    static DimExprAttr getConstant(::mlir::MLIRContext *context, int64_t value);
    /// The name of the dim when the expression is exactly one dim.
    std::optional<::llvm::StringRef> getDimName() const;
    /// Evaluates the expression given a value for every named dim; fails on
    /// a division that is not exact or a missing name.
    ::mlir::FailureOr<int64_t> evaluate(
        ::llvm::function_ref<std::optional<int64_t>(::llvm::StringRef)> lookup) const;
  }];
}

#endif // ENERGY_ATTRS_TD
