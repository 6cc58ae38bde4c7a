//===- EnergyAttrs.cpp - Attributes of the energy dialect -----------------===//
//
// Dim expressions: integer expressions over named dims, held as an affine
// expression over symbols. Written `@T - 1`, `@D / @H` (exact division),
// `2 * @N`, `12`.
//
//===----------------------------------------------------------------------===//

#include "energy/IR/EnergyAttrs.h"
#include "energy/IR/EnergyDialect.h"
#include "energy/IR/IndexArithmetic.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::energy;

#include "energy/IR/EnergyEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "energy/IR/EnergyAttrs.cpp.inc"

void EnergyDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "energy/IR/EnergyAttrs.cpp.inc"
      >();
}

DimExprAttr DimExprAttr::getDim(MLIRContext *context, StringRef name) {
  return DimExprAttr::get(context, getAffineSymbolExpr(0, context),
                          {StringAttr::get(context, name)});
}

DimExprAttr DimExprAttr::getConstant(MLIRContext *context, int64_t value) {
  return DimExprAttr::get(context, getAffineConstantExpr(value, context), {});
}

std::optional<StringRef> DimExprAttr::getDimName() const {
  if (auto symbol = dyn_cast<AffineSymbolExpr>(getExpr()))
    return getNames()[symbol.getPosition()].getValue();
  return std::nullopt;
}

FailureOr<int64_t> DimExprAttr::evaluate(
    function_ref<std::optional<int64_t>(StringRef)> lookup) const {
  // A dim expression's `/` (a floordiv in the affine form) is exact.
  std::optional<int64_t> value = evaluateAffineExpr(
      getExpr(),
      [&](AffineExpr leaf) -> std::optional<int64_t> {
        auto symbol = dyn_cast<AffineSymbolExpr>(leaf);
        if (!symbol)
          return std::nullopt;
        return lookup(getNames()[symbol.getPosition()].getValue());
      },
      /*exactDivision=*/true);
  if (!value)
    return failure();
  return *value;
}

//===----------------------------------------------------------------------===//
// Syntax
//===----------------------------------------------------------------------===//

namespace {
/// Parses the grammar
///   sum     ::= product (('+' | '-') product)*
///   product ::= factor (('*' | '/') factor)*
///   factor  ::= integer | '-' factor | '@' name | '(' sum ')'
/// into an affine expression whose symbols are numbered in order of first
/// appearance of their names.
class DimExprParser {
public:
  explicit DimExprParser(AsmParser &parser) : parser(parser) {}

  ParseResult parse(DimExprAttr &result) {
    AffineExpr expr;
    if (parseSum(expr))
      return failure();
    result = DimExprAttr::get(parser.getContext(), expr, names);
    return success();
  }

private:
  ParseResult parseSum(AffineExpr &result) {
    if (parseProduct(result))
      return failure();
    while (true) {
      AffineExpr rhs;
      if (succeeded(parser.parseOptionalPlus())) {
        if (parseProduct(rhs))
          return failure();
        result = result + rhs;
      } else if (succeeded(parser.parseOptionalMinus())) {
        if (parseProduct(rhs))
          return failure();
        result = result - rhs;
      } else {
        return success();
      }
    }
  }

  ParseResult parseProduct(AffineExpr &result) {
    if (parseFactor(result))
      return failure();
    while (true) {
      AffineExpr rhs;
      SMLoc loc = parser.getCurrentLocation();
      if (succeeded(parser.parseOptionalStar())) {
        if (parseFactor(rhs))
          return failure();
        result = result * rhs;
      } else if (succeeded(parser.parseOptionalSlash())) {
        if (parseFactor(rhs))
          return failure();
        if (auto constant = dyn_cast<AffineConstantExpr>(rhs);
            constant && constant.getValue() <= 0)
          return parser.emitError(loc, "dim division by a non-positive number");
        result = result.floorDiv(rhs);
      } else {
        return success();
      }
    }
  }

  ParseResult parseFactor(AffineExpr &result) {
    MLIRContext *context = parser.getContext();
    if (succeeded(parser.parseOptionalLParen()))
      return failure(parseSum(result) || parser.parseRParen());
    if (succeeded(parser.parseOptionalMinus())) {
      if (parseFactor(result))
        return failure();
      result = -result;
      return success();
    }
    int64_t value;
    OptionalParseResult integer = parser.parseOptionalInteger(value);
    if (integer.has_value()) {
      if (failed(*integer))
        return failure();
      result = getAffineConstantExpr(value, context);
      return success();
    }
    StringAttr name;
    if (parser.parseSymbolName(name))
      return failure();
    auto *found = llvm::find(names, name);
    unsigned position = found - names.begin();
    if (found == names.end())
      names.push_back(name);
    result = getAffineSymbolExpr(position, context);
    return success();
  }

  AsmParser &parser;
  SmallVector<StringAttr> names;
};

enum class Precedence { Sum = 0, Product = 1, Atom = 2 };

/// Prints `expr` with its dims and symbols named by `name`.
void printExpr(raw_ostream &os, AffineExpr expr,
               function_ref<void(raw_ostream &, AffineExpr)> name,
               Precedence context) {
  if (auto constant = dyn_cast<AffineConstantExpr>(expr)) {
    if (constant.getValue() < 0 && context == Precedence::Atom)
      os << '(' << constant.getValue() << ')';
    else
      os << constant.getValue();
    return;
  }
  if (isa<AffineSymbolExpr, AffineDimExpr>(expr)) {
    name(os, expr);
    return;
  }
  auto binary = cast<AffineBinaryOpExpr>(expr);
  Precedence own = binary.getKind() == AffineExprKind::Add
                       ? Precedence::Sum
                       : Precedence::Product;
  bool parenthesise = own < context;
  if (parenthesise)
    os << '(';
  printExpr(os, binary.getLHS(), name, own);
  AffineExpr rhs = binary.getRHS();
  switch (binary.getKind()) {
  case AffineExprKind::Add:
    if (auto constant = dyn_cast<AffineConstantExpr>(rhs);
        constant && constant.getValue() < 0) {
      os << " - " << -constant.getValue();
      break;
    }
    if (auto product = dyn_cast<AffineBinaryOpExpr>(rhs);
        product && product.getKind() == AffineExprKind::Mul) {
      if (auto factor = dyn_cast<AffineConstantExpr>(product.getRHS());
          factor && factor.getValue() == -1) {
        os << " - ";
        printExpr(os, product.getLHS(), name, Precedence::Product);
        break;
      }
    }
    os << " + ";
    printExpr(os, rhs, name, Precedence::Product);
    break;
  case AffineExprKind::Mul:
    os << " * ";
    printExpr(os, rhs, name, Precedence::Atom);
    break;
  case AffineExprKind::FloorDiv:
    os << " / ";
    printExpr(os, rhs, name, Precedence::Atom);
    break;
  default:
    llvm_unreachable("dim expressions have no mod or ceildiv");
  }
  if (parenthesise)
    os << ')';
}
} // namespace

ParseResult mlir::energy::parseDimExpr(AsmParser &parser, DimExprAttr &result) {
  return DimExprParser(parser).parse(result);
}

void mlir::energy::printDimExpr(AsmPrinter &printer, DimExprAttr attr) {
  ArrayRef<StringAttr> names = attr.getNames();
  printExpr(
      printer.getStream(), attr.getExpr(),
      [&](raw_ostream &os, AffineExpr leaf) {
        os << '@'
           << names[cast<AffineSymbolExpr>(leaf).getPosition()].getValue();
      },
      Precedence::Sum);
}

void mlir::energy::printAffineText(raw_ostream &os, AffineExpr expr,
                                   ArrayRef<std::string> dimNames,
                                   ArrayRef<std::string> symbolNames) {
  printExpr(
      os, expr,
      [&](raw_ostream &stream, AffineExpr leaf) {
        if (auto dim = dyn_cast<AffineDimExpr>(leaf))
          stream << dimNames[dim.getPosition()];
        else
          stream << symbolNames[cast<AffineSymbolExpr>(leaf).getPosition()];
      },
      Precedence::Sum);
}

std::string mlir::energy::dimExprText(DimExprAttr attr) {
  SmallVector<std::string> names;
  for (StringAttr name : attr.getNames())
    names.push_back(name.getValue().str());
  std::string text;
  llvm::raw_string_ostream os(text);
  printAffineText(os, attr.getExpr(), {}, names);
  return text;
}

Attribute DimExprAttr::parse(AsmParser &parser, Type) {
  DimExprAttr result;
  if (parser.parseLess() || parseDimExpr(parser, result) ||
      parser.parseGreater())
    return {};
  return result;
}

void DimExprAttr::print(AsmPrinter &printer) const {
  printer << '<';
  printDimExpr(printer, *this);
  printer << '>';
}
