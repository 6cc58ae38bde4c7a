//===- Json.cpp - The strict JSON of safetensors headers ------------------===//
//
// Every access to the text is preceded by a bounds check; nesting is
// counted so that recursion is bounded by Reader::maxDepth.
//
//===----------------------------------------------------------------------===//

#include "Json.h"

#include <charconv>
#include <cstdio>

using namespace energy;
using namespace energy::json;

/// The length of the well-formed UTF-8 sequence at `text[position]`, or 0 if
/// there is none (Unicode 15, table 3-7).
static size_t utf8SequenceLength(std::string_view text, size_t position) {
  auto byteAt = [&](size_t offset) -> unsigned {
    return position + offset < text.size()
               ? static_cast<unsigned char>(text[position + offset])
               : 0x100; // Past the end: matches no range below.
  };
  auto isContinuation = [](unsigned byte) {
    return byte >= 0x80 && byte <= 0xBF;
  };
  unsigned lead = byteAt(0);
  if (lead <= 0x7F)
    return 1;
  if (lead >= 0xC2 && lead <= 0xDF)
    return isContinuation(byteAt(1)) ? 2 : 0;
  if (lead >= 0xE0 && lead <= 0xEF) {
    unsigned second = byteAt(1);
    unsigned low = lead == 0xE0 ? 0xA0 : 0x80;  // No overlong forms.
    unsigned high = lead == 0xED ? 0x9F : 0xBF; // No surrogates.
    return second >= low && second <= high && isContinuation(byteAt(2)) ? 3 : 0;
  }
  if (lead >= 0xF0 && lead <= 0xF4) {
    unsigned second = byteAt(1);
    unsigned low = lead == 0xF0 ? 0x90 : 0x80;  // No overlong forms.
    unsigned high = lead == 0xF4 ? 0x8F : 0xBF; // Nothing above U+10FFFF.
    return second >= low && second <= high && isContinuation(byteAt(2)) &&
                   isContinuation(byteAt(3))
               ? 4
               : 0;
  }
  return 0;
}

bool json::isValidUtf8(std::string_view text) {
  for (size_t position = 0; position < text.size();) {
    size_t length = utf8SequenceLength(text, position);
    if (length == 0)
      return false;
    position += length;
  }
  return true;
}

void json::appendQuoted(std::string &out, std::string_view text) {
  out += '"';
  for (char c : text) {
    unsigned char byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20) {
      char escape[7];
      std::snprintf(escape, sizeof escape, "\\u%04x", byte);
      out += escape;
    } else {
      out += c;
    }
  }
  out += '"';
}

/// Appends the UTF-8 encoding of `codePoint` (a scalar value) to `out`.
static void appendUtf8(std::string &out, uint32_t codePoint) {
  if (codePoint < 0x80) {
    out += static_cast<char>(codePoint);
  } else if (codePoint < 0x800) {
    out += static_cast<char>(0xC0 | (codePoint >> 6));
    out += static_cast<char>(0x80 | (codePoint & 0x3F));
  } else if (codePoint < 0x10000) {
    out += static_cast<char>(0xE0 | (codePoint >> 12));
    out += static_cast<char>(0x80 | ((codePoint >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (codePoint & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (codePoint >> 18));
    out += static_cast<char>(0x80 | ((codePoint >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((codePoint >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (codePoint & 0x3F));
  }
}

static bool isDigit(char c) { return c >= '0' && c <= '9'; }

void Reader::skipWhitespace() {
  while (position < text.size() &&
         (text[position] == ' ' || text[position] == '\t' ||
          text[position] == '\n' || text[position] == '\r'))
    ++position;
}

bool Reader::consume(char c) {
  skipWhitespace();
  if (position < text.size() && text[position] == c) {
    ++position;
    return true;
  }
  return false;
}

Status Reader::errorHere(const std::string &message) const {
  if (position >= text.size())
    return Status::error("at byte " + std::to_string(position) +
                         " (the end): " + message);
  return Status::error("at byte " + std::to_string(position) + ": " + message);
}

Status Reader::enterNesting() {
  if (++depth > maxDepth)
    return errorHere("nesting deeper than " + std::to_string(maxDepth));
  return Status::success();
}

Status
Reader::readObject(const std::function<Status(std::string key)> &readMember) {
  if (!consume('{'))
    return errorHere("expected an object");
  if (Status nesting = enterNesting(); !nesting)
    return nesting;
  if (!consume('}')) {
    while (true) {
      skipWhitespace();
      if (position >= text.size() || text[position] != '"')
        return errorHere("expected a string key");
      std::string key;
      if (Status status = readString(key); !status)
        return status;
      if (!consume(':'))
        return errorHere("expected ':'");
      if (Status status = readMember(std::move(key)); !status)
        return status;
      if (consume(','))
        continue;
      if (consume('}'))
        break;
      return errorHere("expected ',' or '}'");
    }
  }
  --depth;
  return Status::success();
}

Status Reader::readArray(const std::function<Status()> &readElement) {
  if (!consume('['))
    return errorHere("expected an array");
  if (Status nesting = enterNesting(); !nesting)
    return nesting;
  if (!consume(']')) {
    while (true) {
      if (Status status = readElement(); !status)
        return status;
      if (consume(','))
        continue;
      if (consume(']'))
        break;
      return errorHere("expected ',' or ']'");
    }
  }
  --depth;
  return Status::success();
}

Status Reader::readHexQuad(uint32_t &codePoint) {
  codePoint = 0;
  for (int i = 0; i < 4; ++i, ++position) {
    if (position >= text.size())
      return errorHere("unterminated \\u escape");
    char c = text[position];
    uint32_t digit;
    if (isDigit(c))
      digit = c - '0';
    else if (c >= 'a' && c <= 'f')
      digit = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F')
      digit = c - 'A' + 10;
    else
      return errorHere("expected a hex digit in a \\u escape");
    codePoint = codePoint * 16 + digit;
  }
  return Status::success();
}

Status Reader::readString(std::string &out) {
  out.clear();
  if (!consume('"'))
    return errorHere("expected a string");
  while (true) {
    if (position >= text.size())
      return errorHere("unterminated string");
    char c = text[position];
    unsigned char byte = static_cast<unsigned char>(c);
    if (c == '"') {
      ++position;
      return Status::success();
    }
    if (byte < 0x20)
      return errorHere("control character in a string");
    if (byte >= 0x80) {
      size_t length = utf8SequenceLength(text, position);
      if (length == 0)
        return errorHere("invalid UTF-8 in a string");
      out.append(text.substr(position, length));
      position += length;
      continue;
    }
    ++position;
    if (c != '\\') {
      out += c;
      continue;
    }
    if (position >= text.size())
      return errorHere("unterminated escape");
    char escape = text[position++];
    switch (escape) {
    case '"':
    case '\\':
    case '/':
      out += escape;
      break;
    case 'b':
      out += '\b';
      break;
    case 'f':
      out += '\f';
      break;
    case 'n':
      out += '\n';
      break;
    case 'r':
      out += '\r';
      break;
    case 't':
      out += '\t';
      break;
    case 'u': {
      uint32_t codePoint;
      if (Status status = readHexQuad(codePoint); !status)
        return status;
      if (codePoint >= 0xDC00 && codePoint <= 0xDFFF)
        return errorHere("unpaired low surrogate in a \\u escape");
      if (codePoint >= 0xD800 && codePoint <= 0xDBFF) {
        if (text.substr(position, 2) != "\\u")
          return errorHere("unpaired high surrogate in a \\u escape");
        position += 2;
        uint32_t low;
        if (Status status = readHexQuad(low); !status)
          return status;
        if (low < 0xDC00 || low > 0xDFFF)
          return errorHere("unpaired high surrogate in a \\u escape");
        codePoint = 0x10000 + ((codePoint - 0xD800) << 10) + (low - 0xDC00);
      }
      appendUtf8(out, codePoint);
      break;
    }
    default:
      --position;
      return errorHere("invalid escape in a string");
    }
  }
}

Status Reader::readInteger(int64_t &out) {
  skipWhitespace();
  bool negative = position < text.size() && text[position] == '-';
  if (negative)
    ++position;
  if (position >= text.size() || !isDigit(text[position]))
    return errorHere("expected an integer");
  if (text[position] == '0' && position + 1 < text.size() &&
      isDigit(text[position + 1]))
    return errorHere("leading zero in a number");
  // The magnitude may reach 2^63 when negative.
  const uint64_t limit = negative ? uint64_t(1) << 63 : (uint64_t(1) << 63) - 1;
  uint64_t magnitude = 0;
  for (; position < text.size() && isDigit(text[position]); ++position) {
    uint64_t digit = text[position] - '0';
    if (magnitude > (limit - digit) / 10)
      return errorHere("integer out of range");
    magnitude = magnitude * 10 + digit;
  }
  if (position < text.size() &&
      (text[position] == '.' || text[position] == 'e' || text[position] == 'E'))
    return errorHere("expected an integer, found a fractional number");
  out = negative ? static_cast<int64_t>(0 - magnitude)
                 : static_cast<int64_t>(magnitude);
  return Status::success();
}

Status Reader::skipNumber() {
  auto skipDigits = [&] {
    size_t start = position;
    while (position < text.size() && isDigit(text[position]))
      ++position;
    return position > start;
  };
  if (position < text.size() && text[position] == '-')
    ++position;
  if (position < text.size() && text[position] == '0') {
    ++position;
  } else if (!skipDigits()) {
    return errorHere("expected a digit");
  }
  if (position < text.size() && text[position] == '.') {
    ++position;
    if (!skipDigits())
      return errorHere("expected a digit after '.'");
  }
  if (position < text.size() &&
      (text[position] == 'e' || text[position] == 'E')) {
    ++position;
    if (position < text.size() &&
        (text[position] == '+' || text[position] == '-'))
      ++position;
    if (!skipDigits())
      return errorHere("expected a digit in the exponent");
  }
  return Status::success();
}

Status Reader::skipLiteral(std::string_view literal) {
  if (text.substr(position, literal.size()) != literal)
    return errorHere("unexpected character");
  position += literal.size();
  return Status::success();
}

std::optional<Reader::ValueKind> Reader::peekKind() {
  skipWhitespace();
  if (position >= text.size())
    return std::nullopt;
  char c = text[position];
  switch (c) {
  case '{':
    return ValueKind::Object;
  case '[':
    return ValueKind::Array;
  case '"':
    return ValueKind::String;
  case 't':
  case 'f':
    return ValueKind::Bool;
  case 'n':
    return ValueKind::Null;
  default:
    if (c == '-' || isDigit(c))
      return ValueKind::Number;
    return std::nullopt;
  }
}

Status Reader::readNumber(double &value, std::optional<int64_t> &integer) {
  skipWhitespace();
  size_t start = position;
  if (Status status = skipNumber(); !status)
    return status;
  std::string_view number = text.substr(start, position - start);
  const char *begin = number.data(), *end = begin + number.size();
  // from_chars, unlike strtod, ignores the locale.
  if (std::from_chars(begin, end, value).ec != std::errc()) {
    position = start;
    return errorHere("number out of the range of a double");
  }
  int64_t whole;
  auto parsedInteger = std::from_chars(begin, end, whole);
  if (parsedInteger.ec == std::errc() && parsedInteger.ptr == end)
    integer = whole;
  else
    integer.reset();
  return Status::success();
}

Status Reader::readBool(bool &out) {
  skipWhitespace();
  out = text.substr(position, 4) == "true";
  return skipLiteral(out ? "true" : "false");
}

Status Reader::readNull() {
  skipWhitespace();
  return skipLiteral("null");
}

Status Reader::skipValue() {
  skipWhitespace();
  if (position >= text.size())
    return errorHere("expected a value");
  switch (text[position]) {
  case '{':
    return readObject([this](std::string) { return skipValue(); });
  case '[':
    return readArray([this] { return skipValue(); });
  case '"': {
    std::string ignored;
    return readString(ignored);
  }
  case 't':
    return skipLiteral("true");
  case 'f':
    return skipLiteral("false");
  case 'n':
    return skipLiteral("null");
  default:
    if (text[position] == '-' || isDigit(text[position]))
      return skipNumber();
    return errorHere("unexpected character");
  }
}

Status Reader::expectEnd() {
  skipWhitespace();
  if (position < text.size())
    return errorHere("unexpected text after the value");
  return Status::success();
}
