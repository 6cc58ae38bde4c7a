//===- EnergyProgramOps.cpp - Reductions, gradients and dynamics ----------===//
//
// Syntax and verification of the ops over index domains and of programs:
// reductions, gradient programs and their loops, the dynamics and their
// rules.
//
//===----------------------------------------------------------------------===//

#include "OpSyntax.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::energy;
using namespace mlir::energy::syntax;

namespace {
/// The state tensor a dynamics rule updates, after checking it is one.
FailureOr<TensorOp> lookupUpdatedNode(Operation *rule,
                                      SymbolTableCollection &tables,
                                      FlatSymbolRefAttr node) {
  auto tensor = tables.lookupNearestSymbolFrom<TensorOp>(rule, node);
  if (!tensor)
    return rule->emitOpError()
           << "updates " << node << ", which is not a tensor of the model";
  if (tensor.getRole() != Role::state)
    return rule->emitOpError()
           << "updates " << node << ", which is "
           << (tensor.getRole() == Role::input ? "an input" : "a param")
           << "; only state tensors are updated by dynamics";
  return tensor;
}
} // namespace

//===----------------------------------------------------------------------===//
// ReduceOp
//===----------------------------------------------------------------------===//

namespace {
/// Parses `(%i : size, ...)` and an optional `where` predicate region, adding
/// the `sizes` attribute and the predicate and body regions (in that order).
ParseResult
parseDomainAndPredicate(OpAsmParser &parser, OperationState &result,
                        SmallVectorImpl<OpAsmParser::Argument> &indices) {
  ArrayAttr sizes;
  if (parseIndexDomain(parser, AsmParser::Delimiter::Paren, indices, sizes))
    return failure();
  result.addAttribute("sizes", sizes);
  Region *predicate = result.addRegion();
  result.addRegion();
  if (succeeded(parser.parseOptionalKeyword("where")) &&
      parser.parseRegion(*predicate, indices))
    return failure();
  return success();
}

void printDomainAndPredicate(OpAsmPrinter &printer, Block &body,
                             ArrayAttr sizes, Region &predicate) {
  printer << ' ';
  printIndexDomain(printer, body, sizes, "(", ")");
  if (!predicate.empty()) {
    printer << " where ";
    printer.printRegion(predicate, /*printEntryBlockArgs=*/false);
  }
}
} // namespace

// reduce-op ::= `energy.reduce` kind `parallel`? `(` %i `:` dim-expr, ... `)`
//               (`where` region)? (`temp` `(` %t `:` type `)`)? region
//               attr-dict `:` type
ParseResult ReduceOp::parse(OpAsmParser &parser, OperationState &result) {
  MLIRContext *context = parser.getContext();
  std::string kindName;
  SMLoc kindLoc = parser.getCurrentLocation();
  SmallVector<OpAsmParser::Argument> indices;
  if (parser.parseKeywordOrString(&kindName))
    return failure();
  std::optional<ReduceKind> kind = symbolizeReduceKind(kindName);
  if (!kind)
    return parser.emitError(kindLoc)
           << "unknown reduction '" << kindName
           << "'; expected sum, mean, max, lse or custom";
  result.addAttribute("kind", ReduceKindAttr::get(context, *kind));
  if (succeeded(parser.parseOptionalKeyword("parallel")))
    result.addAttribute("parallel", UnitAttr::get(context));
  if (parseDomainAndPredicate(parser, result, indices))
    return failure();
  Region *body = result.regions.back().get();
  if (succeeded(parser.parseOptionalKeyword("temp"))) {
    OpAsmParser::UnresolvedOperand temperature;
    Type type;
    if (parser.parseLParen() || parser.parseOperand(temperature) ||
        parser.parseColon() || parser.parseType(type) || parser.parseRParen() ||
        parser.resolveOperand(temperature, type, result.operands))
      return failure();
  }
  Type resultType;
  if (parser.parseRegion(*body, indices) ||
      parser.parseOptionalAttrDict(result.attributes) || parser.parseColon() ||
      parser.parseType(resultType))
    return failure();
  result.addTypes(resultType);
  return success();
}

void ReduceOp::print(OpAsmPrinter &printer) {
  printer << ' ' << stringifyReduceKind(getKind());
  if (getParallel())
    printer << " parallel";
  printDomainAndPredicate(printer, getBody().front(), getSizes(),
                          getPredicate());
  if (Value temperature = getTemperature())
    printer << " temp(" << temperature << " : " << temperature.getType() << ")";
  printer << ' ';
  printer.printRegion(getBody(), /*printEntryBlockArgs=*/false);
  printer.printOptionalAttrDict((*this)->getAttrs(),
                                {"kind", "sizes", "parallel"});
  printer << " : " << getType();
}

Value ReduceOp::getBodyValue() {
  return cast<YieldOp>(getBody().front().getTerminator()).getValues().front();
}

LogicalResult ReduceOp::verifyRegions() {
  unsigned rank = getSizes().size();
  if (rank == 0)
    return emitOpError("expects at least one index in its domain");
  if (getTemperature() && getKind() != ReduceKind::lse)
    return emitOpError() << "takes a temperature only as 'lse', not as '"
                         << stringifyReduceKind(getKind()) << "'";
  // Parallel chunks' partial results are added (energy-plan-mark-parallel).
  if (getParallel() && getKind() != ReduceKind::sum)
    return emitOpError() << "is marked parallel as '"
                         << stringifyReduceKind(getKind())
                         << "'; only sums run in parallel chunks";
  if ((getKind() == ReduceKind::custom) != getAggregation().has_value())
    return emitOpError("names an aggregation exactly when it is 'custom'");
  if (getKind() == ReduceKind::custom) {
    if (hasPredicate())
      return emitOpError("of a plugin's aggregation takes no predicate");
    if (!cast<ArrayType>(getType()).isScalar())
      return emitOpError("of a plugin's aggregation yields a scalar");
    for (auto size : getSizes().getAsRange<DimExprAttr>())
      if (!size.getDimName())
        return emitOpError("of a plugin's aggregation ranges over dims, not ")
               << size;
    if (failed(verifyPluginAggregation(*this, *getAggregation())))
      return failure();
  }
  if (hasPredicate() &&
      failed(verifyBody(*this, getPredicate(), rank,
                        {IntegerType::get(getContext(), 1)}, "predicate")))
    return failure();
  return verifyBody(*this, getBody(), rank, {getType()}, "body");
}

Value ReduceOp::buildValueTable(OpBuilder &builder) {
  SmallVector<StringAttr> dims;
  for (auto size : getSizes().getAsRange<DimExprAttr>())
    dims.push_back(builder.getStringAttr(*size.getDimName()));
  auto table = TabulateOp::create(
      builder, getLoc(), ArrayType::get(getContext(), dims), getSizes());
  IRMapping mapping;
  getBody().cloneInto(&table.getBody(), mapping);
  return table;
}

LogicalResult ReduceOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyDimNames(*this, tables, getSizes());
}

/// A body over an index domain is a loop: work that does not depend on the
/// domain's indices is hoisted before it. The predicate is not a loop body.
SmallVector<Region *> ReduceOp::getLoopRegions() { return {&getBody()}; }

//===----------------------------------------------------------------------===//
// GradientOp, ForeachOp
//===----------------------------------------------------------------------===//

SmallVector<Region *> ForeachOp::getLoopRegions() { return {&getBody()}; }

/// Checks that `term`, when given, names an energy term.
static LogicalResult verifyTermReference(Operation *op,
                                         SymbolTableCollection &tables,
                                         FlatSymbolRefAttr term) {
  if (term && !tables.lookupNearestSymbolFrom<TermOp>(op, term))
    return op->emitOpError()
           << "is the gradient of " << term << ", which is not an energy term";
  return success();
}

/// `tensor` followed by the tensors of `also`.
static SmallVector<FlatSymbolRefAttr>
tensorList(FlatSymbolRefAttr tensor, std::optional<ArrayAttr> also) {
  SmallVector<FlatSymbolRefAttr> tensors = {tensor};
  if (also)
    for (Attribute other : *also)
      tensors.push_back(cast<FlatSymbolRefAttr>(other));
  return tensors;
}

/// Checks that every one of `tensors` names a tensor, once.
static LogicalResult verifyTensorList(Operation *op,
                                      SymbolTableCollection &tables,
                                      ArrayRef<FlatSymbolRefAttr> tensors) {
  llvm::SmallDenseSet<StringRef> seen;
  for (FlatSymbolRefAttr tensor : tensors) {
    if (!tables.lookupNearestSymbolFrom<TensorOp>(op, tensor))
      return op->emitOpError() << "is the gradient with respect to " << tensor
                               << ", which is not a tensor";
    if (!seen.insert(tensor.getValue()).second)
      return op->emitOpError() << "names " << tensor << " twice";
  }
  return success();
}

SmallVector<FlatSymbolRefAttr> GradientOp::getTensors() {
  return tensorList(getTensorAttr(), getAlso());
}

bool GradientOp::computes(StringRef tensor) {
  return llvm::any_of(getTensors(), [&](FlatSymbolRefAttr name) {
    return name.getValue() == tensor;
  });
}

LogicalResult GradientOp::verifySymbolUses(SymbolTableCollection &tables) {
  if (failed(verifyTensorList(*this, tables, getTensors())))
    return failure();
  return verifyTermReference(*this, tables, getOfAttr());
}

// foreach-op ::= `energy.foreach` (`parallel` (`<` integer `>`)?)?
//                `(` %i `:` dim-expr, ... `)` (`where` region)? region
//                attr-dict
ParseResult ForeachOp::parse(OpAsmParser &parser, OperationState &result) {
  SmallVector<OpAsmParser::Argument> indices;
  if (succeeded(parser.parseOptionalKeyword("parallel"))) {
    int64_t count = 1;
    if (succeeded(parser.parseOptionalLess()) &&
        (parser.parseInteger(count) || parser.parseGreater()))
      return failure();
    result.addAttribute("parallel",
                        parser.getBuilder().getI64IntegerAttr(count));
  }
  if (parseDomainAndPredicate(parser, result, indices) ||
      parser.parseRegion(*result.regions.back(), indices))
    return failure();
  return parser.parseOptionalAttrDict(result.attributes);
}

void ForeachOp::print(OpAsmPrinter &printer) {
  if (std::optional<uint64_t> count = getParallel()) {
    printer << " parallel";
    if (*count != 1)
      printer << '<' << *count << '>';
  }
  printDomainAndPredicate(printer, getBody().front(), getSizes(),
                          getPredicate());
  printer << ' ';
  printer.printRegion(getBody(), /*printEntryBlockArgs=*/false);
  printer.printOptionalAttrDict((*this)->getAttrs(), {"sizes", "parallel"});
}

LogicalResult ForeachOp::verifyRegions() {
  unsigned rank = getSizes().size();
  if (rank == 0)
    return emitOpError("expects at least one index in its domain");
  if (std::optional<uint64_t> count = getParallel(); count && *count > rank)
    return emitOpError() << "has " << *count
                         << " parallel indices but a domain of " << rank;
  if (hasPredicate() &&
      failed(verifyBody(*this, getPredicate(), rank,
                        {IntegerType::get(getContext(), 1)}, "predicate")))
    return failure();
  return verifyIndexArguments(*this, getBody(), rank, "body");
}

LogicalResult ForeachOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyDimNames(*this, tables, getSizes());
}

//===----------------------------------------------------------------------===//
// DynamicsOp, UpdateOp, AssignOp, GradOp
//===----------------------------------------------------------------------===//

// dynamics-op ::= `energy.dynamics` `steps` dim-expr (`order` order)? region
//                 (`until` region)? attr-dict
ParseResult DynamicsOp::parse(OpAsmParser &parser, OperationState &result) {
  MLIRContext *context = parser.getContext();
  DimExprAttr steps;
  if (parser.parseKeyword("steps") || parseDimExpr(parser, steps))
    return failure();
  result.addAttribute("steps", steps);
  Order order = Order::simultaneous;
  if (succeeded(parser.parseOptionalKeyword("order"))) {
    std::string orderName;
    SMLoc loc = parser.getCurrentLocation();
    if (parser.parseKeywordOrString(&orderName))
      return failure();
    std::optional<Order> parsed = symbolizeOrder(orderName);
    if (!parsed)
      return parser.emitError(loc) << "unknown order '" << orderName
                                   << "'; expected simultaneous or sequential";
    order = *parsed;
  }
  result.addAttribute("order", OrderAttr::get(context, order));
  Region *rules = result.addRegion();
  Region *until = result.addRegion();
  if (parser.parseRegion(*rules))
    return failure();
  if (rules->empty())
    rules->emplaceBlock();
  if (succeeded(parser.parseOptionalKeyword("until")) &&
      parser.parseRegion(*until))
    return failure();
  return parser.parseOptionalAttrDict(result.attributes);
}

void DynamicsOp::print(OpAsmPrinter &printer) {
  printer << " steps ";
  printDimExpr(printer, getSteps());
  if (getOrder() != Order::simultaneous)
    printer << " order " << stringifyOrder(getOrder());
  printer << ' ';
  printer.printRegion(getRules(), /*printEntryBlockArgs=*/false,
                      /*printBlockTerminators=*/false,
                      /*printEmptyBlock=*/true);
  if (!getUntil().empty()) {
    printer << " until ";
    printer.printRegion(getUntil(), /*printEntryBlockArgs=*/false);
  }
  printer.printOptionalAttrDict((*this)->getAttrs(), {"steps", "order"});
}

LogicalResult DynamicsOp::verifyRegions() {
  if (auto constant = dyn_cast<AffineConstantExpr>(getSteps().getExpr());
      constant && constant.getValue() <= 0)
    return emitOpError() << "takes " << constant.getValue()
                         << " steps; the step count must be positive";
  if (std::optional<uint64_t> rounds = getImplicitIterations();
      rounds && int64_t(*rounds) < 1)
    return emitOpError() << "has implicit_iterations " << int64_t(*rounds)
                         << "; the solver needs at least one round";
  if (std::optional<APFloat> tolerance = getImplicitTolerance();
      tolerance && !(tolerance->convertToDouble() > 0.0))
    return emitOpError() << "has implicit_tolerance "
                         << tolerance->convertToDouble()
                         << "; it must be positive";
  llvm::StringMap<Operation *> updated;
  for (Operation &rule : getRules().front()) {
    FlatSymbolRefAttr node;
    if (auto update = dyn_cast<UpdateOp>(rule))
      node = update.getNodeAttr();
    else if (auto assign = dyn_cast<AssignOp>(rule))
      node = assign.getNodeAttr();
    else
      return rule.emitOpError() << "cannot appear in dynamics; expected "
                                   "'energy.update' or 'energy.assign'";
    auto [it, inserted] = updated.try_emplace(node.getValue(), &rule);
    if (!inserted) {
      InFlightDiagnostic diag = rule.emitOpError()
                                << "is a second rule for " << node
                                << "; a node has at most one rule";
      diag.attachNote(it->second->getLoc()) << "first rule here";
      return diag;
    }
  }
  if (!getUntil().empty())
    return verifyBody(*this, getUntil(), 0, {IntegerType::get(getContext(), 1)},
                      "stopping rule");
  return success();
}

LogicalResult DynamicsOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyDimNames(*this, tables, getSteps());
}

// update-op ::= `energy.update` @node optimizer
//               (`(` name `=` (float | string | region), ... `)`)? attr-dict
ParseResult UpdateOp::parse(OpAsmParser &parser, OperationState &result) {
  MLIRContext *context = parser.getContext();
  OpBuilder builder(context);
  FlatSymbolRefAttr node;
  std::string optimizer;
  if (parser.parseAttribute(node) || parser.parseKeywordOrString(&optimizer))
    return failure();
  result.addAttribute("node", node);
  result.addAttribute("optimizer", builder.getStringAttr(optimizer));
  SmallVector<Attribute> names;
  SmallVector<NamedAttribute> strings;
  if (succeeded(parser.parseOptionalLParen()) &&
      (parser.parseCommaSeparatedList([&]() -> ParseResult {
        std::string name;
        if (parser.parseKeywordOrString(&name) || parser.parseEqual())
          return failure();
        std::string text;
        if (succeeded(parser.parseOptionalString(&text))) {
          strings.push_back(
              builder.getNamedAttr(name, builder.getStringAttr(text)));
          return success();
        }
        names.push_back(builder.getStringAttr(name));
        Region *region = result.addRegion();
        OptionalParseResult parsedRegion = parser.parseOptionalRegion(*region);
        if (parsedRegion.has_value())
          return *parsedRegion;
        double value;
        SMLoc loc = parser.getCurrentLocation();
        if (parseNumber(parser, value))
          return failure();
        Block *block = &region->emplaceBlock();
        builder.setInsertionPointToStart(block);
        Location location = parser.getEncodedSourceLoc(loc);
        auto constant = ConstantOp::create(builder, location, value);
        YieldOp::create(builder, location, constant.getResult());
        return success();
      }) ||
       parser.parseRParen()))
    return failure();
  result.addAttribute("option_names", builder.getArrayAttr(names));
  result.addAttribute("string_options", builder.getDictionaryAttr(strings));
  return parser.parseOptionalAttrDict(result.attributes);
}

void UpdateOp::print(OpAsmPrinter &printer) {
  printer << ' ';
  printer.printAttribute(getNodeAttr());
  printer << ' ';
  printer.printKeywordOrString(getOptimizer());
  if (!getOptionNames().empty() || !getStringOptions().empty()) {
    printer << '(';
    bool first = true;
    auto separate = [&] {
      if (!first)
        printer << ", ";
      first = false;
    };
    for (NamedAttribute option : getStringOptions()) {
      separate();
      printer << option.getName().getValue() << " = " << option.getValue();
    }
    for (auto [name, region] : llvm::zip(getOptionNames(), getOptions())) {
      separate();
      printer << cast<StringAttr>(name).getValue() << " = ";
      Block &block = region.front();
      auto constant = dyn_cast<ConstantOp>(block.front());
      if (constant && block.getOperations().size() == 2)
        printer.printFloat(constant.getValue());
      else
        printer.printRegion(region, /*printEntryBlockArgs=*/false);
    }
    printer << ')';
  }
  printer.printOptionalAttrDict(
      (*this)->getAttrs(),
      {"node", "optimizer", "option_names", "string_options"});
}

LogicalResult UpdateOp::verifyRegions() {
  if (getOptionNames().size() != getOptions().size())
    return emitOpError() << "has " << getOptionNames().size()
                         << " option names for " << getOptions().size()
                         << " option bodies";
  llvm::StringSet<> seen;
  for (NamedAttribute option : getStringOptions())
    seen.insert(option.getName().getValue());
  for (auto [name, region] : llvm::zip(getOptionNames(), getOptions())) {
    StringRef text = cast<StringAttr>(name).getValue();
    if (!seen.insert(text).second)
      return emitOpError() << "sets option '" << text << "' twice";
    Block &block = region.front();
    auto yield = dyn_cast<YieldOp>(block.getTerminator());
    if (block.getNumArguments() != 0 || !yield ||
        yield.getValues().size() != 1 ||
        !isa<ArrayType>(yield.getValues().front().getType()))
      return emitOpError() << "expects option '" << text
                           << "' to yield one energy array";
  }
  return success();
}

LogicalResult UpdateOp::verifySymbolUses(SymbolTableCollection &tables) {
  return lookupUpdatedNode(*this, tables, getNodeAttr());
}

LogicalResult AssignOp::verifySymbolUses(SymbolTableCollection &tables) {
  FailureOr<TensorOp> node = lookupUpdatedNode(*this, tables, getNodeAttr());
  if (failed(node))
    return failure();
  return verifyBody(*this, getBody(), 0, {node->getArrayType()},
                    "body (the node's new value)");
}

/// Inside an update program tensors change (`energy.store`), so reading one
/// there is a memory read, ordered with respect to stores; everywhere else
/// tensors are fixed during an evaluation and reading is free of effects.
static bool isInsideProgram(Operation *op) {
  return op->getParentOfType<UpdateProgramOp>() ||
         op->getParentOfType<BackwardProgramOp>();
}

static void addStateReadEffect(
    Operation *op,
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  if (isInsideProgram(op))
    effects.emplace_back(MemoryEffects::Read::get());
}

void ReadOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  addStateReadEffect(*this, effects);
}

void GradOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  addStateReadEffect(*this, effects);
  if (getInto())
    effects.emplace_back(MemoryEffects::Write::get());
}

Speculation::Speculatability GradOp::getSpeculatability() {
  return getInto() ? Speculation::NotSpeculatable : Speculation::Speculatable;
}

LogicalResult RepeatOp::verifyRegions() {
  if (!isInsideProgram(*this))
    return emitOpError("repeats only inside an 'energy.update_program' or "
                       "'energy.backward_program'");
  if (getMaxIterations() <= 0)
    return emitOpError("needs a positive iteration limit");
  return verifyBody(*this, getBody(), 0, {IntegerType::get(getContext(), 1)},
                    "body (whether to stop)");
}

LogicalResult StoreOp::verify() {
  if (!isInsideProgram(*this))
    return emitOpError("stores only inside an 'energy.update_program' or "
                       "'energy.backward_program'");
  return success();
}

LogicalResult StoreOp::verifySymbolUses(SymbolTableCollection &tables) {
  FailureOr<TensorOp> node = lookupUpdatedNode(*this, tables, getTensorAttr());
  if (failed(node))
    return failure();
  if (node->getArrayType() != getValue().getType())
    return emitOpError() << "stores a value of type " << getValue().getType()
                         << " into " << getTensorAttr() << " of type "
                         << node->getArrayType();
  return success();
}

void GradOp::build(OpBuilder &builder, OperationState &state, Type type,
                   FlatSymbolRefAttr tensor, FlatSymbolRefAttr of) {
  build(builder, state, TypeRange{type}, tensor, /*also=*/nullptr, of,
        /*into=*/nullptr);
}

SmallVector<FlatSymbolRefAttr> GradOp::getTensors() {
  return tensorList(getTensorAttr(), getAlso());
}

SmallVector<FlatSymbolRefAttr> GradOp::getIntoTensors() {
  SmallVector<FlatSymbolRefAttr> into;
  if (ArrayAttr entries = getIntoAttr())
    for (Attribute entry : entries)
      into.push_back(dyn_cast<FlatSymbolRefAttr>(entry));
  else
    into.resize(getTensors().size());
  return into;
}

Value GradOp::getResultOf(unsigned position) {
  SmallVector<FlatSymbolRefAttr> into = getIntoTensors();
  if (into[position])
    return Value();
  return getResult(
      llvm::count(ArrayRef(into).take_front(position), FlatSymbolRefAttr()));
}

GradientOp GradOp::getGradient() {
  auto model = (*this)->getParentOfType<ModelOp>();
  if (!model)
    return nullptr;
  SmallVector<FlatSymbolRefAttr> tensors = getTensors();
  for (GradientOp gradient : model.getOps<GradientOp>())
    if (gradient.getTensors() == tensors && gradient.getOfAttr() == getOfAttr())
      return gradient;
  return nullptr;
}

LogicalResult GradOp::verifySymbolUses(SymbolTableCollection &tables) {
  SmallVector<FlatSymbolRefAttr> tensors = getTensors();
  if (ArrayAttr entries = getIntoAttr()) {
    if (entries.size() != tensors.size())
      return emitOpError() << "has " << entries.size()
                           << " 'into' entries for the gradients of "
                           << tensors.size() << " tensors";
    if (!isInsideProgram(*this))
      return emitOpError(
          "adds gradients 'into' tensors only inside an "
          "'energy.update_program' or 'energy.backward_program'");
    for (Attribute entry : entries)
      if (!isa<FlatSymbolRefAttr, UnitAttr>(entry))
        return emitOpError()
               << "has 'into' entry " << entry << ", neither a tensor nor unit";
  }
  SmallVector<FlatSymbolRefAttr> into = getIntoTensors();
  unsigned resultCount = llvm::count(into, FlatSymbolRefAttr());
  if (resultCount != getNumResults())
    return emitOpError() << "has " << getNumResults()
                         << " results for the gradients of " << resultCount
                         << " tensors";
  auto results = getResults().begin();
  for (auto [name, target] : llvm::zip(tensors, into)) {
    auto tensor = tables.lookupNearestSymbolFrom<TensorOp>(*this, name);
    if (!tensor)
      return emitOpError() << "takes the gradient with respect to " << name
                           << ", which is not a tensor";
    Type type = target ? Type() : (*results++).getType();
    if (target) {
      auto destination =
          tables.lookupNearestSymbolFrom<TensorOp>(*this, target);
      if (!destination)
        return emitOpError() << "adds the gradient of " << name << " into "
                             << target << ", which is not a tensor";
      type = destination.getArrayType();
    }
    if (tensor.getArrayType() != type)
      return emitOpError() << "has type " << type << " but the gradient of "
                           << name << " has type " << tensor.getArrayType();
  }
  if (failed(verifyTensorList(*this, tables, tensors)))
    return failure();
  return verifyTermReference(*this, tables, getOfAttr());
}
