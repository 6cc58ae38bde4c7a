//===- EnergyTypes.td - Types of the energy dialect ----------*- tablegen -*-===//
//
// The one value type of energy expressions: a real array whose shape is a list
// of symbolic dim names (rank 0 is a scalar).
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_TYPES_TD
#define ENERGY_TYPES_TD

include "energy/IR/EnergyDialect.td"
include "mlir/IR/AttrTypeBase.td"

def Energy_ArrayType : TypeDef<Energy_Dialect, "Array"> {
  let mnemonic = "array";
  let summary = "A real array with a shape of symbolic dims";
  let description = [{
    The shape is a list of names of dims declared in the enclosing model;
    `!energy.array<>` is a scalar, `!energy.array<N, D>` an N × D matrix. The
    element type (f32 or f64) is chosen at lowering.
  }];
  let parameters = (ins ArrayRefParameter<"::mlir::StringAttr", "dim names">:$shape);
  let hasCustomAssemblyFormat = 1;
  let builders = [
    TypeBuilder<(ins "::llvm::ArrayRef<::llvm::StringRef>":$dims)>
  ];
  let skipDefaultBuilders = 0;
  let extraClassDeclaration = [{
    /// The number of axes; 0 for a scalar.
    unsigned getRank() const { return getShape().size(); }
    bool isScalar() const { return getShape().empty(); }
    /// The same array without its first `count` axes.
    ArrayType dropFront(unsigned count) const;
    /// The scalar type of this dialect.
    static ArrayType getScalar(::mlir::MLIRContext *context);
    /// Prints the shape as `[N, D]` for diagnostics.
    std::string shapeString() const;
  }];
}

// The C++ type is plain `Type` so that formats print the full
// `!energy.array<...>` everywhere rather than a stripped `<...>`.
def Energy_AnyArray : Type<CPred<"::llvm::isa<::mlir::energy::ArrayType>($_self)">,
                           "energy array">;
def Energy_Scalar : Type<And<[Energy_AnyArray.predicate,
    CPred<"::llvm::cast<::mlir::energy::ArrayType>($_self).isScalar()">]>,
    "energy scalar">,
    BuildableType<"::mlir::energy::ArrayType::getScalar($_builder.getContext())">;

#endif // ENERGY_TYPES_TD
