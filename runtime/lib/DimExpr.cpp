//===- DimExpr.cpp - Integer expressions over dims in manifests -----------===//
//
// A manifest's dim expressions in reverse Polish notation: their operators'
// names, well-formedness, text and evaluation (by IndexArithmetic.h's rule).
//
//===----------------------------------------------------------------------===//

#include "energy/Runtime/Manifest.h"

#include <string>
#include <vector>

using namespace energy;

namespace {
struct OpName {
  DimExpr::Op op;
  std::string_view name;
};
} // namespace

static constexpr OpName opNames[] = {
    {DimExpr::Op::Add, "+"},
    {DimExpr::Op::Sub, "-"},
    {DimExpr::Op::Mul, "*"},
    {DimExpr::Op::Div, "/"},
    {DimExpr::Op::FloorDiv, "floordiv"},
    {DimExpr::Op::CeilDiv, "ceildiv"},
    {DimExpr::Op::Mod, "mod"},
};

std::string_view DimExpr::opName(Op op) {
  for (const OpName &entry : opNames)
    if (entry.op == op)
      return entry.name;
  return "?";
}

std::optional<DimExpr::Op> DimExpr::opFromName(std::string_view name) {
  for (const OpName &entry : opNames)
    if (entry.name == name)
      return entry.op;
  return std::nullopt;
}

bool DimExpr::wellFormed(const std::vector<Token> &tokens) {
  size_t depth = 0;
  for (const Token &token : tokens) {
    if (token.kind != Token::Kind::Operator) {
      ++depth;
      continue;
    }
    if (depth < 2)
      return false;
    --depth;
  }
  return depth == 1;
}

std::optional<std::string> DimExpr::singleDim() const {
  if (exprTokens.size() == 1 && exprTokens[0].kind == Token::Kind::Dim)
    return exprTokens[0].dim;
  return std::nullopt;
}

std::vector<std::string> DimExpr::dimNames() const {
  std::vector<std::string> names;
  for (const Token &token : exprTokens)
    if (token.kind == Token::Kind::Dim)
      names.push_back(token.dim);
  return names;
}

std::string DimExpr::text() const {
  // Each operand remembers whether it is an operation, which needs
  // parentheses inside another.
  std::vector<std::pair<std::string, bool>> stack;
  for (const Token &token : exprTokens) {
    switch (token.kind) {
    case Token::Kind::Dim:
      stack.emplace_back(token.dim, false);
      break;
    case Token::Kind::Literal:
      stack.emplace_back(std::to_string(token.literal), false);
      break;
    case Token::Kind::Operator: {
      if (stack.size() < 2)
        return "<malformed>";
      auto operand = [](const std::pair<std::string, bool> &entry) {
        return entry.second ? "(" + entry.first + ")" : entry.first;
      };
      std::string right = operand(stack.back());
      stack.pop_back();
      std::string left = operand(stack.back());
      stack.back() = {left + " " + std::string(opName(token.op)) + " " + right,
                      true};
      break;
    }
    }
  }
  return stack.size() == 1 ? stack.back().first : "<malformed>";
}

/// `left op right`, or an error that says why it has no value.
static Expected<int64_t> apply(DimExpr::Op op, int64_t left, int64_t right) {
  int64_t result = 0;
  IndexFault fault = applyIndexOp(op, left, right, result);
  if (fault == IndexFault::Inexact)
    return Status::error(std::to_string(left) + " is not divisible by " +
                         std::to_string(right));
  if (fault != IndexFault::None)
    return Status::error(
        std::to_string(left) + " " + std::string(DimExpr::opName(op)) + " " +
        std::to_string(right) + " " + describeIndexFault(fault));
  return result;
}

Expected<int64_t> DimExpr::evaluate(
    const std::function<std::optional<int64_t>(const std::string &)> &lookup)
    const {
  std::vector<int64_t> stack;
  for (const Token &token : exprTokens) {
    switch (token.kind) {
    case Token::Kind::Dim: {
      std::optional<int64_t> value = lookup(token.dim);
      if (!value)
        return Status::error("dim " + token.dim + " has no value");
      stack.push_back(*value);
      break;
    }
    case Token::Kind::Literal:
      stack.push_back(token.literal);
      break;
    case Token::Kind::Operator: {
      if (stack.size() < 2)
        return Status::error("malformed expression");
      int64_t right = stack.back();
      stack.pop_back();
      Expected<int64_t> value = apply(token.op, stack.back(), right);
      if (!value)
        return value.status();
      stack.back() = *value;
      break;
    }
    }
  }
  if (stack.size() != 1)
    return Status::error("malformed expression");
  return stack.back();
}
