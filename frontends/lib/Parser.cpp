//===- Parser.cpp - Recursive-descent parser of .energy files -------------===//
//
// One parseX() per production, with its grammar rule in the comment above
// it (the expressions in ParseExpressions.cpp). After an
// error the parser skips to the end of the declaration or statement and goes
// on, so a run reports several errors.
//
//===----------------------------------------------------------------------===//

#include "energy/Frontend/Parser.h"
#include "energy/Frontend/Diagnostics.h"

#include "llvm/ADT/StringSwitch.h"

#include <cmath>

using namespace energy::frontend;

Parser::Parser(const llvm::SourceMgr &sourceMgr, unsigned bufferId,
               DiagnosticEngine &diagnostics)
    : lexer(sourceMgr, bufferId, diagnostics), diagnostics(diagnostics) {
  token = lexer.lexToken();
  previousTokenEnd = token.getLoc();
}

//===----------------------------------------------------------------------===//
// Token handling
//===----------------------------------------------------------------------===//

void Parser::consumeToken() {
  if (token.is(TokenKind::eof))
    return;
  previousTokenEnd = token.getEndLoc();
  token = lexer.lexToken();
}

bool Parser::consumeIf(TokenKind kind) {
  if (token.isNot(kind))
    return false;
  consumeToken();
  return true;
}

static std::string describeToken(const Token &token) {
  switch (token.getKind()) {
  case TokenKind::eof:
    return "end of file";
  case TokenKind::identifier:
  case TokenKind::number:
    return ("`" + token.getSpelling() + "`").str();
  default:
    if (token.isKeyword())
      return ("keyword `" + token.getSpelling() + "`").str();
    return ("`" + token.getSpelling() + "`").str();
  }
}

void Parser::reportUnexpected(const llvm::Twine &expected) {
  // The lexer already reported a bad token; do not pile on.
  if (token.is(TokenKind::error))
    return;
  diagnostics.error(token.getLoc(),
                    "expected " + expected + ", found " + describeToken(token),
                    {token.getRange()});
}

bool Parser::expect(TokenKind kind, const llvm::Twine &context) {
  if (consumeIf(kind))
    return true;
  if (context.isTriviallyEmpty())
    reportUnexpected(getTokenKindDescription(kind));
  else
    reportUnexpected(getTokenKindDescription(kind) + " " + context);
  return false;
}

bool Parser::expectIdentifier(llvm::StringRef &name, llvm::SMRange &range,
                              const llvm::Twine &what) {
  if (token.isNot(TokenKind::identifier)) {
    reportUnexpected(what);
    return false;
  }
  name = token.getSpelling();
  range = token.getRange();
  consumeToken();
  return true;
}

static bool isStatementKeyword(TokenKind kind) {
  switch (kind) {
  case TokenKind::kw_dim:
  case TokenKind::kw_input:
  case TokenKind::kw_param:
  case TokenKind::kw_state:
  case TokenKind::kw_const:
  case TokenKind::kw_let:
  case TokenKind::kw_fn:
  case TokenKind::kw_energy:
  case TokenKind::kw_loss:
  case TokenKind::kw_output:
  case TokenKind::kw_dynamics:
  case TokenKind::kw_steps:
  case TokenKind::kw_order:
  case TokenKind::kw_model:
    return true;
  default:
    return false;
  }
}

void Parser::skipToStatementEnd() {
  unsigned braceDepth = 0;
  while (token.isNot(TokenKind::eof)) {
    if (braceDepth == 0 && isStatementKeyword(token.getKind()))
      return;
    switch (token.getKind()) {
    case TokenKind::semicolon:
      if (braceDepth == 0) {
        consumeToken();
        return;
      }
      break;
    case TokenKind::l_brace:
      ++braceDepth;
      break;
    case TokenKind::r_brace:
      if (braceDepth == 0)
        return;
      --braceDepth;
      break;
    default:
      break;
    }
    consumeToken();
  }
}

//===----------------------------------------------------------------------===//
// Declarations
//===----------------------------------------------------------------------===//

// model ::= `model` identifier `{` declaration* `}`
std::unique_ptr<ModelSpec> Parser::parseModel() {
  if (token.isNot(TokenKind::kw_model)) {
    if (token.isNot(TokenKind::error))
      diagnostics.error(token.getLoc(),
                        "expected `model`, found " + describeToken(token));
    return nullptr;
  }
  llvm::SMLoc start = token.getLoc();
  consumeToken();
  auto model = std::make_unique<ModelSpec>();
  if (!expectIdentifier(model->name, model->nameRange, "a model name"))
    return nullptr;
  llvm::SMRange braceRange = token.getRange();
  if (!expect(TokenKind::l_brace, "after the model name"))
    return nullptr;

  while (token.isNot(TokenKind::r_brace) && token.isNot(TokenKind::eof)) {
    const char *before = token.getSpelling().data();
    if (!parseDeclaration(*model)) {
      skipToStatementEnd();
      if (token.getSpelling().data() == before)
        consumeToken();
    }
  }
  if (token.is(TokenKind::eof)) {
    diagnostics.error(token.getLoc(),
                      "expected `}` to close model `" + model->name + "`");
    diagnostics.note(braceRange.Start,
                     "model `" + model->name + "` starts here", {braceRange});
    model->range = {start, previousEnd()};
    return model;
  }
  consumeToken(); // `}`
  model->range = {start, previousEnd()};
  if (token.is(TokenKind::kw_model))
    diagnostics.error(token.getLoc(), "only one model per file is allowed");
  else if (token.isNot(TokenKind::eof))
    reportUnexpected("end of file after model `" + model->name + "`");
  return model;
}

// declaration ::= dimDecl | tensorDecl | constDecl | letDecl | fnDecl
//               | energyDecl | lossDecl | outputDecl | dynamicsBlock
bool Parser::parseDeclaration(ModelSpec &model) {
  switch (token.getKind()) {
  case TokenKind::kw_dim:
    return parseDimDecl(model);
  case TokenKind::kw_input:
    return parseTensorDecl(model, TensorRole::Input);
  case TokenKind::kw_param:
    return parseTensorDecl(model, TensorRole::Param);
  case TokenKind::kw_state:
    return parseTensorDecl(model, TensorRole::State);
  case TokenKind::kw_const:
    return parseConstDecl(model);
  case TokenKind::kw_let:
    return parseLetDecl(model);
  case TokenKind::kw_fn:
    return parseFnDecl(model);
  case TokenKind::kw_energy:
  case TokenKind::kw_loss:
    return parseTermDecl(model);
  case TokenKind::kw_output:
    return parseOutputDecl(model);
  case TokenKind::kw_dynamics:
    return parseDynamicsBlock(model);
  default:
    reportUnexpected("a declaration (`dim`, `input`, `param`, `state`, "
                     "`const`, `let`, `fn`, `energy`, `loss`, `output` or "
                     "`dynamics`)");
    return false;
  }
}

// dimDecl ::= `dim` dimItem (`,` dimItem)* `;`
// dimItem ::= identifier (`=` expression)?
bool Parser::parseDimDecl(ModelSpec &model) {
  consumeToken(); // `dim`
  do {
    llvm::StringRef name;
    llvm::SMRange nameRange;
    if (!expectIdentifier(name, nameRange, "a dim name"))
      return false;
    ExprPtr value;
    if (consumeIf(TokenKind::equal)) {
      value = parseExpression();
      if (!value)
        return false;
    }
    model.decls.push_back(std::make_unique<DimDecl>(
        name, nameRange, llvm::SMRange(nameRange.Start, previousEnd()),
        std::move(value)));
  } while (consumeIf(TokenKind::comma));
  return expect(TokenKind::semicolon, "after dim declaration");
}

// shape ::= `[` (identifier (`,` identifier)*)? `]`
bool Parser::parseShape(std::vector<DimRef> &dims) {
  if (!expect(TokenKind::l_square, "to start a shape"))
    return false;
  if (consumeIf(TokenKind::r_square))
    return true;
  do {
    DimRef dim;
    if (!expectIdentifier(dim.name, dim.range, "a dim name in shape"))
      return false;
    dims.push_back(dim);
  } while (consumeIf(TokenKind::comma));
  return expect(TokenKind::r_square, "to end the shape");
}

// initializer ::= `zeros` | `ones` | `eye` | `normal` `(` expr `,` expr `)`
//               | `uniform` `(` expr `,` expr `)` | identifier
bool Parser::parseInitializer(Initializer &initializer) {
  llvm::SMLoc start = token.getLoc();
  llvm::StringRef name;
  llvm::SMRange nameRange;
  if (!expectIdentifier(name, nameRange,
                        "an initialiser (`zeros`, `ones`, `eye`, `normal`, "
                        "`uniform` or a tensor name)"))
    return false;
  initializer.kind = llvm::StringSwitch<Initializer::Kind>(name)
                         .Case("zeros", Initializer::Kind::Zeros)
                         .Case("ones", Initializer::Kind::Ones)
                         .Case("eye", Initializer::Kind::Eye)
                         .Case("normal", Initializer::Kind::Normal)
                         .Case("uniform", Initializer::Kind::Uniform)
                         .Default(Initializer::Kind::Tensor);
  if (initializer.kind == Initializer::Kind::Tensor)
    initializer.tensorName = name;
  if (initializer.kind == Initializer::Kind::Normal ||
      initializer.kind == Initializer::Kind::Uniform) {
    if (!expect(TokenKind::l_paren, "after `" + name + "`"))
      return false;
    if (!parseExpressionList(initializer.args, TokenKind::r_paren))
      return false;
  }
  initializer.range = {start, previousEnd()};
  return true;
}

// tensorDecl ::= (`input` | `param` | `state`) tensorItem (`,` tensorItem)*
//                `;`
// tensorItem ::= identifier `:` shape (`=` initializer)?
bool Parser::parseTensorDecl(ModelSpec &model, TensorRole role) {
  consumeToken(); // role keyword
  do {
    llvm::StringRef name;
    llvm::SMRange nameRange;
    if (!expectIdentifier(name, nameRange, "a tensor name"))
      return false;
    if (!expect(TokenKind::colon, "after tensor name"))
      return false;
    std::vector<DimRef> dims;
    if (!parseShape(dims))
      return false;
    Initializer initializer;
    if (consumeIf(TokenKind::equal) && !parseInitializer(initializer))
      return false;
    model.decls.push_back(std::make_unique<TensorDecl>(
        role, name, nameRange, llvm::SMRange(nameRange.Start, previousEnd()),
        std::move(dims), std::move(initializer)));
  } while (consumeIf(TokenKind::comma));
  return expect(TokenKind::semicolon, "after tensor declaration");
}

// constDecl ::= `const` identifier `=` expression
//               (`,` identifier `=` expression)* `;`
bool Parser::parseConstDecl(ModelSpec &model) {
  consumeToken(); // `const`
  do {
    llvm::StringRef name;
    llvm::SMRange nameRange;
    if (!expectIdentifier(name, nameRange, "a const name"))
      return false;
    if (!expect(TokenKind::equal, "after const name"))
      return false;
    ExprPtr value = parseExpression();
    if (!value)
      return false;
    model.decls.push_back(std::make_unique<ConstDecl>(
        name, nameRange, llvm::SMRange(nameRange.Start, previousEnd()),
        std::move(value)));
  } while (consumeIf(TokenKind::comma));
  return expect(TokenKind::semicolon, "after const declaration");
}

// indexDomain ::= binding (`,` binding)* (`where` expression)?
//                 (`;` `temp` `=` expression)?     (temp: reductions only)
// binding     ::= identifier `:` additiveExpression
bool Parser::parseIndexDomain(IndexDomain &domain, TokenKind close,
                              ExprPtr *temperature) {
  do {
    IndexBinding binding;
    if (!expectIdentifier(binding.name, binding.nameRange, "an index name"))
      return false;
    if (!expect(TokenKind::colon, "after index name"))
      return false;
    binding.size = parseBinary(/*additive*/ 4);
    if (!binding.size)
      return false;
    domain.bindings.push_back(std::move(binding));
  } while (consumeIf(TokenKind::comma));
  if (consumeIf(TokenKind::kw_where)) {
    domain.predicate = parseExpression();
    if (!domain.predicate)
      return false;
  }
  if (temperature && consumeIf(TokenKind::semicolon)) {
    if (!expect(TokenKind::kw_temp, "after `;` in a reduction"))
      return false;
    if (!expect(TokenKind::equal, "after `temp`"))
      return false;
    *temperature = parseExpression();
    if (!*temperature)
      return false;
  }
  return expect(close, close == TokenKind::r_paren
                           ? "to close the reduction's domain"
                           : "to close the index list");
}

// letDecl ::= `let` identifier (`[` indexDomain `]`)? `=` expression `;`
bool Parser::parseLetDecl(ModelSpec &model) {
  consumeToken(); // `let`
  llvm::StringRef name;
  llvm::SMRange nameRange;
  if (!expectIdentifier(name, nameRange, "a let name"))
    return false;
  IndexDomain domain;
  if (consumeIf(TokenKind::l_square) &&
      !parseIndexDomain(domain, TokenKind::r_square, nullptr))
    return false;
  if (!expect(TokenKind::equal, "after let name"))
    return false;
  ExprPtr body = parseExpression();
  if (!body)
    return false;
  model.decls.push_back(std::make_unique<LetDecl>(
      name, nameRange, llvm::SMRange(nameRange.Start, previousEnd()),
      std::move(domain), std::move(body)));
  return expect(TokenKind::semicolon, "after let declaration");
}

// fnDecl  ::= `fn` identifier `(` (fnParam (`,` fnParam)*)? `)` `->` shape
//             `=` expression `;`
// fnParam ::= identifier `:` shape
bool Parser::parseFnDecl(ModelSpec &model) {
  consumeToken(); // `fn`
  llvm::StringRef name;
  llvm::SMRange nameRange;
  if (!expectIdentifier(name, nameRange, "a function name"))
    return false;
  if (!expect(TokenKind::l_paren, "after function name"))
    return false;
  std::vector<FnParam> params;
  if (!consumeIf(TokenKind::r_paren)) {
    do {
      FnParam param;
      if (!expectIdentifier(param.name, param.nameRange, "a parameter name"))
        return false;
      if (!expect(TokenKind::colon, "after parameter name"))
        return false;
      if (!parseShape(param.dims))
        return false;
      params.push_back(std::move(param));
    } while (consumeIf(TokenKind::comma));
    if (!expect(TokenKind::r_paren, "to close the parameter list"))
      return false;
  }
  if (!expect(TokenKind::right_arrow, "and a result shape"))
    return false;
  std::vector<DimRef> resultDims;
  if (!parseShape(resultDims))
    return false;
  if (!expect(TokenKind::equal, "before the function body"))
    return false;
  ExprPtr body = parseExpression();
  if (!body)
    return false;
  model.decls.push_back(std::make_unique<FnDecl>(
      name, nameRange, llvm::SMRange(nameRange.Start, previousEnd()),
      std::move(params), std::move(resultDims), std::move(body)));
  return expect(TokenKind::semicolon, "after function declaration");
}

// energyDecl ::= `energy` identifier `=` expression `;`
// lossDecl   ::= `loss` identifier `=` expression `;`
bool Parser::parseTermDecl(ModelSpec &model) {
  bool loss = token.is(TokenKind::kw_loss);
  llvm::StringRef keyword = token.getSpelling();
  consumeToken(); // `energy` or `loss`
  llvm::StringRef name;
  llvm::SMRange nameRange;
  if (!expectIdentifier(name, nameRange,
                        loss ? "a loss name" : "an energy name"))
    return false;
  if (!expect(TokenKind::equal, "after " + keyword + " name"))
    return false;
  ExprPtr body = parseExpression();
  if (!body)
    return false;
  llvm::SMRange range(nameRange.Start, previousEnd());
  if (loss)
    model.decls.push_back(
        std::make_unique<LossDecl>(name, nameRange, range, std::move(body)));
  else
    model.decls.push_back(
        std::make_unique<EnergyDecl>(name, nameRange, range, std::move(body)));
  return expect(TokenKind::semicolon, "after " + keyword + " declaration");
}

// outputDecl ::= `output` identifier (`[` indexDomain `]`)? `=` expression
//                `;`
bool Parser::parseOutputDecl(ModelSpec &model) {
  consumeToken(); // `output`
  llvm::StringRef name;
  llvm::SMRange nameRange;
  if (!expectIdentifier(name, nameRange, "an output name"))
    return false;
  IndexDomain domain;
  if (consumeIf(TokenKind::l_square) &&
      !parseIndexDomain(domain, TokenKind::r_square, nullptr))
    return false;
  if (!expect(TokenKind::equal, "after output name"))
    return false;
  ExprPtr body = parseExpression();
  if (!body)
    return false;
  model.decls.push_back(std::make_unique<OutputDecl>(
      name, nameRange, llvm::SMRange(nameRange.Start, previousEnd()),
      std::move(domain), std::move(body)));
  return expect(TokenKind::semicolon, "after output declaration");
}

// dynamicsBlock ::= `dynamics` `{` dynamicsStatement* `}`
bool Parser::parseDynamicsBlock(ModelSpec &model) {
  llvm::SMLoc start = token.getLoc();
  llvm::SMRange keywordRange = token.getRange();
  consumeToken(); // `dynamics`
  if (model.dynamics) {
    diagnostics.error(start, "a model has at most one `dynamics` block",
                      {keywordRange});
    diagnostics.note(model.dynamics->range.Start,
                     "see previous `dynamics` block here");
  }
  llvm::SMRange braceRange = token.getRange();
  if (!expect(TokenKind::l_brace, "after `dynamics`"))
    return false;
  auto block = std::make_unique<DynamicsBlock>();
  while (token.isNot(TokenKind::r_brace) && token.isNot(TokenKind::eof)) {
    if (isStatementKeyword(token.getKind()) &&
        token.isNot(TokenKind::kw_steps) && token.isNot(TokenKind::kw_order))
      break; // most likely a missing `}`
    const char *before = token.getSpelling().data();
    if (!parseDynamicsStatement(*block)) {
      skipToStatementEnd();
      if (token.getSpelling().data() == before)
        consumeToken();
    }
  }
  if (token.isNot(TokenKind::r_brace)) {
    reportUnexpected("`}` to close the `dynamics` block");
    diagnostics.note(braceRange.Start, "`dynamics` block starts here",
                     {braceRange});
  } else {
    consumeToken();
  }
  block->range = {start, previousEnd()};
  if (!model.dynamics)
    model.dynamics = std::move(block);
  return true;
}

// dynamicsStatement ::= updateRule
//                     | `steps` expression (`until` expression)? `;`
//                     | `order` `sequential` `;`
//                     | `backward` identifier (`(` option (`,` option)* `)`)?
//                       `;`
bool Parser::parseDynamicsStatement(DynamicsBlock &block) {
  if (token.is(TokenKind::identifier) && token.getSpelling() == "backward" &&
      lexer.peekToken(0).is(TokenKind::identifier))
    return parseBackwardClause(block);
  switch (token.getKind()) {
  case TokenKind::kw_steps:
    return parseStepsClause(block);
  case TokenKind::kw_order: {
    llvm::SMLoc start = token.getLoc();
    consumeToken();
    if (!expect(TokenKind::kw_sequential, "after `order`"))
      return false;
    if (block.sequential)
      diagnostics.error(start, "duplicate `order sequential`");
    block.sequential = true;
    return expect(TokenKind::semicolon, "after `order sequential`");
  }
  case TokenKind::identifier:
    return parseUpdateRule(block);
  default:
    reportUnexpected("a rule (`node: optimizer(...)` or `node <- value`), "
                     "`steps` or `order`");
    return false;
  }
}

// stepsClause ::= `steps` expression (`until` expression)? `;`
bool Parser::parseStepsClause(DynamicsBlock &block) {
  llvm::SMLoc start = token.getLoc();
  llvm::SMRange keywordRange = token.getRange();
  consumeToken(); // `steps`
  StepsClause clause;
  clause.count = parseBinary(/*additive*/ 4);
  if (!clause.count)
    return false;
  if (consumeIf(TokenKind::kw_until)) {
    clause.until = parseExpression();
    if (!clause.until)
      return false;
  }
  clause.range = {start, previousEnd()};
  if (block.steps) {
    diagnostics.error(start, "duplicate `steps` statement", {keywordRange});
    diagnostics.note(block.steps->range.Start,
                     "see previous `steps` statement here");
  } else {
    block.steps = std::move(clause);
  }
  return expect(TokenKind::semicolon, "after `steps` statement");
}

bool Parser::parseBackwardClause(DynamicsBlock &block) {
  llvm::SMLoc start = token.getLoc();
  llvm::SMRange keywordRange = token.getRange();
  consumeToken(); // `backward`
  BackwardClause clause;
  if (!expectIdentifier(clause.mode, clause.modeRange,
                        "`implicit` or `unrolled` after `backward`"))
    return false;
  if (consumeIf(TokenKind::l_paren) && !consumeIf(TokenKind::r_paren)) {
    do {
      OptimizerOption option;
      if (!expectIdentifier(option.name, option.nameRange,
                            "an option `name = value`") ||
          !expect(TokenKind::equal, "after the option's name"))
        return false;
      option.value = parseExpression();
      if (!option.value)
        return false;
      clause.options.push_back(std::move(option));
    } while (consumeIf(TokenKind::comma));
    if (!expect(TokenKind::r_paren, "to close the `backward` options"))
      return false;
  }
  clause.range = {start, previousEnd()};
  if (block.backward) {
    diagnostics.error(start, "duplicate `backward` statement", {keywordRange});
    diagnostics.note(block.backward->range.Start,
                     "see previous `backward` statement here");
  } else {
    block.backward = std::move(clause);
  }
  return expect(TokenKind::semicolon, "after `backward` statement");
}

// updateRule   ::= identifier `:` identifier (`(` optimizerArg
//                  (`,` optimizerArg)* `)`)? `;`
//                | identifier `<-` expression `;`
// optimizerArg ::= identifier `=` expression | identifier
bool Parser::parseUpdateRule(DynamicsBlock &block) {
  UpdateRule rule;
  llvm::SMLoc start = token.getLoc();
  rule.node = token.getSpelling();
  rule.nodeRange = token.getRange();
  consumeToken();
  if (consumeIf(TokenKind::left_arrow)) {
    rule.kind = UpdateRule::Kind::Explicit;
    rule.value = parseExpression();
    if (!rule.value)
      return false;
  } else {
    if (token.isNot(TokenKind::colon)) {
      reportUnexpected("`:` or `<-` after node name `" + rule.node + "`");
      return false;
    }
    consumeToken();
    if (!expectIdentifier(rule.optimizer, rule.optimizerRange,
                          "an optimizer name"))
      return false;
    if (consumeIf(TokenKind::l_paren) && !consumeIf(TokenKind::r_paren)) {
      do {
        llvm::StringRef name;
        llvm::SMRange nameRange;
        if (!expectIdentifier(name, nameRange,
                              "an optimizer option `name = value`"))
          return false;
        if (consumeIf(TokenKind::equal)) {
          ExprPtr value = parseExpression();
          if (!value)
            return false;
          rule.options.push_back({name, nameRange, std::move(value)});
        } else {
          rule.positional.push_back({name, nameRange});
        }
      } while (consumeIf(TokenKind::comma));
      if (!expect(TokenKind::r_paren, "to close the optimizer options"))
        return false;
    }
  }
  rule.range = {start, previousEnd()};
  block.rules.push_back(std::move(rule));
  return expect(TokenKind::semicolon, "after rule");
}
